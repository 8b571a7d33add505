//! Sieve at delivery (RFC 5228): each local recipient's active script
//! decides where its copy goes, with which flags, and what else happens
//! (redirects, vacation answers, rejections). The message is still stored
//! once: the scripts only choose the mailboxes and flags of its entries.
//!
//! Scripts see the head of the message (header and the start of the
//! body, [`FilterConfig::head_bytes`]), so memory per connection stays
//! bounded whatever the message's size. A script that fails to run falls
//! back to the implicit keep and the failure is logged: mail is never
//! lost to a script.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use store::{AccountEntry, AccountId, Directory, MailboxId, Resolution, ScriptOwner, Store};

use crate::auto_reply::{self, Original};
use crate::spam_check::{self, Known, MessageTokens, SpamConfig, TotalsCache};

/// The `[sieve]` section: Sieve at delivery.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilterConfig {
    /// Run the recipients' active scripts at delivery.
    pub enabled: bool,
    /// Bytes of each message kept for the scripts' tests: the header and
    /// the start of the body (the `body` test sees the body up to here).
    pub head_bytes: usize,
    /// Steps (tests and commands evaluated) one run may take.
    pub max_steps: u64,
    /// `redirect` actions one run may take.
    pub max_redirects: usize,
    /// Actions one run may take.
    pub max_actions: usize,
    /// How deep `include` may nest (RFC 6609 §3.2).
    pub max_include_depth: usize,
}

impl Default for FilterConfig {
    fn default() -> Self {
        let limits = sieve::Limits::default();
        FilterConfig {
            enabled: true,
            head_bytes: 256 * 1024,
            max_steps: limits.max_steps,
            max_redirects: limits.max_redirects,
            max_actions: limits.max_actions,
            max_include_depth: limits.max_include_depth,
        }
    }
}

impl FilterConfig {
    fn limits(&self) -> sieve::Limits {
        sieve::Limits {
            max_steps: self.max_steps,
            max_redirects: self.max_redirects,
            max_actions: self.max_actions,
            max_include_depth: self.max_include_depth,
        }
    }
}

/// The scripts' engine shared by every connection: settings and the
/// compiled scripts, compiled once per change of their text.
pub struct Filters {
    config: FilterConfig,
    spam: SpamConfig,
    totals: TotalsCache,
    compiled: Mutex<HashMap<AccountId, Compiled>>,
}

#[derive(Clone)]
struct Compiled {
    source: Arc<str>,
    script: Result<Arc<sieve::Script>, String>,
}

/// The head of a message, kept while it streams in.
#[derive(Default)]
pub(crate) struct Head {
    bytes: Vec<u8>,
    limit: usize,
    /// For the classifier alone, which reads header fields and text: the
    /// bodies of attachments are left out, so they fill nothing. Sieve
    /// scripts get the raw head (`body :raw`, `:content` of any type).
    text_only: Option<mime_tree::PartRewriter>,
}

impl Head {
    pub(crate) fn feed(&mut self, piece: &[u8]) {
        match &mut self.text_only {
            Some(_) if self.bytes.len() >= self.limit => self.text_only = None,
            Some(tap) => {
                tap.push(piece, &mut self.bytes);
                self.bytes.truncate(self.limit);
            }
            None => {
                let room = self.limit.saturating_sub(self.bytes.len());
                self.bytes
                    .extend_from_slice(&piece[..piece.len().min(room)]);
            }
        }
    }

    /// What was kept, once the message has ended.
    fn into_bytes(mut self) -> Vec<u8> {
        if let Some(tap) = self.text_only.take() {
            tap.finish(&mut self.bytes);
            self.bytes.truncate(self.limit);
        }
        self.bytes
    }
}

/// One local recipient of a message, as the envelope has it.
pub(crate) struct Recipient {
    /// The INBOX the address led to.
    pub inbox: MailboxId,
    /// Where its copy goes when nothing says otherwise (INBOX, or Junk
    /// for quarantined mail).
    pub default: MailboxId,
    /// The address given at RCPT.
    pub address: String,
}

/// What a message is, for the scripts.
pub(crate) struct Input<'a> {
    pub sender: &'a str,
    pub recipients: Vec<Recipient>,
    pub size: u64,
    /// RFC 5235 virustest: 1 when scanned clean, `None` when not scanned.
    pub virus: Option<u8>,
    /// The authenticated submitter, if any (envelope `auth`).
    pub auth: Option<String>,
    /// For mail from other servers: what the classifier adds to its own
    /// verdict. `None`: not scored.
    pub known: Option<Known>,
}

