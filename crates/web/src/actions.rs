//! Acting on a selection of messages: flags, moves, Spam and Not spam,
//! deleting (to Trash, or for good inside Trash after a confirmation),
//! emptying Trash and marking a whole folder read.
//!
//! Moving into or out of Junk goes through [`store::Store::move_messages`],
//! the move IMAP uses, which queues the message to train the account's
//! spam classifier; the Spam buttons are such moves.

use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use store::{FlagChange, MailboxId, MailboxInfo, Uid, FLAG_FLAGGED, FLAG_SEEN};

use crate::action_pages::{self, Confirm};
use crate::error::WebError;
use crate::pages::Chrome;
use crate::routes::{folder_list, mailboxes, owned, App};
use crate::session::{self, User};

/// The mailbox of a special use (RFC 6154 §2), if the account has one.
pub(crate) fn special(boxes: &[MailboxInfo], use_: &str) -> Option<MailboxId> {
    boxes
        .iter()
        .find(|b| {
            b.special_use
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case(use_))
        })
        .map(|b| b.id)
}

fn is_role(info: &MailboxInfo, use_: &str) -> bool {
    info.special_use
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case(use_))
}

/// `POST /mail/{mailbox}/act`.
pub(crate) async fn act(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    Path(mailbox): Path<MailboxId>,
    Form(fields): Form<Vec<(String, String)>>,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    user.check_csrf(field("csrf"))?;
    let boxes = mailboxes(&app, &user).await?;
    let info = owned(&boxes, mailbox)?.clone();
    let mut uids: Vec<Uid> = fields
        .iter()
        .filter(|(k, _)| k == "uid")
        .map(|(_, v)| {
            v.parse()
                .map_err(|_| WebError::BadRequest("bad message number".into()))
        })
        .collect::<Result<_, _>>()?;
    uids.sort_unstable();
    uids.dedup();
    let action = field("action").unwrap_or("");
    let confirmed = field("confirm") == Some("1");
    let store = &app.ctx.store;
    let mut back = field("back")
        .filter(|b| b.starts_with(&format!("/mail/{mailbox}")) && !b.contains("//"))
        .unwrap_or("")
        .to_string();
    if back.is_empty() {
        back = format!("/mail/{mailbox}");
    }
    let list = format!("/mail/{mailbox}");
    let in_trash = is_role(&info, "\\Trash");
    // Whole-folder actions need no selection.
    match action {
        "allread" => {
            let unseen: Vec<Uid> = store
                .list_messages(mailbox)
                .await?
                .iter()
                .filter(|e| e.flags & FLAG_SEEN == 0)
                .map(|e| e.uid)
                .collect();
            if !unseen.is_empty() {
                store
                    .update_flags(mailbox, &unseen, FlagChange::Add, FLAG_SEEN, &[], None)
                    .await?;
            }
            return Ok(Redirect::to(&back).into_response());
        }
        "empty" => {
            if !in_trash {
                return Err(WebError::BadRequest("only Trash can be emptied".into()));
            }
            if !confirmed {
                return ask(
                    &user,
                    &boxes,
                    mailbox,
                    Confirm {
                        title: "Empty Trash",
                        question: format!(
                            "Delete all {} messages in {} for good? This cannot be undone.",
                            info.messages, info.name
                        ),
                        action: format!("{list}/act"),
                        fields: vec![
                            ("csrf".into(), user.csrf.clone()),
                            ("action".into(), "empty".into()),
                        ],
                        button: "Empty Trash",
                        cancel: list,
                    },
                );
            }
            let all: Vec<Uid> = store
                .list_messages(mailbox)
                .await?
                .iter()
                .map(|e| e.uid)
                .collect();
            if !all.is_empty() {
                store.expunge(mailbox, &all).await?;
            }
            tracing::info!(account = %user.address, messages = all.len(), "webmail emptied trash");
            return Ok(Redirect::to(&list).into_response());
        }
        _ => {}
    }
    if uids.is_empty() {
        return Ok(Redirect::to(&back).into_response());
    }
    let flags = |change, flag| store.update_flags(mailbox, &uids, change, flag, &[], None);
    match action {
        "read" => drop(flags(FlagChange::Add, FLAG_SEEN).await?),
        "unread" => drop(flags(FlagChange::Remove, FLAG_SEEN).await?),
        "flag" => drop(flags(FlagChange::Add, FLAG_FLAGGED).await?),
        "unflag" => drop(flags(FlagChange::Remove, FLAG_FLAGGED).await?),
        // RFC 6154 §2: deleting what is already in Trash removes it.
        "trash" if in_trash => {
            if !confirmed {
                let mut fields = vec![
                    ("csrf".to_string(), user.csrf.clone()),
                    ("action".to_string(), "trash".to_string()),
                ];
                fields.extend(uids.iter().map(|u| ("uid".to_string(), u.to_string())));
                return ask(
                    &user,
                    &boxes,
                    mailbox,
                    Confirm {
                        title: "Delete for good",
                        question: format!(
                            "Delete {} message{} for good? This cannot be undone.",
                            uids.len(),
                            if uids.len() == 1 { "" } else { "s" }
                        ),
                        action: format!("{list}/act"),
                        fields,
                        button: "Delete for good",
                        cancel: back,
                    },
                );
            }
            store.expunge(mailbox, &uids).await?;
            back = list;
        }
        "trash" | "archive" | "move" | "spam" | "notspam" => {
            let to = match action {
                "trash" => special(&boxes, "\\Trash")
                    .ok_or_else(|| WebError::BadRequest("there is no Trash folder".into()))?,
                "archive" => special(&boxes, "\\Archive")
                    .ok_or_else(|| WebError::BadRequest("there is no Archive folder".into()))?,
                "spam" => special(&boxes, "\\Junk")
                    .ok_or_else(|| WebError::BadRequest("there is no Junk folder".into()))?,
                "notspam" => boxes
                    .iter()
                    .find(|b| b.name == "INBOX")
                    .map(|b| b.id)
                    .ok_or(WebError::NotFound)?,
                _ => match field("to").unwrap_or("") {
                    "" => {
                        return Err(WebError::BadRequest(
                            "choose the folder to move the messages to".into(),
                        ))
                    }
                    t => t
                        .parse()
                        .map_err(|_| WebError::BadRequest("no such folder".into()))?,
                },
            };
            owned(&boxes, to)?;
            if to != mailbox {
                store.move_messages(mailbox, &uids, to).await?;
                // The message left: go back to the list page it was
                // opened from.
                if back.split('?').next() != Some(&list) {
                    back = crate::position::carried_by(mailbox, &back).unwrap_or(list);
                }
            }
        }
        _ => return Err(WebError::BadRequest("unknown action".into())),
    }
    Ok(Redirect::to(&back).into_response())
}

