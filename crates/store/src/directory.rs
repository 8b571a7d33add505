//! The directory snapshot: local domains, accounts and aliases held in
//! memory, so the SMTP gate checks a recipient without a database round trip.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::model::{AccountId, MailboxId};

/// An account as the servers need it: who, where its INBOX is, and its
/// password hash (logins are checked against the snapshot too).
#[derive(Debug, Clone)]
pub struct AccountEntry {
    /// Row id.
    pub id: AccountId,
    /// Normalised address.
    pub address: String,
    /// The account's INBOX.
    pub inbox: MailboxId,
    /// PHC-format argon2id hash.
    pub password_hash: String,
    /// The account's own spam threshold (points), `None` for the site's.
    pub spam_threshold: Option<f32>,
}

/// A point-in-time copy of domains, accounts and aliases.
#[derive(Debug, Default, Clone)]
pub struct Directory {
    domains: HashSet<String>,
    accounts: HashMap<String, AccountEntry>,
    aliases: HashMap<String, Vec<String>>,
    /// Accounts by their INBOX (delivery knows mailboxes, filters need
    /// the account).
    by_inbox: HashMap<MailboxId, String>,
    /// Each account's active Sieve script.
    active_scripts: HashMap<AccountId, SieveSource>,
    /// The global Sieve scripts (`include :global`), by name.
    global_scripts: HashMap<String, SieveSource>,
    serial: i64,
}

/// A Sieve script's name and text as the directory holds them; delivery
/// compiles it once per change (the text is shared, so comparing
/// pointers tells a change).
#[derive(Debug, Clone)]
pub struct SieveSource {
    /// The script's name.
    pub name: String,
    /// Its source text.
    pub source: Arc<str>,
}

/// Where mail for one address goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Delivered to these local INBOXes, and relayed to these remote
    /// addresses (an alias can point both ways).
    Deliver {
        /// Local INBOXes, without duplicates.
        mailboxes: Vec<MailboxId>,
        /// Remote addresses, without duplicates.
        remote: Vec<String>,
    },
    /// The domain is local but nobody by that name lives there.
    UnknownUser,
    /// The domain is not ours: relaying.
    NotLocal,
}

/// Lower-cases the domain and the local part. RFC 5321 §2.4 lets a host
/// treat local parts case-sensitively; like nearly every mail system we
/// don't, so `Bob@` and `bob@` are one mailbox.
pub fn normalize_address(address: &str) -> Option<String> {
    let address = address.trim();
    let (local, domain) = address.rsplit_once('@')?;
    if local.is_empty() || domain.is_empty() || domain.contains(char::is_whitespace) {
        return None;
    }
    let domain = domain.trim_end_matches('.');
    Some(format!(
        "{}@{}",
        local.to_lowercase(),
        domain.to_lowercase()
    ))
}

/// Aliases may point at aliases; this bounds the chain (and breaks loops).
const MAX_ALIAS_DEPTH: usize = 8;

impl Directory {
    /// Builds a snapshot; used by the back ends.
    pub fn new(
        serial: i64,
        domains: impl IntoIterator<Item = String>,
        accounts: impl IntoIterator<Item = AccountEntry>,
        aliases: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        for (address, target) in aliases {
            map.entry(address).or_default().push(target);
        }
        let accounts: HashMap<String, AccountEntry> = accounts
            .into_iter()
            .map(|a| (a.address.clone(), a))
            .collect();
        Directory {
            domains: domains.into_iter().collect(),
            by_inbox: accounts
                .values()
                .map(|a| (a.inbox, a.address.clone()))
                .collect(),
            accounts,
            aliases: map,
            active_scripts: HashMap::new(),
            global_scripts: HashMap::new(),
            serial,
        }
    }

    /// Adds the Sieve scripts delivery runs: rows of (account, name,
    /// source, active), account 0 being the global scripts.
    pub fn with_sieve(
        mut self,
        scripts: impl IntoIterator<Item = (AccountId, String, String, bool)>,
    ) -> Self {
        for (account, name, source, active) in scripts {
            let entry = SieveSource {
                name: name.clone(),
                source: source.into(),
            };
            if account == 0 {
                self.global_scripts.insert(name, entry);
            } else if active {
                self.active_scripts.insert(account, entry);
            }
        }
        self
    }