/// Where the message goes once the scripts have run.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Local mailboxes, each once.
    pub mailboxes: Vec<MailboxId>,
    /// Flags and keywords of each of `mailboxes`.
    pub mailbox_flags: Vec<(u32, Vec<String>)>,
    /// Remote addresses that scripts redirected to.
    pub remote: Vec<String>,
    /// Recipients whose script rejected the message, with the reason.
    pub rejected: Vec<(String, String)>,
    /// Vacation answers to send once the delivery is durable: (to,
    /// message).
    pub answers: Vec<(String, Vec<u8>)>,
    /// Rejection notices to the sender, sent only when the message was
    /// taken for someone else (otherwise the SMTP reply says it).
    pub notices: Vec<(String, Vec<u8>)>,
    /// Keys to remember per account once the delivery is durable.
    pub remember: Vec<(AccountId, Vec<(String, i64)>)>,
    /// What the scripts did, for the log line.
    pub summary: Vec<String>,
    /// The spam score fields to put on the message (the first scored
    /// recipient's: the message is stored once).
    pub spam_fields: Option<String>,
    /// Recipients whose copy the classifier sent to Junk.
    pub junked: usize,
}

impl Plan {
    /// Every recipient's copy to its default mailbox, as without scripts.
    pub(crate) fn unfiltered(mailboxes: Vec<MailboxId>) -> Plan {
        Plan {
            mailbox_flags: vec![(0, Vec::new()); mailboxes.len()],
            mailboxes,
            ..Default::default()
        }
    }

    fn target(&mut self, mailbox: MailboxId, flags: u32, keywords: Vec<String>) {
        if !self.mailboxes.contains(&mailbox) {
            self.mailboxes.push(mailbox);
            self.mailbox_flags.push((flags, keywords));
        }
    }
}

