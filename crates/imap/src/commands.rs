//! Dispatch, and the commands of the authenticated state (RFC 3501 §6.3)
//! with the extensions that live there (ENABLE, ID, NAMESPACE, QUOTA).

use std::borrow::Cow;
use std::num::NonZeroU32;

use imap_codec::encode::Encoder;
use imap_codec::imap_types::command::CommandBody;
use imap_codec::imap_types::core::{AString, Tag, Vec1};
use imap_codec::imap_types::extensions::enable::CapabilityEnable;
use imap_codec::imap_types::extensions::namespace::Namespace;
use imap_codec::imap_types::extensions::quota::{QuotaGet, Resource};
use imap_codec::imap_types::flag::FlagNameAttribute;
use imap_codec::imap_types::mailbox::{ListMailbox, Mailbox};
use imap_codec::imap_types::response::{Code, Data, Response};
use imap_codec::imap_types::status::{StatusDataItem, StatusDataItemName};
use imap_codec::ResponseCodec;

use crate::convert::istring;
use crate::flags;
use crate::list;
use crate::reply::{Kind, Reply};
use crate::search::ReturnOptions;
use crate::selected::Selected;
use crate::session::{code, mailbox_id_code, mailbox_name, Next, Session};
use crate::uidmap::UidMap;

fn list_text(m: &ListMailbox<'_>) -> String {
    match m {
        ListMailbox::Token(t) => String::from_utf8_lossy(t.as_ref()).into_owned(),
        ListMailbox::String(s) => String::from_utf8_lossy(&s.clone().into_inner()).into_owned(),
    }
}

fn astring_text(s: &AString<'_>) -> String {
    String::from_utf8_lossy(s.as_ref()).into_owned()
}

