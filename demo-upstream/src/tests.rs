//! The demo upstream driven by a real rmcp client over an in-memory duplex pipe.

use std::path::Path;

use chrono::{Duration, Utc};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Map, Value, json};

use super::args::Args;
use super::fixtures::Company;
use super::{DemoUpstream, DemoUpstreamOptions, handlers};

type Client = RunningService<RoleClient, ()>;

async fn connect(options: DemoUpstreamOptions) -> Client {
    let upstream = DemoUpstream::new(options).expect("demo upstream starts");
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = upstream.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("MCP handshake")
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("tools/call answered")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

fn structured(result: &CallToolResult) -> &Value {
    result
        .structured_content
        .as_ref()
        .expect("structured content")
}

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

#[tokio::test]
async fn the_upstream_lists_exactly_the_fifteen_demo_tools() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let mut expected: Vec<_> = skillgate_core::demo::tools::tool_specs()
        .into_iter()
        .map(|s| s.name)
        .collect();
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(names.len(), 15);
    let refund = tools.iter().find(|t| t.name == "process_refund").unwrap();
    assert_eq!(refund.input_schema["additionalProperties"], false);
}

#[tokio::test]
async fn looking_up_an_unknown_customer_reports_customer_not_found() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let result = call(&client, "lookup_customer", json!({"customer_id": "C-9999"})).await;
    assert!(is_error(&result));
    assert_eq!(
        text(&result),
        "CUSTOMER_NOT_FOUND: no customer with id C-9999"
    );
    assert_eq!(structured(&result)["error"]["code"], "CUSTOMER_NOT_FOUND");
}

#[tokio::test]
async fn a_customer_can_be_found_by_email_with_text_and_structured_content() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let result = call(
        &client,
        "lookup_customer",
        json!({"email": "Maria.Alvarez@example.com"}),
    )
    .await;
    assert!(!is_error(&result));
    let customer = structured(&result);
    assert_eq!(customer["customer_id"], "C-1001");
    assert_eq!(customer["plan"], "pro");
    let from_text: Value = serde_json::from_str(&text(&result)).expect("text is JSON");
    assert_eq!(&from_text, customer);
}

#[tokio::test]
async fn an_eligible_order_is_refunded_and_cannot_be_refunded_twice() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let order = json!({"customer_id": "C-1001", "order_id": "O-5001"});
    let check = call(&client, "check_refund_eligibility", order.clone()).await;
    assert!(!is_error(&check));
    assert_eq!(structured(&check)["eligible"], true);
    assert_eq!(
        structured(&check)["refundable_amount"].to_string(),
        "129.00"
    );

    let refund = json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": 129.00, "reason": "Add-on never activated"});
    let result = call(&client, "process_refund", refund.clone()).await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(structured(&result)["status"], "processed");
    assert!(
        structured(&result)["refund_id"]
            .as_str()
            .unwrap()
            .starts_with("R-")
    );

    let again = call(&client, "process_refund", refund).await;
    assert!(is_error(&again));
    assert!(
        text(&again).starts_with("NOT_ELIGIBLE: "),
        "{}",
        text(&again)
    );
    let recheck = call(&client, "check_refund_eligibility", order).await;
    assert_eq!(structured(&recheck)["eligible"], false);
}

#[tokio::test]
async fn refunds_outside_the_window_or_for_another_customers_order_are_refused() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let late = call(
        &client,
        "process_refund",
        json!({"customer_id": "C-1001", "order_id": "O-5002", "amount": 10, "reason": "late"}),
    )
    .await;
    assert!(text(&late).starts_with("NOT_ELIGIBLE: "), "{}", text(&late));

    let foreign = call(
        &client,
        "process_refund",
        json!({"customer_id": "C-1002", "order_id": "O-5001", "amount": 10, "reason": "not theirs"}),
    )
    .await;
    assert!(text(&foreign).starts_with("ORDER_NOT_FOUND: "));

    let too_much = call(
        &client,
        "process_refund",
        json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": 129.01, "reason": "more than paid"}),
    )
    .await;
    assert!(text(&too_much).starts_with("NOT_ELIGIBLE: "));
}

