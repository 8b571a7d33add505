//! Tokenising a message: the features Bayes counts.
//!
//! A message becomes a set of strings. Plain words and word pairs come from
//! the Subject and the decoded text of the body (HTML reduced to its text);
//! everything else carries a prefix so it cannot collide with a word:
//!
//! | token | from |
//! | --- | --- |
//! | `word`, `word word` | words of 3..=20 characters, lowercased, and pairs of consecutive ones (shorter words skipped, a number or long word breaks the chain) |
//! | `s:word` | words of the Subject (also counted as plain words) |
//! | `num:N` | a number of N digits (the shape, not the value) |
//! | `long:prefix` | the first 8 characters of a word longer than 20 |
//! | `文字` | pairs of adjacent characters in CJK, Hangul or Thai runs |
//! | `url:host`, `url:domain.tld` | hosts of `http(s)://` and `www.` links, in text and in HTML attributes |
//! | `from:addr`, `from:domain` | the From address and its domain |
//! | `fn:word` | words of the From display name |
//! | `to:domain` | domains of the first 10 To and Cc addresses |
//! | `mid:domain` | the domain of the Message-ID |
//! | `rcvd:domain`, `rcvd:ip:a.b.c` | the hosts in `Received:` fields, their addresses by /24 |
//! | `list-id:id` | the List-Id |
//! | `hn:name` | the presence of a header field |
//! | `h:...` | header traits: content type, charset, transfer encoding, mailer, number of recipients, HTML-only, no To, Reply-To elsewhere |
//! | `html:...` | HTML traits: images, forms, hidden text tricks |
//! | `att:type`, `att:ext:pdf` | attachment media types and file name extensions |
//!
//! Bounds: at most [`MAX_TEXT`] bytes of decoded text are read (over all
//! parts together, Subject included) and at most [`MAX_TOKENS`] distinct
//! tokens are kept, header tokens first. A message therefore costs bounded
//! work and adds a bounded number of rows to a model, whatever its size.

use std::collections::HashSet;

use mail_parser::{Message, MessageParser, MessagePart, MimeHeaders, PartType};

/// At most this many distinct tokens are taken from one message.
pub const MAX_TOKENS: usize = 4_000;

/// At most this many bytes of decoded text (Subject and body parts
/// together) are tokenised.
pub const MAX_TEXT: usize = 64 * 1024;

/// Words shorter than this (in characters) are noise ("to", "of").
const MIN_WORD: usize = 3;
/// Words longer than this (in characters) become a `long:` token.
const MAX_WORD: usize = 20;
/// How deep message/rfc822 parts inside parts are followed.
const MAX_DEPTH: usize = 3;

/// The tokens of one message, deduplicated, bounded in number (a message
/// cannot make the model or the work grow without limit): at most
/// [`MAX_TOKENS`], from at most [`MAX_TEXT`] bytes of text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Sorted, without duplicates.
    list: Vec<String>,
}

impl Tokens {
    /// The tokens, in sorted order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(String::as_str)
    }

    /// How many distinct tokens there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether the message gave no token at all.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Tokens from a list of strings, deduplicated and cut at
    /// [`MAX_TOKENS`]: for tests and for callers that stored a message's
    /// tokens and need them back (to unlearn it, say).
    pub fn from_strings<I, S>(strings: I) -> Tokens
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut c = Collector::new();
        for s in strings {
            c.add(s.into());
        }
        c.finish()
    }
}

/// Tokenise a raw RFC 5322 message (header block + as much body as the
/// caller kept; works on a truncated message). Never fails: bytes that do
/// not parse as a message are read as plain text.
pub fn tokenize(raw: &[u8]) -> Tokens {
    let mut c = Collector::new();
    match MessageParser::default().parse(raw) {
        Some(message) if message.headers().iter().any(|h| field_name(h.name())) => {
            header_tokens(&message, &mut c);
            body_tokens(&message, &mut c, 0);
        }
        _ => {
            let take = raw.len().min(MAX_TEXT);
            let text = String::from_utf8_lossy(&raw[..take]);
            c.text(&text, None);
        }
    }
    c.finish()
}

