//! Commands on the selected mailbox's messages (RFC 3501 §6.4): STORE,
//! COPY, MOVE (RFC 6851), EXPUNGE, UID EXPUNGE (RFC 4315), CLOSE, SEARCH.

use std::num::{NonZeroU32, NonZeroU64};

use imap_codec::imap_types::command::StoreModifier;
use imap_codec::imap_types::core::{Charset, Tag, Vec1};
use imap_codec::imap_types::extensions::uidplus::{UidElement, UidSet};
use imap_codec::imap_types::fetch::MessageDataItem;
use imap_codec::imap_types::flag::{Flag, StoreResponse, StoreType};
use imap_codec::imap_types::response::{Code, Data};
use imap_codec::imap_types::search::SearchKey as Key;
use imap_codec::imap_types::sequence::SequenceSet;
use store::{FlagChange, SearchKey, Uid};

use crate::flags;
use crate::reply::Reply;
use crate::search::{self, ReturnOptions};
use crate::session::Session;

const BAD_SET: &str = "Invalid message sequence number";

/// `1:3,7` for MODIFIED.
fn uid_set(uids: &[Uid]) -> Option<SequenceSet> {
    SequenceSet::try_from(search::compact_set(uids).as_str()).ok()
}

/// UIDs in COPYUID, in the order of the pairs (RFC 4315 §3: the two sets
/// correspond element by element, so they are not sorted or merged
/// independently).
fn copyuid_set(uids: &[Uid]) -> Option<UidSet> {
    let elems: Vec<UidElement> = uids
        .iter()
        .filter_map(|u| NonZeroU32::new(*u).map(UidElement::Single))
        .collect();
    Vec1::try_from(elems).ok().map(UidSet)
}