#[tokio::test]
async fn a_second_service_credit_within_ninety_days_is_declined() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let recent = call(
        &client,
        "apply_service_credit",
        json!({"customer_id": "C-1004", "amount": 20}),
    )
    .await;
    assert!(is_error(&recent));
    assert!(text(&recent).starts_with("SERVICE_CREDIT_DECLINED: "));

    let first = call(
        &client,
        "apply_service_credit",
        json!({"customer_id": "C-1001", "amount": 40}),
    )
    .await;
    assert!(!is_error(&first), "{}", text(&first));
    let second = call(
        &client,
        "apply_service_credit",
        json!({"customer_id": "C-1001", "amount": 10}),
    )
    .await;
    assert!(text(&second).starts_with("SERVICE_CREDIT_DECLINED: "));
}

#[tokio::test]
async fn a_service_credit_above_one_hundred_is_declined() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let result = call(
        &client,
        "apply_service_credit",
        json!({"customer_id": "C-1002", "amount": 100.01}),
    )
    .await;
    assert!(text(&result).starts_with("SERVICE_CREDIT_DECLINED: "));
    let at_limit = call(
        &client,
        "apply_service_credit",
        json!({"customer_id": "C-1002", "amount": 100}),
    )
    .await;
    assert!(!is_error(&at_limit), "{}", text(&at_limit));
}

#[tokio::test]
async fn missing_unknown_or_wrong_typed_arguments_are_invalid_arguments() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let cases = [
        (
            "process_refund",
            json!({"customer_id": "C-1001", "order_id": "O-5001", "reason": "x"}),
        ),
        (
            "process_refund",
            json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": "50", "reason": "x"}),
        ),
        (
            "process_refund",
            json!({"customer_id": "C-1001", "order_id": "O-5001", "amount": -5, "reason": "x"}),
        ),
        (
            "offer_extension",
            json!({"customer_id": "C-1001", "months": 4}),
        ),
        (
            "create_ticket",
            json!({"customer_id": "C-1001", "subject": "s", "description": "d", "priority": "asap"}),
        ),
        ("lookup_customer", json!({})),
        (
            "lookup_customer",
            json!({"customer_id": "C-1001", "nickname": "M"}),
        ),
    ];
    for (tool, arguments) in cases {
        let result = call(&client, tool, arguments.clone()).await;
        assert!(is_error(&result));
        assert!(
            text(&result).starts_with("INVALID_ARGUMENTS: "),
            "{tool} {arguments}: {}",
            text(&result)
        );
    }
}