    /// The account whose INBOX this is.
    pub fn account_by_inbox(&self, inbox: MailboxId) -> Option<&AccountEntry> {
        self.accounts.get(self.by_inbox.get(&inbox)?)
    }

    /// The account's active Sieve script, if it has one.
    pub fn active_script(&self, account: AccountId) -> Option<&SieveSource> {
        self.active_scripts.get(&account)
    }

    /// A global Sieve script by name.
    pub fn global_script(&self, name: &str) -> Option<&SieveSource> {
        self.global_scripts.get(name)
    }

    /// Whether any account has an active Sieve script (delivery keeps the
    /// head of each message only then).
    pub fn has_scripts(&self) -> bool {
        !self.active_scripts.is_empty()
    }

    /// The addresses that lead to an account: its own and the aliases
    /// that point straight at it (Sieve's vacation answers mail sent to
    /// any of them, RFC 5230 §4.5).
    pub fn addresses_of(&self, account: &AccountEntry) -> Vec<String> {
        let mut out = vec![account.address.clone()];
        for (alias, targets) in &self.aliases {
            if targets.iter().any(|t| t == &account.address) {
                out.push(alias.clone());
            }
        }
        out.sort();
        out
    }

    /// The directory serial this snapshot was taken at.
    pub fn serial(&self) -> i64 {
        self.serial
    }

    /// Whether `domain` is one of ours.
    pub fn is_local_domain(&self, domain: &str) -> bool {
        self.domains
            .contains(domain.trim_end_matches('.').to_lowercase().as_str())
    }

    /// The account at exactly this (normalised) address, if any.
    pub fn account(&self, address: &str) -> Option<&AccountEntry> {
        self.accounts.get(&normalize_address(address)?)
    }

    /// The account with this row id, if any.
    pub fn account_by_id(&self, id: AccountId) -> Option<&AccountEntry> {
        self.accounts.values().find(|a| a.id == id)
    }

    /// Number of accounts.
    pub fn account_count(&self) -> usize {
        self.accounts.len()
    }

    /// Resolves a recipient address: aliases are expanded, `user+tag@`
    /// falls back to `user@`, and `postmaster@` of a local domain always
    /// resolves (RFC 5321 §4.5.1) — to its alias or account if there is
    /// one, otherwise to the domain's first account.
    pub fn resolve(&self, address: &str) -> Resolution {
        // RFC 5321 §4.5.1: "Postmaster" without a domain is also accepted.
        let address = if address.eq_ignore_ascii_case("postmaster") {
            match self.domains.iter().min() {
                Some(d) => format!("postmaster@{d}"),
                None => return Resolution::UnknownUser,
            }
        } else {
            address.to_string()
        };
        let Some(address) = normalize_address(&address) else {
            return Resolution::UnknownUser;
        };
        let (_, domain) = address.rsplit_once('@').expect("normalised");
        if !self.domains.contains(domain) {
            return Resolution::NotLocal;
        }
        let mut mailboxes = Vec::new();
        let mut remote = Vec::new();
        if !self.expand(&address, 0, &mut mailboxes, &mut remote) {
            let local = address.split('@').next().unwrap_or_default();
            if local != "postmaster" {
                return Resolution::UnknownUser;
            }
            match self.first_account_of(domain) {
                Some(inbox) => mailboxes.push(inbox),
                None => return Resolution::UnknownUser,
            }
        }
        Resolution::Deliver { mailboxes, remote }
    }

