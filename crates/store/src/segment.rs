//! Text of scripts written without spaces, cut into characters for the
//! full-text index.
//!
//! The index's tokenizer (unicode61) cuts words at spaces and punctuation.
//! Chinese, Japanese and Thai put no space between words, so a whole
//! sentence became one token and `SEARCH BODY 日本語` found nothing in
//! `日本語のテキスト`. Cutting such text into user-perceived characters
//! (grapheme clusters: a Thai consonant keeps its vowel and tone marks),
//! at indexing and in the query alike, makes every character a token, and
//! a search becomes a phrase of consecutive characters: an exact
//! substring match, with no dictionary to guess word boundaries. Lucene's
//! CJK analysers and Xapian's n-gram mode do the same with bigrams; single
//! characters index less and find one-character words too. Korean is
//! written with spaces, but its words carry particles (`서울에서`), so a
//! search for `서울` needs the same treatment.

use std::borrow::Cow;

use unicode_segmentation::UnicodeSegmentation;

/// Whether `c` belongs to a script written without spaces between words
/// (or, for Hangul, with particles glued to them).
fn is_unspaced(c: char) -> bool {
    matches!(c,
        '\u{0E00}'..='\u{0EFF}'       // Thai, Lao
        | '\u{1000}'..='\u{109F}'     // Myanmar
        | '\u{1100}'..='\u{11FF}'     // Hangul Jamo
        | '\u{1780}'..='\u{17FF}'     // Khmer
        | '\u{19E0}'..='\u{19FF}'     // Khmer symbols
        | '\u{2E80}'..='\u{2FDF}'     // CJK radicals, Kangxi radicals
        | '\u{3005}'..='\u{3007}'     // 々 〆 〇
        | '\u{3021}'..='\u{3029}'     // Hangzhou numerals
        | '\u{3031}'..='\u{3035}'     // kana repeat marks
        | '\u{3038}'..='\u{303C}'
        | '\u{3040}'..='\u{30FF}'     // Hiragana, Katakana
        | '\u{3100}'..='\u{318F}'     // Bopomofo, Hangul compatibility Jamo
        | '\u{31A0}'..='\u{31FF}'     // Bopomofo ext., CJK strokes, Katakana ext.
        | '\u{3400}'..='\u{4DBF}'     // CJK extension A
        | '\u{4E00}'..='\u{9FFF}'     // CJK unified ideographs
        | '\u{A960}'..='\u{A97F}'     // Hangul Jamo ext. A
        | '\u{AC00}'..='\u{D7FF}'     // Hangul syllables, Jamo ext. B
        | '\u{F900}'..='\u{FAFF}'     // CJK compatibility ideographs
        | '\u{FF66}'..='\u{FFDC}'     // halfwidth Katakana and Hangul
        | '\u{1B000}'..='\u{1B16F}'   // Kana supplement and extensions
        | '\u{20000}'..='\u{323AF}' // CJK extensions B to H
    )
}

/// `text` with a space around every grapheme cluster of a script written
/// without spaces, so the tokenizer makes each its own token; text
/// without such scripts comes back as it is, uncopied.
pub(crate) fn spaced(text: &str) -> Cow<'_, str> {
    if text.is_ascii() || !text.chars().any(is_unspaced) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut after_unspaced = false;
    for cluster in text.graphemes(true) {
        let unspaced = cluster.chars().next().is_some_and(is_unspaced);
        let apart = out.is_empty()
            || out.ends_with(char::is_whitespace)
            || cluster.starts_with(char::is_whitespace);
        if (unspaced || after_unspaced) && !apart {
            out.push(' ');
        }
        out.push_str(cluster);
        after_unspaced = unspaced;
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_with_spaces_is_left_alone() {
        for text in [
            "",
            "plain ASCII, words.",
            "Zürich Ærøskøbing Москва",
            "ελληνικά",
        ] {
            assert!(matches!(spaced(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn each_character_of_unspaced_scripts_stands_apart() {
        assert_eq!(spaced("日本語のテキスト"), "日 本 語 の テ キ ス ト");
        assert_eq!(spaced("中文邮件"), "中 文 邮 件");
        assert_eq!(spaced("서울에서 만나요"), "서 울 에 서 만 나 요");
        // Latin words next to ideographs are cut from them, not inside.
        assert_eq!(spaced("Rust言語で mail"), "Rust 言 語 で mail");
        assert_eq!(spaced("「東京」、大阪。"), "「 東 京 」、 大 阪 。");
    }

    #[test]
    fn thai_marks_stay_with_their_consonant() {
        // ภาษาไทย: ษ and ไ carry no mark; ท is followed by ย. สวัสดี: ว
        // carries the vowel mark ั, ด carries ี.
        assert_eq!(spaced("ภาษาไทย"), "ภ า ษ า ไ ท ย");
        assert_eq!(spaced("สวัสดีครับ"), "ส วั ส ดี ค รั บ");
        assert_eq!(spaced("ก่อน"), "ก่ อ น");
    }
}
