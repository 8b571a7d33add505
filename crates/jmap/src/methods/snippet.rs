//! SearchSnippet/get (RFC 8621 §5): where a search's words are in each
//! email's subject and text, as HTML with the words in `<mark>`.

use std::collections::HashMap;

use serde_json::{json, Value};
use store::{BlobId, MailboxId};

use super::args::Args;
use super::Answer;
use crate::api::Call;
use crate::error::MethodError;
use crate::ids;
use crate::message::{self, BlobReader};

/// Characters of text around the first match (§5: at most 255).
const PREVIEW_CHARS: usize = 255;
/// Text of a body read for its snippet.
const TEXT_BYTES: usize = 64 * 1024;

/// The words a filter searches text for (text, subject and body
/// conditions, at any depth): the phrases as given, lower case.
fn terms(filter: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > 32 {
        return;
    }
    let Value::Object(f) = filter else { return };
    if let Some(Value::Array(c)) = f.get("conditions") {
        // Words under NOT are what the emails lack: nothing to mark.
        if f.get("operator").and_then(Value::as_str) != Some("NOT") {
            for c in c {
                terms(c, out, depth + 1);
            }
        }
        return;
    }
    for key in ["text", "subject", "body"] {
        if let Some(Value::String(s)) = f.get(key) {
            let s = s.trim().to_lowercase();
            if !s.is_empty() && !out.contains(&s) {
                out.push(s);
            }
        }
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// Where `terms` occur in `text` (char ranges, merged), comparing
/// lower case character by character.
fn matches(text: &str, terms: &[String]) -> Vec<(usize, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let mut found: Vec<(usize, usize)> = Vec::new();
    for t in terms {
        let t: Vec<char> = t.chars().collect();
        if t.is_empty() || t.len() > lower.len() {
            continue;
        }
        let mut i = 0;
        while i + t.len() <= lower.len() {
            if lower[i..i + t.len()] == t[..] {
                found.push((i, i + t.len()));
                i += t.len();
            } else {
                i += 1;
            }
        }
    }
    found.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (s, e) in found {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// `text` (chars `from..to`) as HTML with `marks` in `<mark>`.
fn marked(text: &[char], from: usize, to: usize, marks: &[(usize, usize)]) -> String {
    let mut out = String::new();
    let mut at = from;
    for &(s, e) in marks.iter().filter(|(s, e)| *e > from && *s < to) {
        let (s, e) = (s.max(from), e.min(to));
        out.push_str(&escape(&text[at..s].iter().collect::<String>()));
        out.push_str("<mark>");
        out.push_str(&escape(&text[s..e].iter().collect::<String>()));
        out.push_str("</mark>");
        at = e;
    }
    out.push_str(&escape(&text[at..to].iter().collect::<String>()));
    out
}

/// The subject with every match marked, or `None` without a match.
pub(crate) fn subject_snippet(subject: &str, terms: &[String]) -> Option<String> {
    let m = matches(subject, terms);
    if m.is_empty() {
        return None;
    }
    let chars: Vec<char> = subject.chars().collect();
    Some(marked(&chars, 0, chars.len(), &m))
}

/// Up to 255 characters of text around the first match, white space
/// folded, matches marked; `None` without a match.
pub(crate) fn text_snippet(text: &str, terms: &[String]) -> Option<String> {
    let folded = message::preview_fold(text);
    let m = matches(&folded, terms);
    let &(first, _) = m.first()?;
    let chars: Vec<char> = folded.chars().collect();
    let from = first.saturating_sub(PREVIEW_CHARS / 4);
    let to = (from + PREVIEW_CHARS).min(chars.len());
    Some(marked(&chars, from, to, &m))
}

/// SearchSnippet/get (§5.1).
pub(super) async fn get(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "filter", "emailIds"])?;
    let wanted = args
        .strings("emailIds")?
        .ok_or_else(|| MethodError::invalid_arguments("emailIds is required"))?;
    if wanted.len() > call.jmap.ctx.config.max_objects_in_get {
        return Err(MethodError::request_too_large(
            "more ids than maxObjectsInGet",
        ));
    }
    let mut words = Vec::new();
    if let Some(f) = args.0.get("filter") {
        terms(f, &mut words, 0);
    }
    let store = call.jmap.ctx.store.clone();
    let account = call.user.account;
    let blobs: Vec<BlobId> = wanted
        .iter()
        .filter_map(|id| call.resolve_id(id).and_then(|id| ids::parse_email(&id)))
        .collect();
    let emails = if blobs.is_empty() {
        Vec::new()
    } else {
        store.account_emails(account, Some(&blobs)).await?
    };
    let mut by_mailbox: HashMap<MailboxId, Vec<u32>> = HashMap::new();
    for e in &emails {
        let (m, entry) = &e.entries[0];
        by_mailbox.entry(*m).or_default().push(entry.uid);
    }
    let mut data = HashMap::new();
    if !words.is_empty() {
        for (mailbox, uids) in by_mailbox {
            for d in store.message_data(mailbox, &uids).await? {
                data.insert(d.entry.blob, d);
            }
        }
    }
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    for id in wanted {
        let blob = call.resolve_id(&id).and_then(|id| ids::parse_email(&id));
        let Some(email) = blob.and_then(|b| emails.iter().find(|e| e.blob == b)) else {
            not_found.push(id);
            continue;
        };
        let (mut subject, mut preview) = (Value::Null, Value::Null);
        if let Some(d) = data.get(&email.blob) {
            let title = message::header_value(
                &d.header,
                &message::header_property("header:Subject:asText").expect("a known form"),
            );
            subject = title
                .as_str()
                .and_then(|s| subject_snippet(s, &words))
                .map_or(Value::Null, Value::from);
            let tree = message::tree(&d.structure);
            let (text, html, _) = message::body_lists(&tree);
            if let Some(n) = text
                .iter()
                .chain(html.iter())
                .find(|n| n.part.media_type == "text")
            {
                let mut reader = BlobReader::new(store.clone(), email.blob);
                let (body, _) = message::text_value(&mut reader, n.part, TEXT_BYTES).await?;
                let body = if n.part.media_subtype == "html" {
                    message::strip_tags(&body)
                } else {
                    body
                };
                preview = text_snippet(&body, &words).map_or(Value::Null, Value::from);
            }
        }
        list.push(
            json!({"emailId": ids::email(email.blob), "subject": subject, "preview": preview}),
        );
    }
    Ok(vec![(
        "SearchSnippet/get".into(),
        json!({
            "accountId": ids::account(account),
            "list": list,
            "notFound": not_found,
        }),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_marked_and_html_escaped() {
        let mut t = Vec::new();
        terms(
            &json!({"operator": "AND", "conditions": [{"text": "Zebra"}, {"operator": "NOT", "conditions": [{"text": "lion"}]}, {"subject": "<b>"}]}),
            &mut t,
            0,
        );
        assert_eq!(t, ["zebra", "<b>"]);
        assert_eq!(
            subject_snippet("The ZEBRA <b> report", &t).unwrap(),
            "The <mark>ZEBRA</mark> <mark>&lt;b&gt;</mark> report"
        );
        assert_eq!(subject_snippet("nothing here", &t), None);
        let long = format!("{} zebra {}", "x ".repeat(300), "y ".repeat(300));
        let s = text_snippet(&long, &t).unwrap();
        assert!(s.contains("<mark>zebra</mark>"), "{s}");
        assert!(
            s.replace("<mark>", "")
                .replace("</mark>", "")
                .chars()
                .count()
                <= 255
        );
    }
}
