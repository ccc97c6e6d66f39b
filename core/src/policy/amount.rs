//! Exact decimals from JSON numbers, read from their original digits.

use rust_decimal::Decimal;
use serde_json::Value;

/// Why an argument could not be read as an exact decimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("is not a number")]
    NotANumber,
    #[error("is out of the range that can be compared exactly")]
    OutOfRange,
}

/// Reads a JSON number exactly. The workspace enables serde_json's `arbitrary_precision`,
/// so the number's text is the one the caller sent: `500.0000001` stays above 500 instead
/// of being rounded through `f64`, and `1e400` is refused rather than becoming infinity.
pub fn decimal_from_json(value: &Value) -> Result<Decimal, AmountError> {
    match value {
        Value::Number(number) => parse_exact(&number.to_string()),
        _ => Err(AmountError::NotANumber),
    }
}

fn parse_exact(text: &str) -> Result<Decimal, AmountError> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let mut value = Decimal::from_str_exact(mantissa).map_err(|_| AmountError::OutOfRange)?;
    let Some(exponent) = exponent else {
        return Ok(value);
    };
    let exponent: i32 = exponent
        .strip_prefix('+')
        .unwrap_or(exponent)
        .parse()
        .map_err(|_| AmountError::OutOfRange)?;
    let max = Decimal::MAX_SCALE as i32;
    if !(-max..=max).contains(&exponent) {
        return Err(AmountError::OutOfRange);
    }
    if exponent >= 0 {
        let factor = Decimal::from_i128_with_scale(10_i128.pow(exponent as u32), 0);
        value = value.checked_mul(factor).ok_or(AmountError::OutOfRange)?;
    } else {
        let scale = value.scale() + exponent.unsigned_abs();
        value
            .set_scale(scale)
            .map_err(|_| AmountError::OutOfRange)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn parsed(json: &str) -> Result<Decimal, AmountError> {
        decimal_from_json(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn numbers_keep_the_digits_the_caller_sent() {
        let cases = [
            ("500", "500"),
            ("500.0000001", "500.0000001"),
            ("-20.5", "-20.5"),
            ("5e2", "500"),
            ("5E+2", "500"),
            ("25e-1", "2.5"),
            ("0.1", "0.1"),
        ];
        for (json, expected) in cases {
            assert_eq!(
                parsed(json),
                Ok(Decimal::from_str(expected).unwrap()),
                "{json}"
            );
        }
        assert!(parsed("500.0000001").unwrap() > Decimal::from(500));
    }

    #[test]
    fn numbers_beyond_exact_range_are_refused() {
        for json in [
            "1e400",
            "-1e400",
            "1e-400",
            "123456789012345678901234567890123",
            "0.00000000000000000000000000000001",
        ] {
            assert_eq!(parsed(json), Err(AmountError::OutOfRange), "{json}");
        }
    }

    #[test]
    fn values_that_are_not_numbers_are_refused() {
        for json in [
            r#""600""#,
            r#""NaN""#,
            "null",
            "true",
            "[500]",
            r#"{"amount":500}"#,
        ] {
            assert_eq!(parsed(json), Err(AmountError::NotANumber), "{json}");
        }
    }
}
