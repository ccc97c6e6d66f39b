//! The company's written response policies, which `get_response_policy` reads out.

use serde_json::{Value, json};

use super::error::ToolError;

const POLICIES: &[(&str, &str)] = &[
    (
        "refunds",
        "Orders can be refunded within 30 days of purchase, up to the amount not yet refunded. \
         Check eligibility before processing. Accounts that are past due must settle the open \
         invoice first. Refunds above 500.00 need a billing escalation instead.",
    ),
    (
        "service_credits",
        "A service credit compensates for downtime or a service failure. At most 100.00 per \
         credit and one credit per customer every 90 days; anything more goes to billing.",
    ),
    (
        "extensions",
        "Offer a free extension of one to three months to keep a customer who is about to \
         cancel. One extension per customer every 365 days.",
    ),
    (
        "escalation",
        "Escalate to billing when a customer disputes a charge, asks for more than the refund \
         or credit limits allow, or an account is past due. Summarise what was already tried.",
    ),
    (
        "security",
        "Investigate account activity before acting on a report of unauthorised access. Flag \
         the account with a severity that matches the findings; high and critical flags page \
         the security team. Never change a payment method on an account under investigation.",
    ),
    (
        "account_deletion",
        "Delete an account only at the verified request of its owner and with explicit \
         confirmation. Deletion is irreversible; personal data is purged within 30 days.",
    ),
    (
        "payment_methods",
        "Accept payment methods only as processor tokens. Never ask for, repeat or store a card \
         number; refer to a card by its last four digits.",
    ),
    (
        "tone",
        "Acknowledge the problem, state what you will do and by when, and confirm what was done. \
         Do not promise what a policy does not allow.",
    ),
];

pub fn lookup(topic: &str) -> Result<Value, ToolError> {
    let normalized = topic.trim().to_ascii_lowercase().replace([' ', '-'], "_");
    let key = match normalized.as_str() {
        "refund" => "refunds",
        "credit" | "credits" | "service_credit" => "service_credits",
        "extension" => "extensions",
        "escalations" | "billing" => "escalation",
        "deletion" | "delete_account" => "account_deletion",
        "payment" | "payment_method" => "payment_methods",
        other => other,
    };
    POLICIES
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(name, text)| json!({ "topic": name, "policy": text }))
        .ok_or_else(|| ToolError::PolicyNotFound {
            topic: topic.to_owned(),
            available: POLICIES
                .iter()
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}