impl Session<'_> {
    pub(crate) async fn close(&mut self) -> store::Result<Reply> {
        if let Some(sel) = self.selected.take() {
            if !sel.read_only {
                // RFC 3501 §6.4.2: removed silently, no EXPUNGE responses.
                self.ctx.store.expunge_deleted(sel.info.id, None).await?;
            }
        }
        Ok(Reply::ok("CLOSE completed"))
    }

    pub(crate) async fn expunge(&mut self, set: Option<&SequenceSet>) -> store::Result<Reply> {
        let sel = self.selected.as_mut().expect("selected state");
        if sel.read_only {
            return Ok(Reply::no("Mailbox is read-only").code(Code::ReadOnly));
        }
        let subset: Option<Vec<Uid>> = match set {
            Some(set) => match sel.resolve(set, true) {
                Ok(m) => Some(m.into_iter().map(|(_, u)| u).collect()),
                Err(_) => return Ok(Reply::bad(BAD_SET)),
            },
            None => None,
        };
        let gone = self
            .ctx
            .store
            .expunge_deleted(sel.info.id, subset.as_deref())
            .await?;
        sel.expunged(&gone, &mut self.out);
        Ok(Reply::ok("EXPUNGE completed"))
    }

    pub(crate) async fn store(
        &mut self,
        set: &SequenceSet,
        kind: StoreType,
        response: StoreResponse,
        flag_list: &[Flag<'_>],
        uid: bool,
        modifiers: &[StoreModifier],
    ) -> store::Result<Reply> {
        let done = if uid {
            "UID STORE completed"
        } else {
            "STORE completed"
        };
        let unchanged_since = modifiers
            .iter()
            .map(|m| match m {
                StoreModifier::UnchangedSince(n) => *n,
            })
            .next();
        if unchanged_since.is_some() {
            self.enable_condstore();
        }
        let sel = self.selected.as_mut().expect("selected state");
        if sel.read_only {
            return Ok(Reply::no("Mailbox is read-only").code(Code::ReadOnly));
        }
        let messages = match sel.resolve(set, uid) {
            Ok(m) => m,
            Err(_) => return Ok(Reply::bad(BAD_SET).no_expunge()),
        };
        let (bits, keywords) = match flags::from_command(flag_list) {
            Ok(f) => f,
            Err(flag) => return Ok(Reply::bad(format!("Cannot store {flag}"))),
        };
        let change = match kind {
            StoreType::Add => FlagChange::Add,
            StoreType::Remove => FlagChange::Remove,
            StoreType::Replace => FlagChange::Replace,
        };
        let uids: Vec<Uid> = messages.iter().map(|(_, u)| *u).collect();
        let changed = self
            .ctx
            .store
            .update_flags(sel.info.id, &uids, change, bits, &keywords, unchanged_since)
            .await?;
        // The command's keywords, and any another session set on these
        // messages meanwhile, are named before a FETCH shows them.
        sel.announce_keywords(
            keywords
                .iter()
                .chain(changed.iter().flat_map(|e| e.keywords.iter())),
            &mut self.out,
        );
        let silent = matches!(response, StoreResponse::Silent);
        for entry in &changed {
            sel.saw(entry);
            let Some(seq) = sel.seq_of(entry.uid).and_then(NonZeroU32::new) else {
                continue;
            };
            // RFC 7162 §3.2: with CONDSTORE, FETCH follows even .SILENT.
            if silent && !self.condstore {
                continue;
            }
            let mut items = Vec::new();
            if !silent {
                items.push(MessageDataItem::Flags(sel.flags_of(entry)));
            }
            if uid {
                items.push(MessageDataItem::Uid(
                    NonZeroU32::new(entry.uid).unwrap_or(NonZeroU32::MIN),
                ));
            }
            if self.condstore {
                if let Some(m) = NonZeroU64::new(entry.modseq) {
                    items.push(MessageDataItem::ModSeq(m));
                }
            }
            if let Ok(items) = Vec1::try_from(items) {
                self.out.data(Data::Fetch { seq, items });
            }
        }
        // UNCHANGEDSINCE: messages that were not changed because they had
        // changed meanwhile are reported in MODIFIED (RFC 7162 §3.2).
        let mut reply = Reply::ok(done).no_expunge();
        if let Some(since) = unchanged_since {
            let now = self.ctx.store.list_messages(sel.info.id).await?;
            let failed: Vec<u32> = messages
                .iter()
                .filter(|(_, u)| {
                    now.binary_search_by_key(u, |e| e.uid)
                        .is_ok_and(|i| now[i].modseq > since)
                        && !changed.iter().any(|c| c.uid == *u)
                })
                .map(|(s, u)| if uid { *u } else { *s })
                .collect();
            if let Some(set) = uid_set(&failed) {
                reply = Reply::ok("Some messages were modified meanwhile")
                    .code(Code::Modified(set))
                    .no_expunge();
            }
        }
        if uid {
            reply.expunge_ok = true;
        }
        Ok(reply)
    }

    pub(crate) async fn copy(
        &mut self,
        set: &SequenceSet,
        target: &str,
        uid: bool,
        moving: bool,
    ) -> store::Result<Reply> {
        let name = if moving { "MOVE" } else { "COPY" };
        let account = self.account_id();
        let sel = self.selected.as_mut().expect("selected state");
        if moving && sel.read_only {
            return Ok(Reply::no("Mailbox is read-only").code(Code::ReadOnly));
        }
        let messages = match sel.resolve(set, uid) {
            Ok(m) => m,
            Err(_) => return Ok(Reply::bad(BAD_SET)),
        };
        let Some(to) = self.ctx.store.mailbox(account, target).await? else {
            return Ok(Reply::no("No such mailbox").code(Code::TryCreate));
        };
        let uids: Vec<Uid> = messages.iter().map(|(_, u)| *u).collect();
        if uids.is_empty() {
            return Ok(Reply::ok(format!("No messages; {name} completed")));
        }
        let pairs = if moving {
            self.ctx
                .store
                .move_messages(sel.info.id, &uids, to.id)
                .await?
        } else {
            self.ctx
                .store
                .copy_messages(sel.info.id, &uids, to.id)
                .await?
        };
        let (from, new): (Vec<Uid>, Vec<Uid>) = pairs.iter().copied().unzip();
        let copyuid = match (
            NonZeroU32::new(to.uid_validity),
            copyuid_set(&from),
            copyuid_set(&new),
        ) {
            (Some(v), Some(a), Some(b)) => Some(Code::CopyUid {
                uid_validity: v,
                source: a,
                destination: b,
            }),
            _ => None,
        };
        if moving {
            // RFC 6851 §4.3: COPYUID comes untagged, before the EXPUNGEs.
            if let Some(c) = copyuid {
                self.out.ok(None, Some(c), "Moved UIDs");
            }
            sel.expunged(&from, &mut self.out);
            return Ok(Reply::ok("MOVE completed"));
        }
        Ok(match copyuid {
            Some(c) => Reply::ok("COPY completed").code(c),
            None => Reply::ok("COPY completed"),
        })
    }

    pub(crate) async fn search(
        &mut self,
        tag: &Tag<'static>,
        charset: Option<&Charset<'_>>,
        criteria: &[Key<'_>],
        uid: bool,
        esearch: Option<ReturnOptions>,
    ) -> store::Result<Reply> {
        let save = esearch.as_ref().is_some_and(|o| o.save);
        if save {
            // RFC 5182 §2.1: a SEARCH that fails leaves `$` empty.
            if let Some(sel) = self.selected.as_mut() {
                sel.saved.clear();
            }
        }
        if let Some(c) = charset {
            let c = c.as_ref().to_ascii_uppercase();
            if c != "US-ASCII" && c != "UTF-8" {
                return Ok(Reply::no("Unsupported charset").code(Code::BadCharset {
                    allowed: ["US-ASCII", "UTF-8"]
                        .into_iter()
                        .filter_map(|c| Charset::try_from(c).ok())
                        .collect(),
                }));
            }
        }
        if criteria.iter().any(uses_modseq) {
            self.enable_condstore();
        }
        let sel = self.selected.as_ref().expect("selected state");
        let keys: Result<Vec<SearchKey>, _> =
            criteria.iter().map(|k| search::convert(k, sel)).collect();
        let Ok(keys) = keys else {
            return Ok(Reply::bad(BAD_SET).no_expunge());
        };
        let key = if keys.len() == 1 {
            keys.into_iter().next().expect("one key")
        } else {
            SearchKey::And(keys)
        };
        let found = self.ctx.store.search(sel.info.id, &key).await?;
        // Only what this session's view has (new mail shows up after the
        // EXISTS that announces it).
        let numbers: Vec<u32> = found
            .iter()
            .filter_map(|u| {
                if uid {
                    sel.seq_of(*u).map(|_| *u)
                } else {
                    sel.seq_of(*u)
                }
            })
            .collect();
        let mut numbers = numbers;
        numbers.sort_unstable();
        // RFC 7162 §3.1.5: the highest mod-sequence of the messages
        // returned, none when nothing is; with MIN or MAX alone only those
        // are returned (RFC 7162 §3.1.10, RFC 4731 §3.2).
        let modseq = if self.condstore && criteria.iter().any(uses_modseq) && !numbers.is_empty() {
            let shown = match esearch.as_ref() {
                Some(opts) if opts.answers() => opts.saved(&numbers),
                _ => numbers.clone(),
            };
            let returned: std::collections::HashSet<Uid> = if uid {
                shown.into_iter().collect()
            } else {
                shown
                    .into_iter()
                    .filter_map(|n| sel.uid_at_seq(n))
                    .collect()
            };
            let entries = self.ctx.store.list_messages(sel.info.id).await?;
            NonZeroU64::new(
                entries
                    .iter()
                    .filter(|e| returned.contains(&e.uid))
                    .map(|e| e.modseq)
                    .max()
                    .unwrap_or(0),
            )
        } else {
            None
        };
        if let Some(opts) = esearch.as_ref().filter(|o| o.save) {
            let kept = opts.saved(&numbers);
            let uids: Vec<Uid> = if uid {
                kept
            } else {
                kept.iter().filter_map(|&n| sel.uid_at_seq(n)).collect()
            };
            let saved = uids.into_iter().collect();
            if let Some(sel) = self.selected.as_mut() {
                sel.saved = saved;
            }
        }
        match esearch {
            Some(opts) if !opts.answers() => {}
            Some(opts) => self.out.raw(&search::esearch(
                tag.inner(),
                uid,
                &opts,
                &numbers,
                modseq.map(NonZeroU64::get),
            )),
            None => self.out.data(Data::Search(
                numbers.iter().filter_map(|n| NonZeroU32::new(*n)).collect(),
                modseq,
            )),
        }
        let reply = Reply::ok(if uid {
            "UID SEARCH completed"
        } else {
            "SEARCH completed"
        });
        Ok(if uid { reply } else { reply.no_expunge() })
    }
}

fn uses_modseq(key: &Key<'_>) -> bool {
    match key {
        Key::ModSequence { .. } => true,
        Key::Not(k) => uses_modseq(k),
        Key::Or(a, b) => uses_modseq(a) || uses_modseq(b),
        Key::And(keys) => keys.as_ref().iter().any(uses_modseq),
        _ => false,
    }
}
