//! Text normalisation for the phrase detectors: what a model would read, in one spelling.
//!
//! NFKC folds full-width and styled letters, invisible format characters are dropped,
//! look-alike letters from other scripts become the Latin letter they imitate (Unicode's
//! confusable skeleton), case is folded and whitespace collapsed. ASCII text, the common
//! case, takes a fast path that only folds case and whitespace.
//!
//! [`wrapped`] finds the text hidden in base64 runs, for the detectors that look inside.

use std::ops::Range;

use base64::Engine;
use unicode_normalization::UnicodeNormalization;

/// Base64 runs shorter than this are ids and hashes, not wrapped text.
pub const MIN_WRAPPED: usize = 24;
/// Wrapped text is unwrapped at most this deep (base64 of base64 of …).
pub const MAX_UNWRAP_DEPTH: u8 = 2;
/// A run longer than this is not decoded (an attachment, not a wrapped phrase or key).
const MAX_WRAPPED: usize = 64 * 1024;

/// Invisible characters a model still reads but a reviewer does not see: zero-width and
/// bidirectional controls, the BOM, soft hyphen, variation selectors and tag characters.
pub fn is_hidden(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{E0000}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}')
}

/// Whether the hidden character at `chars[i]` is one a script or an emoji needs where it
/// stands, so a reviewer would not call it hidden: a zero-width joiner or non-joiner
/// between letters of a script that joins (Arabic, Persian, the Indic scripts) or a joiner
/// between emoji, a variation selector after an emoji, a symbol or a keycap digit, the tag
/// letters of a subdivision flag (at most six after a black flag, then a cancel tag), and
/// a left-to-right or right-to-left mark in text that has right-to-left letters.
pub fn is_needed_here(chars: &[char], i: usize) -> bool {
    let previous = i.checked_sub(1).map(|p| chars[p]);
    let next = chars.get(i + 1).copied();
    match chars[i] {
        '\u{200C}' | '\u{200D}' => {
            let joins = |c: Option<char>| c.is_some_and(is_joining_script);
            let emoji = |c: Option<char>| c.is_some_and(|c| is_emoji(c) || c == '\u{FE0F}');
            joins(previous) && joins(next)
                || chars[i] == '\u{200D}' && emoji(previous) && next.is_some_and(is_emoji)
        }
        '\u{FE0E}' | '\u{FE0F}' => {
            previous.is_some_and(|c| is_emoji(c) || matches!(c, '0'..='9' | '#' | '*'))
        }
        '\u{E0020}'..='\u{E007F}' => {
            let mut start = i;
            while start > 0 && ('\u{E0020}'..='\u{E007E}').contains(&chars[start - 1]) {
                start -= 1;
            }
            let mut end = i;
            while end < chars.len() && ('\u{E0020}'..='\u{E007E}').contains(&chars[end]) {
                end += 1;
            }
            start > 0
                && chars[start - 1] == '\u{1F3F4}'
                && end - start <= 6
                && chars.get(end) == Some(&'\u{E007F}')
        }
        '\u{200E}' | '\u{200F}' => chars.iter().any(|c| is_right_to_left(*c)),
        _ => false,
    }
}

/// Letters of scripts whose shaping uses zero-width joiners: Arabic (with Persian and Urdu
/// letters), Syriac, and the Brahmic scripts from Devanagari to Khmer.
fn is_joining_script(c: char) -> bool {
    matches!(c,
        '\u{0600}'..='\u{06FF}' | '\u{0700}'..='\u{077F}' | '\u{08A0}'..='\u{08FF}'
        | '\u{0900}'..='\u{0DFF}' | '\u{1000}'..='\u{109F}' | '\u{1780}'..='\u{17FF}'
        | '\u{FB50}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}')
}

/// Emoji and pictographic symbols (the blocks emoji sequences are built from).
fn is_emoji(c: char) -> bool {
    matches!(c,
        '\u{2600}'..='\u{27BF}' | '\u{2B00}'..='\u{2BFF}' | '\u{1F000}'..='\u{1FAFF}'
        | '\u{2190}'..='\u{21FF}' | '\u{2300}'..='\u{23FF}')
}

/// Letters of right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, N'Ko).
fn is_right_to_left(c: char) -> bool {
    matches!(c, '\u{0590}'..='\u{07FF}' | '\u{08A0}'..='\u{08FF}' | '\u{FB1D}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}')
}