/// Gathers distinct tokens up to the bounds.
struct Collector {
    seen: HashSet<String>,
    /// Bytes of text still allowed.
    text_left: usize,
}

impl Collector {
    fn new() -> Collector {
        Collector {
            seen: HashSet::new(),
            text_left: MAX_TEXT,
        }
    }

    fn full(&self) -> bool {
        self.seen.len() >= MAX_TOKENS
    }

    fn add(&mut self, token: String) {
        if !self.full() && !token.is_empty() {
            self.seen.insert(token);
        }
    }

    fn finish(self) -> Tokens {
        let mut list: Vec<String> = self.seen.into_iter().collect();
        list.sort_unstable();
        Tokens { list }
    }

    /// Takes as much of `text` as the text budget allows, cut at a
    /// character boundary.
    fn budget<'t>(&mut self, text: &'t str) -> &'t str {
        let mut end = text.len().min(self.text_left);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.text_left -= end;
        &text[..end]
    }

    /// Words, word pairs, CJK pairs, number shapes and URL hosts of a piece
    /// of text. With `prefix`, words are also added with it (the Subject).
    fn text(&mut self, text: &str, prefix: Option<&str>) {
        let text = self.budget(text);
        if text.is_empty() {
            return;
        }
        let lower = text.to_lowercase();
        url_hosts(&lower, self);
        let mut previous: Option<String> = None;
        let mut word = String::new();
        let mut cjk_previous: Option<char> = None;
        for ch in lower.chars().chain(std::iter::once(' ')) {
            if self.full() {
                return;
            }
            if is_cjk(ch) {
                self.word(&mut word, &mut previous, prefix);
                match cjk_previous {
                    Some(p) => self.add(format!("{p}{ch}")),
                    None => self.add(ch.to_string()),
                }
                cjk_previous = Some(ch);
                continue;
            }
            cjk_previous = None;
            if ch.is_alphanumeric() || matches!(ch, '\'' | '$' | '-' | '_') {
                // Bound the memory a word with no separators can take.
                if word.len() < 4 * MAX_WORD {
                    word.push(ch);
                }
            } else {
                self.word(&mut word, &mut previous, prefix);
            }
        }
    }

    /// Adds the finished `word` (and its pair with the previous word), then
    /// clears it.
    fn word(&mut self, word: &mut String, previous: &mut Option<String>, prefix: Option<&str>) {
        let w = word.trim_matches(|c| matches!(c, '\'' | '-' | '_'));
        let chars = w.chars().count();
        if chars == 0 {
            word.clear();
            return;
        }
        let digits = w.chars().filter(char::is_ascii_digit).count();
        if digits > 0 && digits == w.chars().filter(|c| *c != '$').count() {
            // A number: its shape says something ("$100", a 5-digit
            // code), its value mostly not.
            let dollar = if w.contains('$') { "$" } else { "" };
            self.add(format!("num:{dollar}{}", digits.min(12)));
            *previous = None;
        } else if chars > MAX_WORD {
            let head: String = w.chars().take(8).collect();
            self.add(format!("long:{head}"));
            *previous = None;
        } else if chars >= MIN_WORD {
            if let Some(p) = prefix {
                self.add(format!("{p}{w}"));
            }
            if let Some(prev) = previous.as_deref() {
                self.add(format!("{prev} {w}"));
            }
            self.add(w.to_string());
            *previous = Some(w.to_string());
        }
        word.clear();
    }
}

/// Characters of scripts written without spaces between words (Han,
/// Hiragana, Katakana, Hangul, Thai): tokenised as character pairs.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0E7F      // Thai
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x3040..=0x30FF    // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F  // CJK Extensions B..
    )
}