    /// Expands one normalised address into local INBOXes and remote
    /// addresses; false if the address names nothing local.
    fn expand(
        &self,
        address: &str,
        depth: usize,
        mailboxes: &mut Vec<MailboxId>,
        remote: &mut Vec<String>,
    ) -> bool {
        if depth > MAX_ALIAS_DEPTH {
            return false;
        }
        let (local, domain) = address.rsplit_once('@').expect("normalised");
        if !self.domains.contains(domain) {
            if !remote.iter().any(|r| r == address) {
                remote.push(address.to_string());
            }
            return true;
        }
        if let Some(targets) = self.aliases.get(address) {
            let mut any = false;
            for target in targets {
                if let Some(t) = normalize_address(target) {
                    any |= self.expand(&t, depth + 1, mailboxes, remote);
                }
            }
            return any;
        }
        if let Some(account) = self.accounts.get(address) {
            if !mailboxes.contains(&account.inbox) {
                mailboxes.push(account.inbox);
            }
            return true;
        }
        // Plus-addressing: user+tag@domain delivers to user@domain.
        if let Some((base, _tag)) = local.split_once('+') {
            if !base.is_empty() {
                return self.expand(&format!("{base}@{domain}"), depth + 1, mailboxes, remote);
            }
        }
        false
    }

    fn first_account_of(&self, domain: &str) -> Option<MailboxId> {
        let suffix = format!("@{domain}");
        self.accounts
            .values()
            .filter(|a| a.address.ends_with(&suffix))
            .min_by_key(|a| a.id)
            .or_else(|| self.accounts.values().min_by_key(|a| a.id))
            .map(|a| a.inbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> Directory {
        Directory::new(
            1,
            ["example.org".to_string(), "other.test".to_string()],
            [
                AccountEntry {
                    id: 1,
                    address: "alice@example.org".into(),
                    inbox: 10,
                    password_hash: String::new(),
                    spam_threshold: None,
                },
                AccountEntry {
                    id: 2,
                    address: "bob@example.org".into(),
                    inbox: 20,
                    password_hash: String::new(),
                    spam_threshold: None,
                },
            ],
            [
                (
                    "team@example.org".to_string(),
                    "alice@example.org".to_string(),
                ),
                (
                    "team@example.org".to_string(),
                    "Bob@Example.org".to_string(),
                ),
                (
                    "team@example.org".to_string(),
                    "carol@remote.test".to_string(),
                ),
                (
                    "loop@example.org".to_string(),
                    "loop@example.org".to_string(),
                ),
            ],
        )
    }

    fn local(m: &[MailboxId]) -> Resolution {
        Resolution::Deliver {
            mailboxes: m.to_vec(),
            remote: vec![],
        }
    }

    #[test]
    fn accounts_resolve_case_insensitively() {
        assert_eq!(dir().resolve("ALICE@Example.ORG"), local(&[10]));
        assert_eq!(dir().resolve("alice@example.org."), local(&[10]));
    }

    #[test]
    fn plus_tags_deliver_to_the_base_address() {
        assert_eq!(dir().resolve("bob+lists@example.org"), local(&[20]));
        assert_eq!(dir().resolve("+x@example.org"), Resolution::UnknownUser);
    }

    #[test]
    fn unknown_and_remote() {
        assert_eq!(dir().resolve("zed@example.org"), Resolution::UnknownUser);
        assert_eq!(dir().resolve("x@elsewhere.test"), Resolution::NotLocal);
        assert_eq!(dir().resolve("not an address"), Resolution::UnknownUser);
    }

    #[test]
    fn aliases_expand_to_local_and_remote_targets() {
        assert_eq!(
            dir().resolve("team@example.org"),
            Resolution::Deliver {
                mailboxes: vec![10, 20],
                remote: vec!["carol@remote.test".into()]
            }
        );
    }

    #[test]
    fn alias_loops_end() {
        assert_eq!(dir().resolve("loop@example.org"), Resolution::UnknownUser);
    }

    #[test]
    fn postmaster_always_resolves() {
        assert_eq!(dir().resolve("postmaster@example.org"), local(&[10]));
        assert_eq!(dir().resolve("Postmaster"), local(&[10]));
        // other.test has no accounts: falls back to the first account overall.
        assert_eq!(dir().resolve("postmaster@other.test"), local(&[10]));
    }
}
