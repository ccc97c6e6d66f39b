//! Which audited calls a replay decides again: those of the last hours or days, or whole
//! chosen sessions.

use chrono::Duration;

use super::WhatIfError;

/// The longest window: a year of calls.
const MAX_DAYS: i64 = 366;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Window {
    /// The calls of the last `span` before now, as written (`7d`).
    Last { text: String, span: Duration },
    /// Every call of these sessions.
    Sessions(Vec<String>),
}

impl Window {
    /// `1h`, `24h`, `1d`, `7d`, `30d`: a whole number of hours or days, up to a year.
    pub fn last(text: &str) -> Result<Self, WhatIfError> {
        let bad = || WhatIfError::BadWindow(text.chars().take(32).collect());
        let unit = text.chars().next_back().ok_or_else(bad)?;
        let number = &text[..text.len() - unit.len_utf8()];
        let n: i64 = number
            .parse()
            .ok()
            .filter(|n| *n > 0 && number.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(bad)?;
        let span = match unit {
            'h' if n <= MAX_DAYS * 24 => Duration::hours(n),
            'd' if n <= MAX_DAYS => Duration::days(n),
            _ => return Err(bad()),
        };
        Ok(Self::Last {
            text: text.to_owned(),
            span,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_a_whole_number_of_hours_or_days_up_to_a_year() {
        assert_eq!(
            Window::last("7d").unwrap(),
            Window::Last {
                text: "7d".into(),
                span: Duration::days(7)
            }
        );
        assert!(
            matches!(Window::last("1h"), Ok(Window::Last { span, .. }) if span == Duration::hours(1))
        );
        assert!(Window::last("30d").is_ok());
        for bad in [
            "", "d", "7", "0d", "-1d", "+7d", "1.5d", "7w", "367d", "9000h", "७d", "7७",
        ] {
            assert!(
                matches!(Window::last(bad), Err(WhatIfError::BadWindow(_))),
                "{bad}"
            );
        }
    }
}
