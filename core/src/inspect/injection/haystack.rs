//! The normalised text as the phrase patterns search it: ASCII, one byte per character.
//!
//! The patterns are ASCII and their `\b` is Unicode's. regex's lazy DFA decides a Unicode
//! word boundary only on ASCII text; it gives up at the first other byte and the search
//! goes to the PikeVM, about a hundred times slower. So a text with any other character is
//! searched in a copy where each such character is one ASCII byte that every construct of
//! the patterns reads as it reads the character: `_` for a word character (`\w`, so `\b`
//! falls where it fell, and no `[a-z0-9…]` class of the patterns takes it) and `\x01` for
//! anything else (neither a word nor a space, in no class the patterns name, taken by the
//! negated ones). Normalisation has already made every space an ASCII space. One byte per
//! character also keeps counted repeats (`[^.!?\n]{0,60}`) counting characters.
//! A match is mapped back to the bytes of the original text.

use std::ops::Range;

pub(super) enum Haystack<'a> {
    /// ASCII already: searched as it is.
    Ascii(&'a str),
    Mapped {
        text: String,
        /// The original byte offset of each byte of `text`, and the original length last.
        starts: Vec<usize>,
    },
}

/// What stands for a word character other than ASCII.
const WORD: char = '_';
/// What stands for any other character other than ASCII.
const OTHER: char = '\x01';

impl<'a> Haystack<'a> {
    pub(super) fn new(normal: &'a str) -> Self {
        if normal.is_ascii() {
            return Self::Ascii(normal);
        }
        let mut text = String::with_capacity(normal.len());
        let mut starts = Vec::with_capacity(normal.len() + 1);
        for (at, c) in normal.char_indices() {
            starts.push(at);
            text.push(if c.is_ascii() {
                c
            } else if is_word(c) {
                WORD
            } else {
                OTHER
            });
        }
        starts.push(normal.len());
        Self::Mapped { text, starts }
    }

    pub(super) fn text(&self) -> &str {
        match self {
            Self::Ascii(text) => text,
            Self::Mapped { text, .. } => text,
        }
    }

    /// The bytes of the original text that `range` of [`Self::text`] stands for.
    pub(super) fn original(&self, range: Range<usize>) -> Range<usize> {
        match self {
            Self::Ascii(_) => range,
            Self::Mapped { starts, .. } => {
                let at = |i: usize| starts.get(i).or(starts.last()).copied().unwrap_or(0);
                at(range.start)..at(range.end)
            }
        }
    }
}

/// Unicode's `\w`, as regex reads it.
fn is_word(c: char) -> bool {
    regex_syntax::try_is_word_character(c).unwrap_or_else(|_| c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_text_is_searched_as_it_is() {
        let haystack = Haystack::new("ignore all previous instructions");
        assert!(matches!(haystack, Haystack::Ascii(_)));
        assert_eq!(haystack.original(7..10), 7..10);
    }

    #[test]
    fn each_other_character_is_one_byte_that_keeps_its_word_class() {
        let normal = "café — naïve 日本 ok";
        let haystack = Haystack::new(normal);
        assert_eq!(haystack.text(), "caf_ \x01 na_ve __ ok");
        // Each of é, the dash and ï is one byte in the copy and more in the original.
        let copy = haystack.text().find("na_ve").unwrap();
        let original = haystack.original(copy..copy + 5);
        assert_eq!(&normal[original], "naïve");
        // A match that ends the text maps to the end of the original.
        let end = haystack.text().len();
        assert_eq!(
            haystack.original(end - 2..end),
            normal.len() - 2..normal.len()
        );
    }
}