impl Filters {
    /// The engine with these settings; `None` when both Sieve and the
    /// spam classifier are off.
    pub fn new(config: FilterConfig, spam: SpamConfig) -> Option<Filters> {
        (config.enabled || spam.enabled).then(|| Filters {
            config,
            spam,
            totals: TotalsCache::default(),
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// Whether mail from other servers gets a spam score (and so loses
    /// any score fields it arrives with).
    pub(crate) fn scores(&self) -> bool {
        self.spam.enabled
    }

    /// Starts keeping a message's head when a script or the classifier
    /// will look at it (`scored`: the message comes from another server).
    pub(crate) fn head(
        &self,
        directory: &Directory,
        inboxes: &[MailboxId],
        scored: bool,
    ) -> Option<Head> {
        let scripted = self.config.enabled
            && directory.has_scripts()
            && inboxes.iter().any(|m| {
                directory
                    .account_by_inbox(*m)
                    .is_some_and(|a| directory.active_script(a.id).is_some())
            });
        let limit = if scripted {
            self.config.head_bytes
        } else if scored && self.spam.enabled && !inboxes.is_empty() {
            // The classifier reads at most this much text (twice for
            // encodings and markup).
            2 * spam::MAX_TEXT
        } else {
            return None;
        };
        Some(Head {
            bytes: Vec::new(),
            limit,
            text_only: (!scripted).then(mime_tree::PartRewriter::text_only),
        })
    }

    fn script(&self, account: AccountId, source: &Arc<str>) -> Result<Arc<sieve::Script>, String> {
        let mut compiled = self.compiled.lock().expect("not poisoned");
        if let Some(c) = compiled.get(&account) {
            if Arc::ptr_eq(&c.source, source) || c.source == *source {
                return c.script.clone();
            }
        }
        let script = sieve::compile(source)
            .map(Arc::new)
            .map_err(|e| e.to_string());
        compiled.insert(
            account,
            Compiled {
                source: Arc::clone(source),
                script: script.clone(),
            },
        );
        script
    }

    /// Runs each recipient's script and gathers where the message goes.
    pub(crate) async fn plan(
        &self,
        store: &Arc<dyn Store>,
        directory: Arc<Directory>,
        hostname: &str,
        head: Head,
        input: Input<'_>,
    ) -> Plan {
        let head = Arc::new(head.into_bytes());
        let message = Arc::new(sieve::Message::parse(&head).with_size(input.size));
        let original = Original::from_head(&head);
        let now = time::OffsetDateTime::now_utc();
        let mut plan = Plan::default();
        let mut tokens = MessageTokens::new(Arc::clone(&head));
        for mut rcpt in input.recipients {
            let Some(account) = directory.account_by_inbox(rcpt.inbox).cloned() else {
                plan.target(rcpt.default, 0, Vec::new());
                continue;
            };
            let judgement = match &input.known {
                Some(known) if self.spam.enabled => {
                    match spam_check::judge(
                        store,
                        account.spam_threshold.unwrap_or(self.spam.threshold),
                        &self.totals,
                        account.id,
                        &mut tokens,
                        known,
                    )
                    .await
                    {
                        Ok(j) => Some(j),
                        Err(e) => {
                            tracing::error!(account = %account.address, error = %e, "spam model unreadable; not scored");
                            None
                        }
                    }
                }
                _ => None,
            };
            if let Some(j) = &judgement {
                plan.summary.push(format!(
                    "{}:spam={:.1}{}",
                    account.address,
                    j.score.points,
                    if j.spam { "(junk)" } else { "" }
                ));
                if plan.spam_fields.is_none() {
                    plan.spam_fields = Some(j.fields.clone());
                }
                if j.spam && rcpt.default == rcpt.inbox {
                    if let Ok(junk) = store.special_use_of(&[rcpt.inbox], "\\Junk").await {
                        rcpt.default = junk[0];
                        plan.junked += 1;
                    }
                }
            }
            let active = directory
                .active_script(account.id)
                .filter(|_| self.config.enabled);
            let Some(active) = active else {
                plan.target(rcpt.default, 0, Vec::new());
                continue;
            };
            let outcome = match self.script(account.id, &active.source) {
                Ok(script) => {
                    let run = Run {
                        store: Arc::clone(store),
                        directory: Arc::clone(&directory),
                        account: account.clone(),
                        message: Arc::clone(&message),
                        envelope: sieve::Envelope {
                            from: input.sender.to_string(),
                            to: rcpt.address.clone(),
                            auth: input.auth.clone(),
                        },
                        virus: input.virus,
                        spam: judgement.as_ref().map(|j| sieve::SpamVerdict {
                            score: j.score.spamtest(),
                            percent: Some(j.score.percent()),
                        }),
                        limits: self.config.limits(),
                        now,
                    };
                    tokio::task::spawn_blocking(move || run.run(&script))
                        .await
                        .unwrap_or_else(|e| Err(format!("script run panicked: {e}")))
                }
                Err(e) => Err(format!("script does not compile: {e}")),
            };
            match outcome {
                Ok(outcome) => {
                    self.apply(
                        store,
                        &directory,
                        &account,
                        &rcpt,
                        outcome,
                        &original,
                        hostname,
                        input.sender,
                        &mut plan,
                    )
                    .await
                }
                Err(e) => {
                    // RFC 5228 §2.10.6: errors end in the implicit keep.
                    tracing::warn!(account = %account.address, script = %active.name, error = %e, "sieve script failed; message kept");
                    plan.summary.push(format!("{}:error-keep", account.address));
                    plan.target(rcpt.default, 0, Vec::new());
                }
            }
        }
        plan
    }

    /// Turns one recipient's actions into the plan.
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        store: &Arc<dyn Store>,
        directory: &Directory,
        account: &AccountEntry,
        rcpt: &Recipient,
        outcome: sieve::Outcome,
        original: &Original,
        hostname: &str,
        sender: &str,
        plan: &mut Plan,
    ) {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut remember: Vec<(String, i64)> = outcome
            .duplicates
            .iter()
            .map(|(id, secs)| (duplicate_key(id), now + *secs as i64))
            .collect();
        let mut did = Vec::new();
        for action in outcome.actions {
            match action {
                sieve::Action::Keep { flags } => {
                    let (bits, words) = split_flags(&flags);
                    plan.target(rcpt.default, bits, words);
                    did.push("keep".to_string());
                }
                sieve::Action::FileInto {
                    mailbox,
                    flags,
                    create,
                } => {
                    let (bits, words) = split_flags(&flags);
                    match find_mailbox(store, account.id, &mailbox, create).await {
                        Ok(id) => {
                            plan.target(id, bits, words);
                            did.push(format!("fileinto({mailbox})"));
                        }
                        Err(e) => {
                            // RFC 5228 §4.1: a failed fileinto keeps.
                            tracing::warn!(account = %account.address, mailbox = %mailbox, error = %e, "sieve fileinto failed; message kept");
                            plan.target(rcpt.default, bits, words);
                            did.push(format!("keep(no {mailbox})"));
                        }
                    }
                }
                sieve::Action::Redirect { address } => {
                    match directory.resolve(&address) {
                        // Local targets get the message as it is, without
                        // running their own scripts (no loops).
                        Resolution::Deliver { mailboxes, remote } => {
                            for m in mailboxes {
                                plan.target(m, 0, Vec::new());
                            }
                            plan.remote.extend(remote);
                        }
                        Resolution::NotLocal => plan.remote.push(address.clone()),
                        Resolution::UnknownUser => {
                            tracing::warn!(account = %account.address, to = %address, "sieve redirect to an unknown local address dropped");
                        }
                    }
                    did.push(format!("redirect({address})"));
                }
                sieve::Action::Reject { reason, .. } => {
                    plan.rejected.push((rcpt.address.clone(), reason));
                    did.push("reject".to_string());
                }
                sieve::Action::Vacation {
                    to,
                    from,
                    subject,
                    reason,
                    mime,
                    handle,
                    period_secs,
                } => {
                    let key = vacation_key(&handle, &to);
                    let sent = store
                        .sieve_memory_holds(account.id, &key)
                        .await
                        .unwrap_or(true);
                    if sent || to.is_empty() {
                        did.push("vacation(already answered)".to_string());
                        continue;
                    }
                    let from = from.unwrap_or_else(|| rcpt.address.clone());
                    let v = auto_reply::Vacation {
                        from: &from,
                        to: &to,
                        subject: &subject,
                        reason: &reason,
                        mime,
                    };
                    plan.answers
                        .push((to.clone(), auto_reply::vacation(&v, original, hostname)));
                    remember.push((key, now + period_secs as i64));
                    did.push(format!("vacation({to})"));
                }
            }
        }
        if did.is_empty() {
            did.push("discard".to_string());
        }
        for (recipient, reason) in plan.rejected.iter().filter(|(r, _)| r == &rcpt.address) {
            if !sender.is_empty() {
                let notice = auto_reply::rejection(recipient, sender, reason, original, hostname);
                plan.notices.push((sender.to_string(), notice));
            }
        }
        plan.summary
            .push(format!("{}:{}", account.address, did.join("+")));
        if !remember.is_empty() {
            plan.remember.push((account.id, remember));
        }
    }

    /// Sends the plan's answers and stores what it remembers; after the
    /// delivery is durable. Failures are logged: the delivery stands.
    pub(crate) async fn after_delivery(store: &Arc<dyn Store>, directory: &Directory, plan: Plan) {
        for (account, keys) in plan.remember {
            if let Err(e) = store.remember_in_sieve_memory(account, keys).await {
                tracing::error!(error = %e, "sieve memory not written");
            }
        }
        for (to, message) in plan.answers.into_iter().chain(plan.notices) {
            if let Err(e) = post(store, directory, &to, &message).await {
                tracing::error!(to = %to, error = %e, "automatic answer not sent");
            }
        }
    }
}

/// Stores a generated message for one address, local or remote, with the
/// null reverse-path (RFC 3834 §3.3; RFC 5230 §5.1).
async fn post(
    store: &Arc<dyn Store>,
    directory: &Directory,
    to: &str,
    message: &[u8],
) -> store::Result<()> {
    let (mailboxes, remote) = match directory.resolve(to) {
        Resolution::Deliver { mailboxes, remote } => (mailboxes, remote),
        Resolution::NotLocal => (Vec::new(), vec![to.to_string()]),
        Resolution::UnknownUser => return Ok(()),
    };
    let mut writer = store.message_writer();
    writer.write(message).await?;
    writer
        .deliver(store::Delivery {
            mailboxes,
            remote,
            eight_bit: !message.is_ascii(),
            ..Default::default()
        })
        .await?;
    Ok(())
}

/// The mailbox `fileinto` names, created first with `:create` (RFC 5490
/// §3.2).
async fn find_mailbox(
    store: &Arc<dyn Store>,
    account: AccountId,
    name: &str,
    create: bool,
) -> Result<MailboxId, String> {
    match store.mailbox(account, name).await {
        Ok(Some(m)) => Ok(m.id),
        Ok(None) if create => store
            .create_mailbox(account, name, None)
            .await
            .map(|m| m.id)
            .map_err(|e| e.to_string()),
        Ok(None) => Err("no such mailbox".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

fn vacation_key(handle: &str, sender: &str) -> String {
    format!("vacation:{handle}:{}", sender.to_lowercase())
}

fn duplicate_key(id: &str) -> String {
    format!("duplicate:{id}")
}

/// IMAP flags as the store keeps them: system flags as bits, keywords as
/// atoms (others are dropped: a script cannot make a delivery fail).
fn split_flags(flags: &[String]) -> (u32, Vec<String>) {
    let mut bits = 0;
    let mut words = Vec::new();
    for flag in flags {
        match flag.to_ascii_lowercase().as_str() {
            "\\seen" => bits |= store::FLAG_SEEN,
            "\\answered" => bits |= store::FLAG_ANSWERED,
            "\\flagged" => bits |= store::FLAG_FLAGGED,
            "\\deleted" => bits |= store::FLAG_DELETED,
            "\\draft" => bits |= store::FLAG_DRAFT,
            _ if is_atom(flag) => words.push(flag.clone()),
            _ => {}
        }
    }
    (bits, words)
}

/// RFC 3501 §9 atom: no specials, controls or spaces, and not a system
/// flag's backslash.
fn is_atom(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= 100
        && word
            .bytes()
            .all(|b| b > b' ' && b < 0x7f && !b"(){%*\"\\]".contains(&b))
}

/// One script run, on a blocking thread: the `Host` questions go to the
/// store synchronously from there.
struct Run {
    store: Arc<dyn Store>,
    directory: Arc<Directory>,
    account: AccountEntry,
    message: Arc<sieve::Message>,
    envelope: sieve::Envelope,
    virus: Option<u8>,
    spam: Option<sieve::SpamVerdict>,
    limits: sieve::Limits,
    now: time::OffsetDateTime,
}

impl Run {
    fn run(&self, script: &sieve::Script) -> Result<sieve::Outcome, String> {
        let addresses = self.directory.addresses_of(&self.account);
        let ctx = sieve::Context {
            message: &self.message,
            envelope: &self.envelope,
            addresses: &addresses,
            spam: self.spam,
            virus: self.virus,
            now: self.now,
        };
        let host = StoreHost {
            store: &self.store,
            directory: &self.directory,
            account: self.account.id,
            runtime: tokio::runtime::Handle::current(),
        };
        sieve::run(script, &ctx, &host, &self.limits).map_err(|e| e.to_string())
    }
}

struct StoreHost<'a> {
    store: &'a Arc<dyn Store>,
    directory: &'a Directory,
    account: AccountId,
    runtime: tokio::runtime::Handle,
}

impl sieve::Host for StoreHost<'_> {
    fn mailbox_exists(&self, name: &str) -> bool {
        self.runtime
            .block_on(self.store.mailbox(self.account, name))
            .ok()
            .flatten()
            .is_some()
    }

    fn script_source(&self, location: sieve::Location, name: &str) -> Option<String> {
        match location {
            sieve::Location::Global => self
                .directory
                .global_script(name)
                .map(|s| s.source.to_string()),
            sieve::Location::Personal => self
                .runtime
                .block_on(
                    self.store
                        .sieve_script(ScriptOwner::Account(self.account), name),
                )
                .ok()
                .flatten(),
        }
    }

    fn duplicate_seen(&self, id: &str, _period_secs: u64) -> bool {
        self.runtime
            .block_on(
                self.store
                    .sieve_memory_holds(self.account, &duplicate_key(id)),
            )
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_split_into_bits_and_atoms() {
        let flags = ["\\Seen", "\\flagged", "$Work", "bad word", "\\Nope", "ok"].map(String::from);
        let (bits, words) = split_flags(&flags);
        assert_eq!(bits, store::FLAG_SEEN | store::FLAG_FLAGGED);
        assert_eq!(words, ["$Work", "ok"]);
    }

    #[test]
    fn the_head_is_bounded() {
        let mut head = Head {
            bytes: Vec::new(),
            limit: 10,
            text_only: None,
        };
        head.feed(b"0123456");
        head.feed(b"789abc");
        assert_eq!(head.bytes, b"0123456789");
    }

    #[test]
    fn the_classifiers_head_skips_attachments() {
        let mut head = Head {
            bytes: Vec::new(),
            limit: 4096,
            text_only: Some(mime_tree::PartRewriter::text_only()),
        };
        head.feed(b"Subject: s\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n");
        head.feed(b"Content-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\n");
        for _ in 0..1000 {
            head.feed(b"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk\r\n");
        }
        head.feed(b"--b\r\nContent-Type: text/plain\r\n\r\ncheap pills here\r\n--b--\r\n");
        let bytes = head.into_bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("cheap pills here"), "{text}");
        assert!(!text.contains("iVBOR"), "{text}");
    }
}