/// `url:` tokens for the hosts of links in lowercased text.
fn url_hosts(lower: &str, c: &mut Collector) {
    let bytes = lower.as_bytes();
    let mut starts: Vec<usize> = memchr::memmem::find_iter(bytes, b"://")
        .filter(|&i| bytes[..i].ends_with(b"http") || bytes[..i].ends_with(b"https"))
        .map(|i| i + 3)
        .collect();
    starts.extend(
        memchr::memmem::find_iter(bytes, b"www.")
            .filter(|&i| i == 0 || !bytes[i - 1].is_ascii_alphanumeric() && bytes[i - 1] != b'.'),
    );
    for start in starts {
        // A host name has at most 253 characters; the bound also keeps
        // overlapping candidates from making this quadratic.
        let rest = &lower[start..floor_boundary(lower, start + 300)];
        // Skip "user:password@" in front of the host.
        let end = rest
            .find(|ch: char| !(ch.is_alphanumeric() || matches!(ch, '.' | '-' | '@' | ':')))
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        let host = authority.rsplit('@').next().unwrap_or(authority);
        let host = host.split(':').next().unwrap_or(host);
        host_tokens("url:", host, c);
    }
}

/// `prefix` + host (without "www.") and `prefix` + its last two labels.
fn host_tokens(prefix: &str, host: &str, c: &mut Collector) {
    let host = host.trim_matches('.');
    let host = host.strip_prefix("www.").unwrap_or(host);
    if host.is_empty() || !host.contains('.') || host.len() > 100 {
        return;
    }
    if host
        .split('.')
        .all(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        c.add(format!("{prefix}ip"));
        return;
    }
    c.add(format!("{prefix}{host}"));
    let labels: Vec<&str> = host.rsplitn(3, '.').collect();
    if labels.len() == 3 {
        c.add(format!("{prefix}{}.{}", labels[1], labels[0]));
    }
}

/// Whether `name` is a valid header field name (RFC 5322 §3.6.8: printable
/// ASCII without ':'), which tells a message from other bytes.
fn field_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| (33..=126).contains(&b) && b != b':')
}

/// Header fields whose presence is not worth a token (every message has
/// them) or must not be learnt (verdicts of spam filters, ours included).
fn ignored_header(name: &str) -> bool {
    name.starts_with("x-spam")
        || name.starts_with("x-sluice")
        || matches!(
            name,
            "received" | "date" | "from" | "to" | "subject" | "message-id" | "return-path"
        )
}