/// Answers with a page asking to confirm.
fn ask(
    user: &User,
    boxes: &[MailboxInfo],
    mailbox: MailboxId,
    c: Confirm<'_>,
) -> Result<Response, WebError> {
    let folders = folder_list(boxes);
    let chrome = Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: Some(mailbox),
        view: "confirm",
        query: "",
        since: None,
    };
    Ok(action_pages::confirm(&chrome, &c).into_response())
}

/// The spam filter's verdict on a message, read from the fields it added
/// at delivery (`X-Spam-Status`, SpamAssassin style: `Yes, score=7.3
/// required=5.0 tests=BAYES_99=3.5,DNSBL=2.0`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpamVerdict {
    pub spam: bool,
    pub score: String,
    pub required: Option<String>,
    /// Each test and its points.
    pub tests: Vec<(String, String)>,
}

impl SpamVerdict {
    /// Parses an unfolded `X-Spam-Status` value; `None` if it is not one.
    pub(crate) fn parse(status: &str) -> Option<SpamVerdict> {
        let (verdict, rest) = status.split_once(',')?;
        let spam = match verdict.trim().to_ascii_lowercase().as_str() {
            "yes" => true,
            "no" => false,
            _ => return None,
        };
        let mut v = SpamVerdict {
            spam,
            score: String::new(),
            required: None,
            tests: Vec::new(),
        };
        // Folding may have put white space after the commas of `tests=`.
        let mut words = rest.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if let Some(s) = w.strip_prefix("score=") {
                v.score = s.to_string();
            } else if let Some(r) = w.strip_prefix("required=") {
                v.required = Some(r.to_string());
            } else if let Some(t) = w.strip_prefix("tests=") {
                let mut list = t.to_string();
                while words
                    .peek()
                    .is_some_and(|n| !n.contains("=") || list.ends_with(','))
                {
                    list.push_str(words.next().unwrap_or(""));
                }
                for item in list.split(',').filter(|i| !i.is_empty() && *i != "none") {
                    let (name, points) = item.split_once('=').unwrap_or((item, ""));
                    v.tests.push((name.to_string(), points.to_string()));
                }
            }
        }
        (!v.score.is_empty()).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spam_status_is_read_with_its_tests() {
        let v = SpamVerdict::parse(
            "Yes, score=7.3 required=5.0 tests=BAYES_99=3.5, DNSBL=2.0,SPF_FAIL=1.8",
        )
        .unwrap();
        assert!(v.spam);
        assert_eq!(v.score, "7.3");
        assert_eq!(v.required.as_deref(), Some("5.0"));
        assert_eq!(
            v.tests,
            [
                ("BAYES_99".to_string(), "3.5".to_string()),
                ("DNSBL".into(), "2.0".into()),
                ("SPF_FAIL".into(), "1.8".into())
            ]
        );
        let none = SpamVerdict::parse("No, score=0.0 required=5.0 tests=none").unwrap();
        assert!(!none.spam && none.tests.is_empty());
        assert_eq!(SpamVerdict::parse("maybe"), None);
        assert_eq!(SpamVerdict::parse("Yes, tests=none"), None);
    }
}