#[tokio::test]
async fn the_executions_log_has_one_line_per_executed_call_and_none_for_an_unknown_tool() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("executions.jsonl");
    let client = connect(DemoUpstreamOptions {
        executions_log: Some(log.clone()),
        ..Default::default()
    })
    .await;

    let unknown = call(&client, "drop_database", json!({})).await;
    assert!(text(&unknown).starts_with("UNKNOWN_TOOL: "));
    assert!(log_lines(&log).is_empty());

    call(&client, "lookup_customer", json!({"customer_id": "C-1003"})).await;
    call(&client, "lookup_customer", json!({"customer_id": "C-9999"})).await;
    call(&client, "get_response_policy", json!({"topic": "refunds"})).await;

    let lines = log_lines(&log);
    let summary: Vec<_> = lines
        .iter()
        .map(|l| (l["tool"].as_str().unwrap(), l["ok"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [
            ("lookup_customer", true),
            ("lookup_customer", false),
            ("get_response_policy", true)
        ]
    );
    assert_eq!(lines[0]["arguments"], json!({"customer_id": "C-1003"}));
    let at = lines[0]["at"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{at}");
}

#[tokio::test]
async fn a_payment_token_is_neither_echoed_nor_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("executions.jsonl");
    let client = connect(DemoUpstreamOptions {
        executions_log: Some(log.clone()),
        ..Default::default()
    })
    .await;
    let token = "tok_live_SECRETVALUE9876";
    let result = call(
        &client,
        "update_payment_method",
        json!({"customer_id": "C-1001", "token": token}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(structured(&result)["token"], "tok_****9876");
    assert!(!text(&result).contains("SECRETVALUE"));

    let rejected = call(
        &client,
        "update_payment_method",
        json!({"customer_id": "C-1001", "token": "4111111111111111"}),
    )
    .await;
    assert!(text(&rejected).starts_with("INVALID_ARGUMENTS: "));
    assert!(!text(&rejected).contains("4111"));

    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains("SECRETVALUE") && !logged.contains("4111"));
    assert_eq!(log_lines(&log)[0]["arguments"]["token"], "[redacted]");
}

#[tokio::test]
async fn a_deleted_user_can_no_longer_be_reset_or_deleted() {
    let client = connect(DemoUpstreamOptions::default()).await;
    let unconfirmed = call(
        &client,
        "delete_user_account",
        json!({"user_id": "U-2007", "confirm": false}),
    )
    .await;
    assert!(text(&unconfirmed).starts_with("CONFIRMATION_REQUIRED: "));
    let deleted = call(
        &client,
        "delete_user_account",
        json!({"user_id": "U-2007", "confirm": true}),
    )
    .await;
    assert!(!is_error(&deleted), "{}", text(&deleted));
    let reset = call(&client, "reset_user_password", json!({"user_id": "U-2007"})).await;
    assert_eq!(text(&reset), "USER_NOT_FOUND: no user with id U-2007");
}

#[test]
fn an_order_leaves_the_refund_window_after_thirty_days() {
    let start = Utc::now();
    let spec = skillgate_core::demo::tools::tool_specs()
        .into_iter()
        .find(|s| s.name == "check_refund_eligibility")
        .unwrap();
    let mut arguments = Map::new();
    arguments.insert("customer_id".into(), json!("C-1001"));
    arguments.insert("order_id".into(), json!("O-5001"));
    let args = Args::check(&spec, &arguments).unwrap();
    let mut company = Company::seeded(start);

    let on_day_30 = handlers::call(&mut company, &spec.name, &args, start + Duration::days(18));
    assert_eq!(on_day_30.unwrap()["eligible"], true);
    let on_day_31 = handlers::call(&mut company, &spec.name, &args, start + Duration::days(19));
    assert_eq!(on_day_31.unwrap()["eligible"], false);
}

#[test]
fn suspicious_activity_on_the_compromised_account_is_high_risk() {
    let now = Utc::now();
    let spec = skillgate_core::demo::tools::tool_specs()
        .into_iter()
        .find(|s| s.name == "investigate_account_activity")
        .unwrap();
    let mut company = Company::seeded(now);
    let mut arguments = Map::new();
    arguments.insert("customer_id".into(), json!("C-1006"));
    arguments.insert("days".into(), json!(7));
    let args = Args::check(&spec, &arguments).unwrap();
    let report = handlers::call(&mut company, &spec.name, &args, now).unwrap();
    assert_eq!(report["risk_level"], "high");
    assert_eq!(report["findings"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn the_bench_payload_answers_exactly_the_bytes_asked_for_and_only_when_enabled() {
    let plain = connect(DemoUpstreamOptions::default()).await;
    let refused = call(&plain, "bench_payload", json!({"bytes": 10})).await;
    assert!(is_error(&refused));
    assert!(
        text(&refused).starts_with("UNKNOWN_TOOL"),
        "{}",
        text(&refused)
    );

    let bench = connect(DemoUpstreamOptions {
        bench_tools: true,
        ..Default::default()
    })
    .await;
    assert_eq!(bench.list_all_tools().await.expect("tools/list").len(), 16);
    for bytes in [1, 1024, 65_536] {
        let result = call(
            &bench,
            "bench_payload",
            json!({"bytes": bytes, "amount": 0.01}),
        )
        .await;
        assert!(!is_error(&result));
        let answered = text(&result);
        assert_eq!(answered.len(), bytes);
        assert!(result.structured_content.is_none());
        if bytes > 1024 {
            // Every line differs: nothing downstream may fold the answer into a pattern.
            let lines: Vec<&str> = answered.lines().collect();
            let distinct: std::collections::HashSet<&&str> = lines.iter().collect();
            assert_eq!(distinct.len(), lines.len());
        }
    }
    for bad in [json!({"bytes": 0}), json!({"bytes": 10, "amount": -1})] {
        let result = call(&bench, "bench_payload", bad).await;
        assert!(
            text(&result).starts_with("INVALID_ARGUMENTS"),
            "{}",
            text(&result)
        );
    }
}