impl Session<'_> {
    pub(crate) async fn dispatch(
        &mut self,
        tag: &Tag<'static>,
        body: CommandBody<'_>,
        esearch: Option<ReturnOptions>,
    ) -> store::Result<Next> {
        let logged_in = self.account.is_some();
        let selected = self.selected.is_some();
        if esearch.is_some()
            && !matches!(body, CommandBody::Search { .. } | CommandBody::Sort { .. })
        {
            self.out
                .bad(Some(tag), None, "RETURN is only for SEARCH and SORT");
            return Ok(Next::Continue);
        }
        let reply = match body {
            CommandBody::Capability => {
                let caps = self.capabilities();
                if let Ok(caps) = Vec1::try_from(caps) {
                    self.out.data(Data::Capability(caps));
                }
                Reply::ok("CAPABILITY completed")
            }
            CommandBody::Noop => Reply::ok("NOOP completed"),
            CommandBody::Logout => {
                if let Some(a) = &self.account {
                    tracing::info!(user = %a.address, tls = self.tls, "imap logout");
                }
                self.out.bye(None, "Logging out");
                Reply::ok("LOGOUT completed").close()
            }
            CommandBody::Id { .. } => {
                let params = vec![
                    (istring("name"), crate::convert::nstring(Some("Sluice"))),
                    (
                        istring("version"),
                        crate::convert::nstring(Some(env!("CARGO_PKG_VERSION"))),
                    ),
                ];
                self.out.data(Data::Id {
                    parameters: Some(params),
                });
                Reply::ok("ID completed")
            }
            CommandBody::StartTLS if !logged_in => return self.starttls(tag).await,
            CommandBody::Login { username, password } if !logged_in => {
                let user = astring_text(&username);
                let pass = astring_text(password.declassify());
                self.login(&user, &pass).await
            }
            CommandBody::Authenticate {
                mechanism,
                initial_response,
            } if !logged_in => {
                let initial = initial_response.map(|r| r.declassify().to_vec());
                self.authenticate(tag, mechanism, initial).await
            }
            CommandBody::StartTLS
            | CommandBody::Login { .. }
            | CommandBody::Authenticate { .. } => Reply::bad("Already logged in"),
            _ if !logged_in => Reply::no("Log in first"),
            CommandBody::Enable { capabilities } => {
                let mut enabled = Vec::new();
                for c in capabilities.as_ref() {
                    if matches!(c, CapabilityEnable::CondStore) && !self.condstore {
                        self.enable_condstore();
                        enabled.push(CapabilityEnable::CondStore);
                    } else if c.to_string().eq_ignore_ascii_case("IMAP4rev2") && !self.rev2 {
                        // RFC 9051 §6.3.1.
                        self.rev2 = true;
                        enabled.extend(CapabilityEnable::try_from("IMAP4rev2"));
                    }
                }
                self.out.data(Data::Enabled {
                    capabilities: enabled,
                });
                Reply::ok("ENABLE completed")
            }
            CommandBody::Namespace => {
                let personal = vec![Namespace::new(istring(""), Some(quoted_delimiter()))];
                self.out.data(Data::Namespace {
                    personal,
                    other: Vec::new(),
                    shared: Vec::new(),
                });
                Reply::ok("NAMESPACE completed")
            }
            CommandBody::Select {
                mailbox,
                parameters,
            } => {
                if !parameters.is_empty() {
                    self.condstore = true;
                }
                let name = self.stored_name(&mailbox).await?;
                self.select(&name, false).await?
            }
            CommandBody::Examine {
                mailbox,
                parameters,
            } => {
                if !parameters.is_empty() {
                    self.condstore = true;
                }
                let name = self.stored_name(&mailbox).await?;
                self.select(&name, true).await?
            }
            CommandBody::Create { mailbox } => {
                let name = self.new_name(&mailbox);
                self.create(&name).await?
            }
            CommandBody::Delete { mailbox } => {
                let name = self.stored_name(&mailbox).await?;
                self.delete(&name).await?
            }
            CommandBody::Rename { from, to } => {
                let from = self.stored_name(&from).await?;
                let to = self.new_name(&to);
                self.rename(&from, &to).await?
            }
            CommandBody::Subscribe { mailbox } => {
                let name = self.stored_name(&mailbox).await?;
                self.subscribe(&name, true).await?
            }
            CommandBody::Unsubscribe { mailbox } => {
                let name = self.stored_name(&mailbox).await?;
                self.subscribe(&name, false).await?
            }
            CommandBody::List {
                reference,
                mailbox_wildcard,
            } => {
                self.list(
                    &mailbox_name(&reference),
                    &list_text(&mailbox_wildcard),
                    false,
                )
                .await?
            }
            CommandBody::Lsub {
                reference,
                mailbox_wildcard,
            } => {
                self.list(
                    &mailbox_name(&reference),
                    &list_text(&mailbox_wildcard),
                    true,
                )
                .await?
            }
            CommandBody::Status {
                mailbox,
                item_names,
            } => {
                let name = self.stored_name(&mailbox).await?;
                self.status(&name, &item_names).await?
            }
            CommandBody::Append {
                mailbox,
                flags,
                date,
                message,
            } => {
                let (data, literal8) = match &message {
                    imap_codec::imap_types::extensions::binary::LiteralOrLiteral8::Literal(l) => {
                        (l.data().to_vec(), false)
                    }
                    imap_codec::imap_types::extensions::binary::LiteralOrLiteral8::Literal8(l) => {
                        (l.data.to_vec(), true)
                    }
                };
                let name = self.stored_name(&mailbox).await?;
                self.append_small(&name, &flags, date.as_ref(), &data, literal8)
                    .await?
            }
            CommandBody::Idle => self.idle().await?,
            CommandBody::GetQuotaRoot { mailbox } => {
                let name = self.stored_name(&mailbox).await?;
                let account = self.account_id();
                if self.ctx.store.mailbox(account, &name).await?.is_none() {
                    Reply::no("No such mailbox").code(code("NONEXISTENT"))
                } else {
                    // One quota root, "", for the whole account, when the
                    // account has a limit; none otherwise (RFC 9208 §4.2.2).
                    let limited = self.quota_data(false).await?;
                    let roots = if limited {
                        vec![AString::try_from("").expect("empty quoted string")]
                    } else {
                        Vec::new()
                    };
                    self.out.data(Data::QuotaRoot {
                        mailbox: self.wire_mailbox(&name),
                        roots,
                    });
                    self.quota_data(true).await?;
                    Reply::ok("GETQUOTAROOT completed")
                }
            }
            CommandBody::GetQuota { root } => {
                if root.as_ref().is_empty() && self.quota_data(true).await? {
                    Reply::ok("GETQUOTA completed")
                } else {
                    Reply::no("No such quota root").code(code("NONEXISTENT"))
                }
            }
            CommandBody::SetQuota { .. } => {
                Reply::no("Quotas are set by the administrator").code(code("NOPERM"))
            }
            _ if !selected => Reply::no("Select a mailbox first"),
            CommandBody::Check => Reply::ok("CHECK completed"),
            CommandBody::Close => self.close().await?,
            CommandBody::Unselect => {
                self.selected = None;
                Reply::ok("UNSELECT completed")
            }
            CommandBody::Expunge => self.expunge(None).await?,
            CommandBody::ExpungeUid { sequence_set } => self.expunge(Some(&sequence_set)).await?,
            CommandBody::Search {
                charset,
                criteria,
                uid,
            } => {
                // RFC 9051 §6.4.4: IMAP4rev2 answers with ESEARCH, ALL when
                // no RETURN option is given.
                let esearch = match esearch {
                    None if self.rev2 => Some(ReturnOptions {
                        all: true,
                        ..ReturnOptions::default()
                    }),
                    other => other,
                };
                self.search(tag, charset.as_ref(), criteria.as_ref(), uid, esearch)
                    .await?
            }
            CommandBody::Fetch {
                sequence_set,
                macro_or_item_names,
                uid,
                modifiers,
            } => {
                self.fetch(&sequence_set, macro_or_item_names, uid, &modifiers)
                    .await?
            }
            CommandBody::Store {
                sequence_set,
                kind,
                response,
                flags,
                uid,
                modifiers,
            } => {
                self.store(&sequence_set, kind, response, &flags, uid, &modifiers)
                    .await?
            }
            CommandBody::Copy {
                sequence_set,
                mailbox,
                uid,
            } => {
                let name = self.stored_name(&mailbox).await?;
                self.copy(&sequence_set, &name, uid, false).await?
            }
            CommandBody::Move {
                sequence_set,
                mailbox,
                uid,
            } => {
                let name = self.stored_name(&mailbox).await?;
                self.copy(&sequence_set, &name, uid, true).await?
            }
            CommandBody::Sort {
                sort_criteria,
                charset,
                search_criteria,
                uid,
            } => {
                self.sort(
                    tag,
                    sort_criteria.as_ref(),
                    &charset,
                    search_criteria.as_ref(),
                    uid,
                    esearch,
                )
                .await?
            }
            CommandBody::Thread {
                algorithm,
                charset,
                search_criteria,
                uid,
            } => {
                self.thread(
                    &algorithm.to_string(),
                    &charset,
                    search_criteria.as_ref(),
                    uid,
                )
                .await?
            }
            other => Reply::bad(format!("{} is not supported", other.name())),
        };
        self.finish(tag, reply).await
    }

    /// Catches the selected mailbox up and writes the tagged reply.
    pub(crate) async fn finish(&mut self, tag: &Tag<'static>, reply: Reply) -> store::Result<Next> {
        if self.selected.is_some()
            && !matches!(reply.next, Next::Close)
            && !self.sync(reply.expunge_ok).await?
        {
            return Ok(Next::Close);
        }
        let text = reply.text.as_str();
        match reply.kind {
            Kind::Ok => self.out.ok(Some(tag), reply.code, text),
            Kind::No => self.out.no(Some(tag), reply.code, text),
            Kind::Bad => self.out.bad(Some(tag), reply.code, text),
        }
        Ok(reply.next)
    }

    /// Catches the selected mailbox up (see [`Selected::sync`]). False
    /// when the mailbox was deleted meanwhile: the session is told (BYE)
    /// and closed, since its view can no longer be kept.
    pub(crate) async fn sync(&mut self, expunge_ok: bool) -> store::Result<bool> {
        let condstore = self.condstore;
        let rev2 = self.rev2;
        let Some(sel) = self.selected.as_mut() else {
            return Ok(true);
        };
        match sel
            .sync(
                self.ctx.store.as_ref(),
                &mut self.out,
                expunge_ok,
                condstore,
                rev2,
            )
            .await
        {
            Ok(()) => Ok(true),
            Err(store::StoreError::NotFound(_)) => {
                self.selected = None;
                self.out.bye(None, "The selected mailbox was deleted");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    pub(crate) fn account_id(&self) -> store::AccountId {
        self.account.as_ref().map_or(0, |a| a.id)
    }

    async fn select(&mut self, name: &str, read_only: bool) -> store::Result<Reply> {
        if self.selected.take().is_some() {
            // RFC 7162 §3.2.11 (for servers offering CONDSTORE), RFC 9051
            // §6.3.2.
            self.out
                .ok(None, Some(Code::Closed), "Previous mailbox closed");
        }
        let store = &self.ctx.store;
        let Some(info) = store.mailbox(self.account_id(), name).await? else {
            return Ok(Reply::no("No such mailbox").code(code("NONEXISTENT")));
        };
        // Subscribe before reading, so nothing committed after the read
        // is missed.
        let watch = store.watch_mailbox(info.id);
        let status = store.mailbox_status(info.id).await?;
        // Pinned before the UIDs are read: whatever is expunged from here
        // on stays fetchable until this view has announced it.
        let pin = store.pin_view(info.id, status.highest_modseq);
        let uids = UidMap::from_runs(&store.uid_runs(info.id).await?);
        let keywords = store.mailbox_keywords(info.id).await?.into_iter().collect();
        let first_unseen = if self.rev2 {
            None
        } else {
            store.first_unseen(info.id).await?
        };
        let mut view = Selected::new(
            info,
            read_only,
            uids,
            keywords,
            status.highest_modseq,
            watch,
            pin,
        );
        // RFC 3501 §2.3.2: a read-write IMAP4rev1 session takes the new
        // mail as recent; EXAMINE only shows what is recent (taken by
        // nobody yet) without taking it.
        if read_only && !self.rev2 {
            let next = view.info.uid_next;
            if status.recent_from < next {
                view.recent.insert_range(status.recent_from.max(1)..next);
            }
        } else if !self.rev2 {
            view.take_recent_mail();
            view.claim_recent(store.as_ref()).await?;
        }
        self.out
            .data(Data::Flags(flags::mailbox_flags(&view.keywords)));
        self.out.ok(
            None,
            Some(Code::PermanentFlags(if read_only {
                Vec::new()
            } else {
                flags::permanent_flags(&view.keywords)
            })),
            "Flags permitted",
        );
        self.out.data(Data::Exists(view.exists()));
        if self.rev2 {
            // RFC 9051 §6.3.2: the mailbox's name as the server has it;
            // no RECENT, and no UNSEEN code (gone from IMAP4rev2).
            self.out.data(Data::List {
                items: Vec::new(),
                delimiter: Some(quoted_delimiter()),
                mailbox: self.wire_mailbox(&view.info.name),
            });
        } else {
            self.out.data(Data::Recent(view.recent.len() as u32));
            if let Some(n) = first_unseen
                .and_then(|u| view.seq_of(u))
                .and_then(NonZeroU32::new)
            {
                self.out.ok(None, Some(Code::Unseen(n)), "First unseen");
            }
        }
        if let Some(v) = NonZeroU32::new(status.uid_validity) {
            self.out.ok(None, Some(Code::UidValidity(v)), "UIDs valid");
        }
        if let Some(n) = NonZeroU32::new(status.uid_next) {
            self.out
                .ok(None, Some(Code::UidNext(n)), "Predicted next UID");
        }
        if let Some(m) = std::num::NonZeroU64::new(status.highest_modseq) {
            self.out.ok(None, Some(Code::HighestModSeq(m)), "Highest");
        }
        // RFC 8474 §4.1.
        self.out
            .ok(None, Some(mailbox_id_code(view.info.id)), "Mailbox id");
        self.selected = Some(view);
        Ok(if read_only {
            Reply::ok("EXAMINE completed").code(Code::ReadOnly)
        } else {
            Reply::ok("SELECT completed").code(Code::ReadWrite)
        })
    }

    async fn create(&mut self, name: &str) -> store::Result<Reply> {
        let name = name.trim_end_matches(list::DELIMITER);
        if name.eq_ignore_ascii_case("INBOX") {
            return Ok(Reply::no("INBOX always exists").code(code("ALREADYEXISTS")));
        }
        let account = self.account_id();
        let store = &self.ctx.store;
        // RFC 3501 §6.3.3: superior names are created as needed.
        for parent in list::parents(name) {
            if store.mailbox(account, &parent).await?.is_none() {
                store.create_mailbox(account, &parent, None).await?;
            }
        }
        match store.create_mailbox(account, name, None).await {
            // RFC 8474 §4.1: the new mailbox's id.
            Ok(info) => Ok(Reply::ok("CREATE completed").code(mailbox_id_code(info.id))),
            Err(store::StoreError::Exists(_)) => {
                Ok(Reply::no("Mailbox already exists").code(code("ALREADYEXISTS")))
            }
            Err(store::StoreError::Invalid(why)) => Ok(Reply::no(why).code(code("CANNOT"))),
            Err(e) => Err(e),
        }
    }

    async fn delete(&mut self, name: &str) -> store::Result<Reply> {
        let account = self.account_id();
        if self.selected.as_ref().is_some_and(|s| {
            s.info.name == name || (name.eq_ignore_ascii_case("INBOX") && s.info.name == "INBOX")
        }) {
            self.selected = None;
        }
        match self.ctx.store.delete_mailbox(account, name).await {
            Ok(()) => Ok(Reply::ok("DELETE completed")),
            Err(store::StoreError::NotFound(_)) => {
                Ok(Reply::no("No such mailbox").code(code("NONEXISTENT")))
            }
            Err(store::StoreError::Invalid(why)) => {
                // RFC 9051 §7.1: HASCHILDREN says why.
                let prefix = format!("{name}{}", list::DELIMITER);
                let children = self
                    .ctx
                    .store
                    .list_mailboxes(account)
                    .await?
                    .iter()
                    .any(|m| m.name.starts_with(&prefix));
                let c = if children { "HASCHILDREN" } else { "CANNOT" };
                Ok(Reply::no(why).code(code(c)))
            }
            Err(e) => Err(e),
        }
    }

    async fn rename(&mut self, from: &str, to: &str) -> store::Result<Reply> {
        let account = self.account_id();
        let to = to.trim_end_matches(list::DELIMITER);
        for parent in list::parents(to) {
            if parent != from && self.ctx.store.mailbox(account, &parent).await?.is_none() {
                self.ctx
                    .store
                    .create_mailbox(account, &parent, None)
                    .await?;
            }
        }
        match self.ctx.store.rename_mailbox(account, from, to).await {
            Ok(()) => Ok(Reply::ok("RENAME completed")),
            Err(store::StoreError::NotFound(_)) => {
                Ok(Reply::no("No such mailbox").code(code("NONEXISTENT")))
            }
            Err(store::StoreError::Exists(_)) => {
                Ok(Reply::no("Target mailbox already exists").code(code("ALREADYEXISTS")))
            }
            Err(store::StoreError::Invalid(why)) => Ok(Reply::no(why).code(code("CANNOT"))),
            Err(e) => Err(e),
        }
    }

    async fn subscribe(&mut self, name: &str, on: bool) -> store::Result<Reply> {
        match self
            .ctx
            .store
            .set_subscribed(self.account_id(), name, on)
            .await
        {
            Ok(()) => Ok(Reply::ok(if on {
                "SUBSCRIBE completed"
            } else {
                "UNSUBSCRIBE completed"
            })),
            Err(store::StoreError::NotFound(_)) => {
                Ok(Reply::no("No such mailbox").code(code("NONEXISTENT")))
            }
            Err(e) => Err(e),
        }
    }

    async fn list(&mut self, reference: &str, pattern: &str, lsub: bool) -> store::Result<Reply> {
        let name = if lsub { "LSUB" } else { "LIST" };
        if pattern.is_empty() && !lsub {
            // RFC 3501 §6.3.8: the hierarchy delimiter and root.
            self.out.data(Data::List {
                items: vec![FlagNameAttribute::Noselect],
                delimiter: Some(quoted_delimiter()),
                mailbox: Mailbox::try_from("").unwrap_or(Mailbox::Inbox),
            });
            return Ok(Reply::ok(format!("{name} completed")));
        }
        let pattern = list::combine(reference, pattern);
        let all = self.ctx.store.list_mailboxes(self.account_id()).await?;
        if lsub {
            return self.lsub(&pattern, &all).await;
        }
        for m in &all {
            if !list::matches(&pattern, &self.shown_name(&m.name)) {
                continue;
            }
            let items = list::attributes(m, &all);
            let mailbox = self.wire_mailbox(&m.name);
            self.out.data(if lsub {
                Data::Lsub {
                    items,
                    delimiter: Some(quoted_delimiter()),
                    mailbox,
                }
            } else {
                Data::List {
                    items,
                    delimiter: Some(quoted_delimiter()),
                    mailbox,
                }
            });
        }
        Ok(Reply::ok(format!("{name} completed")))
    }

    /// LSUB (RFC 3501 §6.3.9): the subscribed names the pattern matches,
    /// also those whose mailbox is gone (`\Noselect`); and an unsubscribed
    /// parent the pattern matches of a subscribed name it does not (`%`
    /// stops at the separator) is named too, as `\Noselect`.
    async fn lsub(&mut self, pattern: &str, all: &[store::MailboxInfo]) -> store::Result<Reply> {
        let lost = self.ctx.store.lost_subscriptions(self.account_id()).await?;
        let mut subscribed: std::collections::BTreeMap<String, Option<&store::MailboxInfo>> = all
            .iter()
            .filter(|m| m.subscribed)
            .map(|m| (m.name.clone(), Some(m)))
            .collect();
        for name in lost {
            subscribed.entry(name).or_insert(None);
        }
        let mut shown: std::collections::BTreeMap<String, Vec<FlagNameAttribute<'static>>> =
            std::collections::BTreeMap::new();
        for (name, mailbox) in &subscribed {
            if list::matches(pattern, &self.shown_name(name)) {
                let items = match mailbox {
                    Some(m) => list::attributes(m, all),
                    None => vec![FlagNameAttribute::Noselect],
                };
                shown.insert(name.clone(), items);
            } else {
                for parent in list::parents(name) {
                    if !subscribed.contains_key(&parent)
                        && list::matches(pattern, &self.shown_name(&parent))
                    {
                        shown
                            .entry(parent)
                            .or_insert_with(|| vec![FlagNameAttribute::Noselect]);
                    }
                }
            }
        }
        for (name, items) in shown {
            let mailbox = self.wire_mailbox(&name);
            self.out.data(Data::Lsub {
                items,
                delimiter: Some(quoted_delimiter()),
                mailbox,
            });
        }
        Ok(Reply::ok("LSUB completed"))
    }

    /// Why STATUS items cannot be answered, if they cannot.
    pub(crate) fn refuse_status_items(&self, items: &[StatusDataItemName]) -> Option<Reply> {
        items.iter().find_map(|item| match item {
            // RFC 9051 removed RECENT.
            StatusDataItemName::Recent if self.rev2 => {
                Some(Reply::bad("RECENT is not part of IMAP4rev2"))
            }
            StatusDataItemName::DeletedStorage => {
                Some(Reply::bad("DELETED-STORAGE is not supported"))
            }
            _ => None,
        })
    }

    async fn status(&mut self, name: &str, items: &[StatusDataItemName]) -> store::Result<Reply> {
        if let Some(reply) = self.refuse_status_items(items) {
            return Ok(reply);
        }
        let Some(info) = self.ctx.store.mailbox(self.account_id(), name).await? else {
            return Ok(Reply::no("No such mailbox").code(code("NONEXISTENT")));
        };
        let (items, mailbox_id) = match self.status_mailbox_id.take() {
            None => (items, false),
            Some(true) => (&[][..], true),
            Some(false) => (items, true),
        };
        self.status_data(&info, items, mailbox_id).await?;
        Ok(Reply::ok("STATUS completed"))
    }

    /// The STATUS response of a mailbox, for items that passed
    /// [`Session::refuse_status_items`], with its MAILBOXID (RFC 8474
    /// §4.2) when `mailbox_id`.
    pub(crate) async fn status_data(
        &mut self,
        info: &store::MailboxInfo,
        items: &[StatusDataItemName],
        mailbox_id: bool,
    ) -> store::Result<()> {
        let s = self.ctx.store.mailbox_status(info.id).await?;
        let mut out = Vec::new();
        for item in items {
            out.push(match item {
                StatusDataItemName::Messages => StatusDataItem::Messages(s.messages),
                StatusDataItemName::Recent => StatusDataItem::Recent(s.recent),
                StatusDataItemName::UidNext => {
                    StatusDataItem::UidNext(NonZeroU32::new(s.uid_next).unwrap_or(NonZeroU32::MIN))
                }
                StatusDataItemName::UidValidity => StatusDataItem::UidValidity(
                    NonZeroU32::new(s.uid_validity).unwrap_or(NonZeroU32::MIN),
                ),
                StatusDataItemName::Unseen => StatusDataItem::Unseen(s.unseen),
                StatusDataItemName::Deleted => StatusDataItem::Deleted(s.deleted),
                StatusDataItemName::Size => StatusDataItem::Size(s.size),
                StatusDataItemName::HighestModSeq => {
                    self.enable_condstore();
                    StatusDataItem::HighestModSeq(s.highest_modseq)
                }
                StatusDataItemName::DeletedStorage => continue,
            });
        }
        let any = !out.is_empty();
        let data = Data::Status {
            mailbox: self.wire_mailbox(&info.name),
            items: Cow::Owned(out),
        };
        if !mailbox_id {
            self.out.data(data);
            return Ok(());
        }
        let mut line = ResponseCodec::default()
            .encode(&Response::Data(data))
            .dump();
        line.truncate(line.len() - b")\r\n".len());
        if any {
            line.push(b' ');
        }
        line.extend_from_slice(
            format!("MAILBOXID ({}))\r\n", store::ids::mailbox(info.id)).as_bytes(),
        );
        self.out.raw(&line);
        Ok(())
    }

    /// Writes the QUOTA response (with `emit`); whether the account has
    /// a limit.
    async fn quota_data(&mut self, emit: bool) -> store::Result<bool> {
        let q = self.ctx.store.quota(self.account_id()).await?;
        let Some(limit) = q.limit_bytes else {
            return Ok(false);
        };
        if !emit {
            return Ok(true);
        }
        let quotas = Vec1::from(QuotaGet::new(
            Resource::Storage,
            q.used_bytes.div_ceil(1024),
            limit / 1024,
        ));
        self.out.data(Data::Quota {
            root: AString::try_from("").expect("empty quoted string"),
            quotas,
        });
        Ok(true)
    }
}

pub(crate) fn quoted_delimiter() -> imap_codec::imap_types::core::QuotedChar {
    imap_codec::imap_types::core::QuotedChar::try_from(list::DELIMITER)
        .expect("'/' is a valid quoted char")
}