fn header_tokens(message: &Message<'_>, c: &mut Collector) {
    let mut names: Vec<String> = Vec::new();
    for h in message.headers() {
        if names.len() >= 64 {
            break;
        }
        let name = h.name().to_ascii_lowercase();
        if name.len() <= 40 && field_name(&name) && !ignored_header(&name) && !names.contains(&name)
        {
            names.push(name);
        }
    }
    for name in &names {
        c.add(format!("hn:{name}"));
    }
    if names
        .iter()
        .any(|n| n == "in-reply-to" || n == "references")
    {
        c.add("h:reply".to_string());
    }

    if let Some(name) = message.from().and_then(|a| a.first()?.name()) {
        header_words("fn:", name, c);
    }
    let from_domain = match message.from().and_then(|a| a.first()?.address()) {
        Some(addr) => {
            let addr = addr.to_lowercase();
            let domain = addr.rsplit_once('@').map(|(_, d)| d.to_string());
            if addr.len() <= 100 {
                c.add(format!("from:{addr}"));
            }
            if let Some(d) = &domain {
                host_tokens("from:", d, c);
            }
            domain
        }
        None => {
            c.add("h:no-from".to_string());
            None
        }
    };
    if let Some(reply) = message.reply_to().and_then(|a| a.first()?.address()) {
        let reply = reply.to_lowercase();
        let reply_domain = reply.rsplit_once('@').map(|(_, d)| d);
        if reply_domain != from_domain.as_deref() {
            c.add("h:reply-to-elsewhere".to_string());
        }
    }
    if message.to().is_none() {
        c.add("h:no-to".to_string());
    }
    let recipients: Vec<&str> = message
        .to()
        .into_iter()
        .chain(message.cc())
        .flat_map(|a| a.iter())
        .filter_map(|a| a.address())
        .take(100)
        .collect();
    for r in recipients.iter().take(10) {
        if let Some((_, domain)) = r.rsplit_once('@') {
            host_tokens("to:", &domain.to_lowercase(), c);
        }
    }
    let many = match recipients.len() {
        0 => "0",
        1 => "1",
        2..=5 => "2-5",
        _ => "6+",
    };
    c.add(format!("h:recipients:{many}"));
    if let Some(id) = message.message_id() {
        if let Some((_, domain)) = id.rsplit_once('@') {
            host_tokens("mid:", &domain.to_lowercase(), c);
        }
    } else {
        c.add("h:no-message-id".to_string());
    }
    for (name, value) in message.headers_raw() {
        if name.eq_ignore_ascii_case("received") {
            received_tokens(value, c);
        }
    }
    if let Some(id) = message.list_id().as_text() {
        let id = id.trim().trim_start_matches('<').trim_end_matches('>');
        if !id.is_empty() && id.len() <= 100 {
            c.add(format!("list-id:{}", id.to_lowercase()));
        }
    }
    for name in ["x-mailer", "user-agent"] {
        if let Some(value) = message.header_raw(name) {
            let product: String = value
                .trim()
                .split(|ch: char| ch.is_whitespace() || ch == '/' || ch == '(')
                .next()
                .unwrap_or("")
                .chars()
                .take(30)
                .collect();
            if !product.is_empty() {
                c.add(format!("h:mailer:{}", product.to_lowercase()));
            }
        }
    }
    if let Some(value) = message.header_raw("precedence") {
        let value = value.trim().to_lowercase();
        if value.len() <= 20 {
            c.add(format!("h:precedence:{value}"));
        }
    }
    if let Some(subject) = message.subject() {
        c.text(subject, Some("s:"));
        let letters = subject.chars().filter(|ch| ch.is_alphabetic()).count();
        let upper = subject.chars().filter(|ch| ch.is_uppercase()).count();
        if letters >= 8 && upper * 10 >= letters * 8 {
            c.add("h:subject-shouting".to_string());
        }
    } else {
        c.add("h:no-subject".to_string());
    }
}

/// `prefix` + each word of a header value (display names): words of 2..=20
/// characters, lowercased, from its first 200 characters.
fn header_words(prefix: &str, value: &str, c: &mut Collector) {
    let value: String = value.chars().take(200).collect::<String>().to_lowercase();
    for w in value.split(|ch: char| !ch.is_alphanumeric()) {
        if (2..=MAX_WORD).contains(&w.chars().count()) {
            c.add(format!("{prefix}{w}"));
        }
    }
}

/// `rcvd:` tokens for the host names in a `Received:` field's "from" and
/// "by" clauses (the relays a message came through).
fn received_tokens(value: &str, c: &mut Collector) {
    let lower = value.to_lowercase();
    let mut words = lower.split_whitespace();
    while let Some(w) = words.next() {
        if w == "from" || w == "by" {
            if let Some(host) = words.next() {
                let host = host.trim_matches(|ch: char| !(ch.is_alphanumeric() || ch == '.'));
                if host.contains('.') {
                    host_tokens("rcvd:", host, c);
                }
            }
        }
    }
    // The relays' addresses, by /24: "[192.0.2.7]" gives rcvd:ip:192.0.2.
    let mut rest = lower.as_str();
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        let end = rest.find(']').unwrap_or(rest.len()).min(40);
        let inside = &rest[..floor_boundary(rest, end)];
        let octets: Vec<&str> = inside.split('.').collect();
        if octets.len() == 4
            && octets.iter().all(|o| o.parse::<u8>().is_ok())
            && inside != "127.0.0.1"
        {
            c.add(format!("rcvd:ip:{}.{}.{}", octets[0], octets[1], octets[2]));
        }
    }
}

fn content_type_of(part: &MessagePart<'_>) -> Option<String> {
    let ct = part.content_type()?;
    let t = ct.ctype().to_lowercase();
    let s = ct.subtype().unwrap_or("").to_lowercase();
    Some(format!("{t}/{s}")).filter(|v| v.len() <= 60)
}

