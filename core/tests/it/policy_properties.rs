//! Properties: no sequence of calls lets usage pass a cap, and amounts parse exactly.

use crate::policy_common;

use policy_common::*;
use proptest::prelude::*;
use rust_decimal::Decimal;
use skillgate_core::policy::{Decision, decimal_from_json};

/// One step an agent might take: a refund of some amount (in hundredths, possibly
/// negative), whether its upstream call then succeeds, or a bare eligibility check.
#[derive(Debug, Clone)]
enum Step {
    Refund { cents: i64, succeeds: bool },
    Check,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (-20_000i64..80_000, any::<bool>()).prop_map(|(cents, succeeds)| Step::Refund { cents, succeeds }),
        1 => Just(Step::Check),
    ]
}

fn learn_orders() -> impl Strategy<Value = Vec<&'static str>> {
    prop_oneof![
        Just(vec!["small-refunds"]),
        Just(vec!["small-refunds", "big-refunds"]),
        Just(vec!["big-refunds", "small-refunds"]),
        Just(vec!["retention", "small-refunds", "big-refunds"]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_sequence_of_calls_lets_usage_exceed_a_cap(roles in learn_orders(), steps in prop::collection::vec(step(), 0..40)) {
        // Usage is the session's: every allowed refund counts, whichever role authorised it,
        // and small-refunds authorises only while the session's totals stay within its caps.
        let catalog = compiled();
        let mut session = session("front", &roles);
        let mut allowed_sum = Decimal::ZERO;
        let mut allowed_count = 0u32;
        for step in steps {
            match step {
                Step::Check => {
                    call_and_run(&catalog, &mut session, "check", "{}");
                }
                Step::Refund { cents, succeeds } => {
                    let amount = Decimal::new(cents, 2);
                    let mut decision = call(&catalog, &session, "refund", &format!(r#"{{"amount": {amount}}}"#));
                    if let Decision::Allow(permit) = &mut decision {
                        let role = permit.role().as_str();
                        prop_assert_ne!(role, "retention", "retention's guard never passes here");
                        let used = session.usage.sum("refund", "amount");
                        if role == "small-refunds" {
                            prop_assert!(session.usage.has_succeeded("check"));
                            prop_assert!(amount <= Decimal::from(500) && amount >= Decimal::ZERO, "{amount}");
                            prop_assert!(used + amount <= Decimal::from(1000), "{used} + {amount}");
                            prop_assert!(session.usage.count("refund") < 3);
                        } else if role == "big-refunds" {
                            prop_assert!(amount <= Decimal::from(5000));
                        }
                        // A negative amount counts as nothing: it never lowers the sum.
                        if amount > Decimal::ZERO {
                            allowed_sum += amount;
                        }
                        allowed_count += 1;
                        session.reserve(permit);
                        prop_assert!(session.usage.sum("refund", "amount") >= used);
                        if succeeds {
                            let note = permit.take_note();
                            session.record_success("refund", note.outcome(None));
                        }
                    }
                }
            }
            if roles == ["small-refunds"] {
                prop_assert!(session.usage.sum("refund", "amount") <= Decimal::from(1000));
                prop_assert!(session.usage.count("refund") <= 3);
            }
        }
        prop_assert_eq!(allowed_sum, session.usage.sum("refund", "amount"));
        prop_assert_eq!(allowed_count, session.usage.count("refund"));
    }

    #[test]
    fn a_decimal_written_in_json_parses_to_exactly_that_decimal(mantissa in any::<i64>(), scale in 0u32..=18) {
        let expected = Decimal::new(mantissa, scale);
        let json: serde_json::Value = serde_json::from_str(&expected.to_string()).unwrap();
        prop_assert_eq!(decimal_from_json(&json), Ok(expected));
    }

    #[test]
    fn an_amount_is_allowed_exactly_when_it_is_within_the_bound(cents in -1_000_000i64..1_000_000, extra_digits in 0u32..10) {
        let amount = Decimal::new(cents, 2) + Decimal::new(1, 2 + extra_digits);
        let catalog = compiled();
        let session = session("front", &["big-refunds"]);
        let allowed = call(&catalog, &session, "refund", &format!(r#"{{"amount": {amount}}}"#)).is_allowed();
        prop_assert_eq!(allowed, amount <= Decimal::from(5000), "{}", amount);
    }
}
