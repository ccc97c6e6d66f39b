//! The fifteen tools of the demo company's customer-support upstream, with their schemas.
//!
//! The demo upstream (`skillgate demo-upstream`) serves exactly these definitions, and the
//! demo catalog groups them into roles. Schemas are closed (`additionalProperties: false`)
//! so a misspelled argument is rejected rather than silently ignored.

use serde_json::{Map, Value, json};

use crate::model::ToolSpec;

/// The tool definitions of the demo company, in a stable order.
pub fn tool_specs() -> Vec<ToolSpec> {
    vec![
        spec(
            "lookup_customer",
            "Look up a customer by id or email: name, email, plan, tenure and account status.",
            object(
                [
                    ("customer_id", customer_id()),
                    (
                        "email",
                        json!({"type": "string", "format": "email", "description": "The customer's email address."}),
                    ),
                ],
                &[],
            )
            .with("minProperties", json!(1)),
        ),
        spec(
            "get_order_history",
            "List a customer's orders with their amounts, dates and status.",
            object([("customer_id", customer_id())], &["customer_id"]),
        ),
        spec(
            "check_refund_eligibility",
            "Check whether an order can be refunded, and up to which amount.",
            object(
                [("customer_id", customer_id()), ("order_id", order_id())],
                &["customer_id", "order_id"],
            ),
        ),
        spec(
            "process_refund",
            "Refund an amount of an order to the customer's payment method.",
            object(
                [
                    ("customer_id", customer_id()),
                    ("order_id", order_id()),
                    (
                        "amount",
                        json!({"type": "number", "exclusiveMinimum": 0, "description": "The amount to refund, in USD."}),
                    ),
                    ("reason", text("Why the refund is given.")),
                ],
                &["customer_id", "order_id", "amount", "reason"],
            ),
        ),
        spec(
            "create_ticket",
            "Open a support ticket for a customer.",
            object(
                [
                    ("customer_id", customer_id()),
                    ("subject", text("A one-line summary of the issue.")),
                    ("description", text("What happened and what was done so far.")),
                    (
                        "priority",
                        json!({"type": "string", "enum": ["low", "normal", "high", "urgent"], "description": "How soon the ticket needs attention."}),
                    ),
                ],
                &["customer_id", "subject", "description", "priority"],
            ),
        ),
        spec(
            "offer_extension",
            "Extend a customer's subscription at no charge by one to three months.",
            object(
                [
                    ("customer_id", customer_id()),
                    (
                        "months",
                        json!({"type": "integer", "minimum": 1, "maximum": 3, "description": "How many months to add."}),
                    ),
                ],
                &["customer_id", "months"],
            ),
        ),
        spec(
            "apply_service_credit",
            "Apply a service credit to a customer's next invoice.",
            object(
                [
                    ("customer_id", customer_id()),
                    (
                        "amount",
                        json!({"type": "number", "exclusiveMinimum": 0, "description": "The credit, in USD."}),
                    ),
                ],
                &["customer_id", "amount"],
            ),
        ),
        spec(
            "escalate_to_billing",
            "Hand a customer's case to the billing team with a summary.",
            object(
                [
                    ("customer_id", customer_id()),
                    ("summary", text("What billing needs to know.")),
                ],
                &["customer_id", "summary"],
            ),
        ),
        spec(
            "get_response_policy",
            "Read the company's response policy on a topic (refunds, credits, security, ...).",
            object(
                [(
                    "topic",
                    text("The policy topic, e.g. refunds, service_credits, extensions, security, account_deletion."),
                )],
                &["topic"],
            ),
        ),
        spec(
            "view_billing_history",
            "List a customer's invoices, payments, refunds and credits.",
            object([("customer_id", customer_id())], &["customer_id"]),
        ),
        spec(
            "update_payment_method",
            "Replace a customer's payment method with a tokenized card.",
            object(
                [
                    ("customer_id", customer_id()),
                    (
                        "token",
                        json!({"type": "string", "minLength": 8, "description": "The payment processor's card token."}),
                    ),
                ],
                &["customer_id", "token"],
            ),
        )
        .sensitive(&["token"]),
        spec(
            "investigate_account_activity",
            "Review a customer's recent account activity for suspicious events.",
            object(
                [
                    ("customer_id", customer_id()),
                    (
                        "days",
                        json!({"type": "integer", "minimum": 1, "maximum": 365, "description": "How many days back to look."}),
                    ),
                ],
                &["customer_id", "days"],
            ),
        ),
        spec(
            "flag_account",
            "Flag a customer account for the security team.",
            object(
                [
                    ("customer_id", customer_id()),
                    ("reason", text("Why the account is flagged.")),
                    (
                        "severity",
                        json!({"type": "string", "enum": ["low", "medium", "high", "critical"], "description": "How serious the finding is."}),
                    ),
                ],
                &["customer_id", "reason", "severity"],
            ),
        ),
        spec(
            "reset_user_password",
            "Reset a user's password and send them a reset link.",
            object([("user_id", user_id())], &["user_id"]),
        ),
        spec(
            "delete_user_account",
            "Permanently delete a user's account. Irreversible; requires confirm = true.",
            object(
                [
                    ("user_id", user_id()),
                    (
                        "confirm",
                        json!({"type": "boolean", "description": "Must be true to delete."}),
                    ),
                ],
                &["user_id", "confirm"],
            ),
        ),
    ]
}