fn body_tokens(message: &Message<'_>, c: &mut Collector, depth: usize) {
    if let Some(ct) = content_type_of(message.root_part()) {
        c.add(format!("h:content-type:{ct}"));
    }
    let mut plain = false;
    let mut html = false;
    for part in &message.parts {
        if c.full() {
            return;
        }
        if let Some(charset) = part.content_type().and_then(|ct| ct.attribute("charset")) {
            if charset.len() <= 30 {
                c.add(format!("h:charset:{}", charset.to_lowercase()));
            }
        }
        if let Some(cte) = part.content_transfer_encoding() {
            if cte.len() <= 30 && !part.is_multipart() {
                c.add(format!("h:cte:{}", cte.to_lowercase()));
            }
        }
        match &part.body {
            PartType::Text(text) => {
                plain = true;
                c.text(text, None);
            }
            PartType::Html(text) => {
                html = true;
                let stripped = html_text(text, c);
                c.text(&stripped.text, None);
                url_hosts(&stripped.links.to_lowercase(), c);
            }
            PartType::Binary(_) | PartType::InlineBinary(_) => {
                if let Some(ct) = content_type_of(part) {
                    c.add(format!("att:{ct}"));
                }
                if let Some(name) = part.attachment_name() {
                    if let Some((_, ext)) = name.rsplit_once('.') {
                        if (1..=8).contains(&ext.len()) {
                            c.add(format!("att:ext:{}", ext.to_lowercase()));
                        }
                    }
                }
            }
            PartType::Message(inner) => {
                c.add("att:message/rfc822".to_string());
                if depth < MAX_DEPTH {
                    body_tokens(inner, c, depth + 1);
                }
            }
            PartType::Multipart(_) => {}
        }
    }
    if html && !plain && depth == 0 {
        c.add("h:html-only".to_string());
    }
}

/// The text of an HTML part and the targets of its links.
struct HtmlText {
    text: String,
    links: String,
}

/// Reduces HTML to its text: tags and comments go (inline tags without a
/// space, so `fr<b></b>ee` reads "free"), `script` and `style` contents
/// go, common entities are decoded; `href`/`src` values are kept apart for
/// `url:` tokens. Bounded by the text budget.
fn html_text(html: &str, c: &mut Collector) -> HtmlText {
    let html = &html[..floor_boundary(html, c.text_left.min(html.len()) * 2)];
    let mut text = String::with_capacity(html.len().min(MAX_TEXT));
    let mut links = String::new();
    let mut rest = html;
    while !rest.is_empty() {
        let Some(lt) = rest.find(['<', '&']) else {
            text.push_str(rest);
            break;
        };
        text.push_str(&rest[..lt]);
        rest = &rest[lt..];
        if rest.starts_with('&') {
            let (ch, used) = entity(rest);
            text.push(ch);
            rest = &rest[used..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = match after.find("-->") {
                Some(end) => &after[end + 3..],
                None => "",
            };
            continue;
        }
        let end = rest.find('>').map_or(rest.len(), |e| e + 1);
        let tag = &rest[1..end.saturating_sub(1).max(1)];
        rest = &rest[end..];
        let lower = tag.to_ascii_lowercase();
        let name: String = lower
            .trim_start_matches('/')
            .chars()
            .take_while(|ch| ch.is_ascii_alphanumeric())
            .collect();
        for attr in ["href=", "src=", "action="] {
            if let Some(at) = lower.find(attr) {
                let value = &tag[at + attr.len()..];
                let value = value.trim_start_matches(['"', '\'']);
                let stop = value.find(['"', '\'', ' ', '>']).unwrap_or(value.len());
                links.push_str(&value[..stop.min(300)]);
                links.push(' ');
            }
        }
        match name.as_str() {
            "img" => c.add("html:img".to_string()),
            "form" => c.add("html:form".to_string()),
            "script" | "style" if !lower.starts_with('/') => {
                rest = skip_to_close(rest, &name);
                continue;
            }
            _ => {}
        }
        if lower.contains("display:none") || lower.contains("font-size:0") {
            c.add("html:hidden-text".to_string());
        }
        if !matches!(
            name.as_str(),
            "b" | "i" | "u" | "em" | "strong" | "font" | "span" | "a" | "small" | "big"
        ) {
            text.push(' ');
        }
    }
    HtmlText { text, links }
}

/// `rest` from the closing tag `</name` on (case-insensitive), or "" when
/// there is none. Linear in what it skips.
fn skip_to_close<'h>(rest: &'h str, name: &str) -> &'h str {
    let bytes = rest.as_bytes();
    for at in memchr::memmem::find_iter(bytes, b"</") {
        let after = &bytes[at + 2..];
        if after.len() >= name.len() && after[..name.len()].eq_ignore_ascii_case(name.as_bytes()) {
            return &rest[at..];
        }
    }
    ""
}