/// The bidirectional controls among the hidden characters (they reorder what is shown).
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` as the detectors read it: see the module doc.
pub fn normalize(text: &str) -> String {
    if text.is_ascii() {
        return normalize_ascii(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    let mut push = |c: char, out: &mut String| {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
                space = true;
            }
        } else {
            out.push(c);
            space = false;
        }
    };
    for c in text.nfkc() {
        if is_hidden(c) {
            continue;
        }
        if c.is_ascii() {
            push(c.to_ascii_lowercase(), &mut out);
            continue;
        }
        for lower in c.to_lowercase() {
            match latin_look_alike(lower) {
                Some(latin) => latin
                    .chars()
                    .for_each(|l| push(l.to_ascii_lowercase(), &mut out)),
                None => push(lower, &mut out),
            }
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// The ASCII path, on bytes: a whole-slice lowercase (vectorised), then whitespace runs
/// collapsed in place. Every result a gateway inspects goes through here, so a byte costs
/// a compare and a store, not a `char` pushed into a `String` (it was 9 % of the gateway's
/// CPU on 64 KB results).
fn normalize_ascii(text: &str) -> String {
    let mut bytes = text.as_bytes().to_ascii_lowercase();
    let mut len = 0;
    let mut space = true;
    for read in 0..bytes.len() {
        let b = bytes[read];
        // `char::is_whitespace` over ASCII: tab, line feed, vertical tab, form feed,
        // carriage return and space (`u8::is_ascii_whitespace` leaves out the vertical tab).
        if matches!(b, b'\t'..=b'\r' | b' ') {
            if space {
                continue;
            }
            space = true;
            bytes[len] = b' ';
        } else {
            space = false;
            bytes[len] = b;
        }
        len += 1;
    }
    if space && len > 0 {
        len -= 1;
    }
    bytes.truncate(len);
    // ASCII in, ASCII out: the conversion cannot fail, and a lossy one would keep the text.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `text` folded for the other-language patterns: NFKC, hidden characters dropped,
/// lowercase, whitespace collapsed; letters keep their script.
pub fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.nfkc().filter(|c| !is_hidden(*c)) {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
                space = true;
            }
        } else {
            out.extend(c.to_lowercase());
            space = false;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// The ASCII a non-ASCII letter is confusable with (Cyrillic `а` → `a`, Greek `ο` → `o`),
/// when its skeleton is ASCII.
fn latin_look_alike(c: char) -> Option<String> {
    let mut buf = [0u8; 4];
    let skeleton: String =
        unicode_security::confusable_detection::skeleton(c.encode_utf8(&mut buf)).collect();
    (skeleton.is_ascii() && !skeleton.is_empty()).then_some(skeleton)
}

/// The base64 runs of `text` that decode (standard or URL-safe alphabet, padded or not) to
/// readable UTF-8, with their byte span in `text` and the text they wrap. Binary payloads
/// (images, archives) and random tokens decode to unreadable bytes and are skipped.
pub fn wrapped(text: &str) -> impl Iterator<Item = (Range<usize>, String)> + '_ {
    Base64Runs { text, at: 0 }
        .filter_map(|run| decode_text(&text[run.clone()]).map(|decoded| (run, decoded)))
}

/// Whether a byte belongs to the standard or URL-safe base64 alphabet (padding aside).
const fn is_base64(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'_' | b'-')
}

static BASE64: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = is_base64(byte as u8);
        byte += 1;
    }
    table
};

/// The matches of `[A-Za-z0-9+/_-]{24,}={0,2}` in `text`, leftmost first, as regex finds
/// them, reading about one byte in [`MIN_WRAPPED`] where runs are short: a run at least
/// that long that starts within the next [`MIN_WRAPPED`] bytes from `at` covers byte
/// `at + MIN_WRAPPED - 1`, so where that byte is outside the alphabet the search moves on
/// past it. Both detectors look for wrapped text in every string of every result, and
/// regex's DFA took about 1.6 ns a byte for it (BENCHMARKS.md, issue #35).
struct Base64Runs<'t> {
    text: &'t str,
    at: usize,
}

impl Iterator for Base64Runs<'_> {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        let bytes = self.text.as_bytes();
        let in_alphabet = |i: usize| BASE64[usize::from(bytes[i])];
        while self.at + MIN_WRAPPED <= bytes.len() {
            let probe = self.at + MIN_WRAPPED - 1;
            if !in_alphabet(probe) {
                self.at = probe + 1;
                continue;
            }
            // The run around the probe, not reaching back before `at`.
            let mut start = probe;
            while start > self.at && in_alphabet(start - 1) {
                start -= 1;
            }
            let mut end = probe + 1;
            while end < bytes.len() && in_alphabet(end) {
                end += 1;
            }
            if end - start < MIN_WRAPPED {
                // No run that starts before `end` is long enough, and `end` is no start.
                self.at = end + 1;
                continue;
            }
            let run_end = end;
            while end < bytes.len() && end - run_end < 2 && bytes[end] == b'=' {
                end += 1;
            }
            self.at = end;
            return Some(start..end);
        }
        self.at = bytes.len();
        None
    }
}

/// The text a base64 run wraps, when it decodes to readable UTF-8.
fn decode_text(run: &str) -> Option<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    if run.len() > MAX_WRAPPED {
        return None;
    }
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(run).ok())?;
    let text = String::from_utf8(bytes).ok()?;
    let readable = text
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .count();
    (readable * 10 >= text.chars().count() * 9).then_some(text)
}

/// The keys two tool names are compared by: equal keys read as the same name to a model
/// (case, look-alike letters, hidden characters and word separators aside: `send-email`,
/// `SendEmail` and `send_email` name one tool to a model).
pub fn name_keys(name: &str) -> [String; 2] {
    let visible: String = name
        .nfkc()
        .filter(|c| !is_hidden(*c) && !matches!(c, '_' | '-' | '.' | ' '))
        .collect();
    let skeleton =
        |s: &str| -> String { unicode_security::confusable_detection::skeleton(s).collect() };
    [
        skeleton(&visible.to_lowercase()).to_lowercase(),
        skeleton(&visible).to_lowercase(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn look_alike_letters_full_width_forms_and_hidden_characters_normalise_to_plain_latin() {
        assert_eq!(
            normalize("Ign\u{043E}re  ALL\tprevious"),
            "ignore all previous"
        );
        assert_eq!(normalize("ｉｇｎｏｒｅ"), "ignore");
        assert_eq!(normalize("ig\u{200B}no\u{2062}re\u{FEFF}"), "ignore");
        assert_eq!(normalize("\u{0399}GNORE \u{03BF}k"), "ignore ok");
    }

    #[test]
    fn ascii_text_folds_exactly_as_the_general_path_folds_it() {
        // The general path, as it folds ASCII: every char through `char::is_whitespace`.
        fn by_chars(text: &str) -> String {
            let mut out = String::new();
            for c in text.chars() {
                if c.is_whitespace() {
                    if !out.is_empty() && !out.ends_with(' ') {
                        out.push(' ');
                    }
                } else {
                    out.push(c.to_ascii_lowercase());
                }
            }
            if out.ends_with(' ') {
                out.pop();
            }
            out
        }
        let texts = [
            "",
            " ",
            "\t\n\x0b\x0c\r ",
            "Ignore  ALL\tprevious\r\nInstructions",
            "  leading and trailing  ",
            "a\x0bb\x0cc\x1fd\x00e",
            "O-100000  2026-01-01  shipped    1 items  10.00 USD\n",
            "x",
            " x ",
        ];
        for text in texts {
            assert_eq!(normalize_ascii(text), by_chars(text), "{text:?}");
            assert_eq!(normalize(text), by_chars(text), "{text:?}");
        }
        let every_byte: String = (0u8..128).map(char::from).collect();
        assert_eq!(normalize_ascii(&every_byte), by_chars(&every_byte));
    }

    #[test]
    fn names_differing_in_case_or_look_alike_letters_share_a_key() {
        let call = name_keys("call_tool");
        let twins = [
            "CALL_TOOL",
            "caII_tool",
            "c\u{0430}ll_tool",
            "call\u{200B}_tool",
        ];
        for twin in twins {
            let keys = name_keys(twin);
            assert!(keys.iter().any(|k| call.contains(k)), "{twin}: {keys:?}");
        }
        let other = name_keys("call_tools");
        assert!(!other.iter().any(|k| call.contains(k)));
        for spelling in ["call-tool", "CallTool", "call.tool"] {
            let keys = name_keys(spelling);
            assert!(
                keys.iter().any(|k| call.contains(k)),
                "{spelling}: {keys:?}"
            );
        }
    }

    #[test]
    fn a_run_right_after_a_short_one_is_found_from_its_first_byte() {
        // The probe lands in the short run `abcd`; the long run starts one byte after it.
        let text = format!("{}abcd {}", "=".repeat(20), "A".repeat(30));
        let found: Vec<Range<usize>> = Base64Runs { text: &text, at: 0 }.collect();
        assert_eq!(found, vec![25..55]);
    }

    proptest::proptest! {
        #[test]
        fn base64_runs_are_exactly_what_the_regex_finds(
            // Pieces of a text: runs of the alphabet around the minimum length, padding,
            // and the bytes that end a run (a space, a dot, a letter beyond ASCII).
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    "[A-Za-z0-9+/_-]{0,30}",
                    "={1,3}",
                    "[ .:é\n]{1,2}",
                ],
                0..12,
            )
        ) {
            let text: String = pieces.concat();
            let regex = regex::Regex::new(r"[A-Za-z0-9+/_-]{24,}={0,2}").unwrap();
            let expected: Vec<Range<usize>> = regex.find_iter(&text).map(|m| m.range()).collect();
            let found: Vec<Range<usize>> = Base64Runs { text: &text, at: 0 }.collect();
            proptest::prop_assert_eq!(found, expected, "{:?}", text);
        }
    }
}
