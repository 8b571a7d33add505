//! Sending a finished draft: the one place the webmail hands mail on.
//!
//! The draft's stored blob is filed into local recipients' INBOXes (no
//! copy of the text) and queued for remote ones, under the account's own
//! address; then it moves to Sent. The sent blob never has a Bcc field
//! (compose builds it without).

use store::{FlagChange, MailboxId, Resolution, Uid, FLAG_SEEN};

use crate::error::WebError;
use crate::session::User;
use crate::Context;

/// Whether every recipient can be reached; the text says why not.
pub(crate) fn check_recipients(ctx: &Context, recipients: &[String]) -> Result<(), String> {
    let directory = ctx.directory.get();
    for r in recipients {
        match directory.resolve(r) {
            Resolution::Deliver { .. } | Resolution::NotLocal => {}
            Resolution::UnknownUser => {
                return Err(format!("{r} does not exist. Nothing was sent."))
            }
        }
    }
    Ok(())
}

/// Sends the draft `uid` of `drafts` to `recipients` and files it in Sent;
/// returns where the sent copy is.
pub(crate) async fn send(
    ctx: &Context,
    user: &User,
    drafts: MailboxId,
    uid: Uid,
    recipients: &[String],
) -> Result<(MailboxId, Uid), WebError> {
    check_recipients(ctx, recipients).map_err(WebError::BadRequest)?;
    let blob = ctx
        .store
        .message_data(drafts, &[uid])
        .await?
        .first()
        .map(|d| d.entry.blob)
        .ok_or(WebError::NotFound)?;
    // Scanned like submitted and incoming mail, before anything counts.
    if let Some(scan) = &ctx.scan {
        match scan(blob).await {
            Ok(None) => {}
            Ok(Some(why)) => {
                tracing::warn!(account = %user.address, reason = %why, "webmail message refused");
                return Err(WebError::Refused(why));
            }
            Err(e) => {
                tracing::error!(error = %e, "webmail message could not be scanned");
                return Err(WebError::Unavailable(
                    "the message could not be scanned".into(),
                ));
            }
        }
    }
    // The same hourly limits as submission over SMTP, counted together:
    // the webmail is no way around them.
    if let Some(limit) = &ctx.send_limit {
        if !limit(user.account, recipients.len() as u32) {
            tracing::warn!(account = %user.address, "webmail sending limit reached");
            return Err(WebError::TooMany(
                "this account reached its hourly sending limit; the message is kept in Drafts"
                    .into(),
            ));
        }
    }
    let directory = ctx.directory.get();
    let mut inboxes: Vec<MailboxId> = Vec::new();
    let mut remote: Vec<String> = Vec::new();
    for r in recipients {
        match directory.resolve(r) {
            Resolution::Deliver {
                mailboxes,
                remote: far,
            } => {
                inboxes.extend(mailboxes);
                remote.extend(far);
            }
            Resolution::NotLocal => remote.extend(store::normalize_address(r)),
            Resolution::UnknownUser => {}
        }
    }
    inboxes.sort_unstable();
    inboxes.dedup();
    remote.sort_unstable();
    remote.dedup();
    let store = &ctx.store;
    if !remote.is_empty() {
        store.queue_message(blob, &user.address, &remote).await?;
    }
    for inbox in inboxes {
        for (_, new) in store.copy_messages(drafts, &[uid], inbox).await? {
            // New mail for the recipient: unread, not a draft.
            store
                .update_flags(inbox, &[new], FlagChange::Replace, 0, &[], None)
                .await?;
        }
    }
    let sent = store
        .list_mailboxes(user.account)
        .await?
        .into_iter()
        .find(|b| {
            b.special_use
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("\\Sent"))
        })
        .ok_or(WebError::NotFound)?;
    let moved = store.move_messages(drafts, &[uid], sent.id).await?;
    let (_, sent_uid) = moved.first().copied().ok_or(WebError::NotFound)?;
    store
        .update_flags(
            sent.id,
            &[sent_uid],
            FlagChange::Replace,
            FLAG_SEEN,
            &[],
            None,
        )
        .await?;
    Ok((sent.id, sent_uid))
}