fn spec(name: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
        output_schema: None,
        annotations: None,
        sensitive_args: Vec::new(),
    }
}

trait SpecExt {
    fn sensitive(self, args: &[&str]) -> Self;
}

impl SpecExt for ToolSpec {
    fn sensitive(mut self, args: &[&str]) -> Self {
        self.sensitive_args = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }
}

trait SchemaExt {
    fn with(self, key: &str, value: Value) -> Self;
}

impl SchemaExt for Value {
    fn with(mut self, key: &str, value: Value) -> Self {
        if let Value::Object(map) = &mut self {
            map.insert(key.to_owned(), value);
        }
        self
    }
}

fn object<const N: usize>(properties: [(&str, Value); N], required: &[&str]) -> Value {
    let properties: Map<String, Value> = properties
        .into_iter()
        .map(|(name, schema)| (name.to_owned(), schema))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn customer_id() -> Value {
    json!({"type": "string", "pattern": "^C-[0-9]{4}$", "description": "The customer id, e.g. C-1001."})
}

fn order_id() -> Value {
    json!({"type": "string", "pattern": "^O-[0-9]{4}$", "description": "The order id, e.g. O-5001."})
}

fn user_id() -> Value {
    json!({"type": "string", "pattern": "^U-[0-9]{4}$", "description": "The login user id, e.g. U-2001."})
}

fn text(description: &str) -> Value {
    json!({"type": "string", "minLength": 1, "description": description})
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn the_demo_company_has_fifteen_uniquely_named_tools() {
        let specs = tool_specs();
        let names: HashSet<_> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(specs.len(), 15);
        assert_eq!(names.len(), 15);
    }

    #[test]
    fn every_schema_is_a_closed_object_schema_that_declares_its_required_properties() {
        for spec in tool_specs() {
            let schema = &spec.input_schema;
            assert_eq!(schema["type"], "object", "{}", spec.name);
            assert_eq!(schema["additionalProperties"], false, "{}", spec.name);
            let properties = schema["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("{} has no properties", spec.name));
            let required = schema["required"]
                .as_array()
                .unwrap_or_else(|| panic!("{} has no required list", spec.name));
            for name in required {
                let name = name.as_str().expect("required names are strings");
                assert!(
                    properties.contains_key(name),
                    "{} requires undeclared {name}",
                    spec.name
                );
            }
            assert!(!spec.description.is_empty(), "{}", spec.name);
        }
    }

    #[test]
    fn every_tool_but_lookup_names_its_required_properties() {
        for spec in tool_specs().iter().filter(|s| s.name != "lookup_customer") {
            let required = spec.input_schema["required"].as_array().unwrap();
            assert!(!required.is_empty(), "{}", spec.name);
        }
    }

    #[test]
    fn the_payment_token_is_the_only_sensitive_argument() {
        let sensitive: Vec<_> = tool_specs()
            .into_iter()
            .filter(|s| !s.sensitive_args.is_empty())
            .map(|s| (s.name, s.sensitive_args))
            .collect();
        assert_eq!(
            sensitive,
            vec![("update_payment_method".to_owned(), vec!["token".to_owned()])]
        );
    }

    #[test]
    fn refund_amounts_must_be_positive_numbers() {
        let refund = tool_specs()
            .into_iter()
            .find(|s| s.name == "process_refund")
            .unwrap();
        let amount = &refund.input_schema["properties"]["amount"];
        assert_eq!(amount["type"], "number");
        assert_eq!(amount["exclusiveMinimum"], 0);
    }
}