/// The largest character boundary of `s` at or below `at`.
fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Decodes the entity at the start of `s` (which starts with '&'): the
/// character and how many bytes it took. Unknown ones stay a literal '&'.
fn entity(s: &str) -> (char, usize) {
    let end = s
        .bytes()
        .take(10)
        .position(|b| b == b';')
        .filter(|&e| e > 1);
    let Some(end) = end else {
        return ('&', 1);
    };
    let name = &s[1..end];
    let ch = match name {
        "nbsp" => Some(' '),
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            if let Some(hex) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)
            } else if let Some(dec) = name.strip_prefix('#') {
                dec.parse::<u32>().ok().and_then(char::from_u32)
            } else {
                None
            }
        }
    };
    match ch {
        Some(ch) => (ch, end + 1),
        None => ('&', 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn has(t: &Tokens, token: &str) -> bool {
        t.iter().any(|x| x == token)
    }

    #[test]
    fn words_pairs_and_headers() {
        let raw = b"Received: from mx.relay.example (mx.relay.example [192.0.2.7])\r\n\
\tby in.example.net; Mon, 1 Jan 2024 10:00:00 +0000\r\n\
From: Alice <alice@mail.example.com>\r\nTo: bob@example.net\r\n\
Subject: Lunch on Friday?\r\nMessage-ID: <1@mail.example.com>\r\nX-Mailer: Mutt/2.0\r\n\
In-Reply-To: <0@example.net>\r\n\r\nShall we meet at the Noodle bar? Costs $12.\r\n";
        let t = tokenize(raw);
        for token in [
            "lunch",
            "s:lunch",
            "friday",
            "shall",
            "meet",
            "noodle bar",
            "noodle",
            "num:$2",
            "from:alice@mail.example.com",
            "from:mail.example.com",
            "from:example.com",
            "mid:example.com",
            "h:mailer:mutt",
            "h:reply",
            "hn:x-mailer",
            "fn:alice",
            "to:example.net",
            "h:recipients:1",
            "rcvd:relay.example",
            "rcvd:ip:192.0.2",
        ] {
            assert!(has(&t, token), "{token} missing from {:?}", t.list);
        }
        // Two-letter words are noise.
        assert!(!has(&t, "at"));
        assert!(!has(&t, "hn:subject"));
    }

    #[test]
    fn mime_decoding_html_and_attachments() {
        let raw = b"From: shop@deals.example\r\nSubject: =?UTF-8?B?R3Jvw59lIFJhYmF0dGU=?=\r\n\
MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n--XX\r\n\
Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
<html><style>p{color:red}</style><p>Cheap fr<b></b>ee pills &amp; more</p>\r\n\
<a href=3D\"http://www.pills.shop.example/buy\">click</a><img src=3D\"x.gif\"></html>\r\n\
--XX\r\nContent-Type: application/pdf; name=\"invoice.PDF\"\r\n\
Content-Disposition: attachment; filename=\"invoice.PDF\"\r\nContent-Transfer-Encoding: base64\r\n\r\n\
JVBERi0=\r\n--XX--\r\n";
        let t = tokenize(raw);
        for token in [
            "große",
            "rabatte",
            "s:große",
            "cheap",
            "free",
            "pills",
            "url:pills.shop.example",
            "url:shop.example",
            "html:img",
            "h:html-only",
            "h:content-type:multipart/mixed",
            "h:cte:quoted-printable",
            "h:charset:utf-8",
            "att:application/pdf",
            "att:ext:pdf",
        ] {
            assert!(has(&t, token), "{token} missing from {:?}", t.list);
        }
        assert!(!has(&t, "color"), "style contents are not text");
    }

    #[test]
    fn cjk_runs_become_character_pairs() {
        let t = tokenize("Subject: x\r\n\r\n今日は良い天気 ok\r\n".as_bytes());
        for token in ["今日", "日は", "天気"] {
            assert!(has(&t, token), "{token} missing from {:?}", t.list);
        }
    }

    #[test]
    fn long_words_and_numbers_become_shapes() {
        let t = tokenize(b"Subject: x\r\n\r\nabcdefghijklmnopqrstuvwxyz 123456 order\r\n");
        assert!(has(&t, "long:abcdefgh"));
        assert!(has(&t, "num:6"));
        assert!(!has(&t, "123456"));
    }

    #[test]
    fn spam_filter_headers_are_not_learnt() {
        let t =
            tokenize(b"X-Spam-Status: Yes\r\nX-Spam-Flag: YES\r\nSubject: x\r\n\r\nhi there\r\n");
        assert!(!t.iter().any(|x| x.contains("spam")), "{:?}", t.list);
    }

    #[test]
    fn not_a_message_is_read_as_text() {
        let t = tokenize(b"\x00\x01 plain words here");
        assert!(has(&t, "plain"));
        assert!(has(&t, "words here"));
    }

    #[test]
    fn truncated_message() {
        let raw = b"From: a@b.example\r\nSubject: hello world\r\nContent-Type: multipart/alternative; boundary=q\r\n\r\n--q\r\nContent-Type: text/plain\r\n\r\nsome truncated te";
        let t = tokenize(raw);
        assert!(has(&t, "hello"));
        assert!(has(&t, "truncated"));
    }

    #[test]
    fn bounded() {
        let mut raw = b"Subject: big\r\n\r\n".to_vec();
        for i in 0..200_000u32 {
            raw.extend_from_slice(format!("w{i:x}q ").as_bytes());
        }
        let t = tokenize(&raw);
        assert!(t.len() <= MAX_TOKENS);
        assert!(t.len() > 1000);
    }

    #[test]
    fn pathological_inputs_stay_linear() {
        // Each of these was quadratic in an earlier draft.
        let mut raw = b"Content-Type: text/html\r\n\r\n".to_vec();
        raw.extend(b"<script>".repeat(20_000));
        raw.extend(b"-www.".repeat(20_000));
        raw.extend(b"http://".repeat(20_000));
        let t = tokenize(&raw);
        assert!(t.len() <= MAX_TOKENS);
        let mut raw = Vec::new();
        for i in 0..50_000 {
            raw.extend(format!("X-H{i}: v\r\n").as_bytes());
        }
        raw.extend(b"\r\nbody text\r\n");
        let t = tokenize(&raw);
        assert!(t.iter().filter(|x| x.starts_with("hn:")).count() <= 64);
    }

    proptest! {
        #[test]
        fn never_panics_and_stays_bounded(raw in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let t = tokenize(&raw);
            prop_assert!(t.len() <= MAX_TOKENS);
            let mut sorted: Vec<&str> = t.iter().collect();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), t.len());
        }

        #[test]
        fn message_like_input_never_panics(
            headers in proptest::collection::vec("[A-Za-z-]{1,12}: [ -~\u{80}-\u{10ffff}]{0,40}", 0..8),
            body in "[ -~\u{80}-\u{10ffff}<>&;\r\n]{0,400}",
        ) {
            let raw = format!("{}\r\n\r\n{}", headers.join("\r\n"), body);
            let t = tokenize(raw.as_bytes());
            prop_assert!(t.len() <= MAX_TOKENS);
        }
    }
}
