//! Holds decided outside the console, through the real binary: `skillgate holds …` on the
//! server's database and `/api/v1/holds` with a console user's API token. Both apply the
//! console's rules (a reason, never your own agent's call, one decision per hold) and
//! audit the decider and the channel.

use crate::common;
use crate::holds::{assert_ran, held, resume, tier_one};

use common::Server;
use reqwest::StatusCode;
use serde_json::{Value, json};
use skillgate_core::admin::AdminService;
use skillgate_core::slug::Slug;
use skillgate_core::store::Store;
use skillgate_core::users::{ConsoleRole, ConsoleUser, Users};

/// The authoring door on the server's database, as the console's server functions use it.
async fn door(server: &Server) -> AdminService {
    let store = Store::open(&server.database_url()).await.unwrap();
    AdminService::open(store).await.unwrap()
}

async fn person(door: &AdminService, name: &str) -> ConsoleUser {
    Users::new(door.store().clone())
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.name == name)
        .unwrap()
}

/// Adds console user `name` with `role` and issues them an API token; returns the token.
async fn user_with_token(door: &AdminService, name: &str, role: ConsoleRole) -> String {
    let admin = person(door, "admin").await;
    door.add_user("admin", name, role, None).await.unwrap();
    let (_, token) = door
        .create_api_token(&admin, name, "runbook", None)
        .await
        .unwrap();
    token.expose().to_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &std::process::Output) -> String {
    assert!(output.status.success(), "{}", stderr(output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn decisions(server: &Server, hold: &str) -> Vec<Value> {
    server
        .audit_events()
        .into_iter()
        .filter(|e| {
            matches!(e["kind"].as_str(), Some("hold_approved" | "hold_denied"))
                && e["payload"]["hold_id"] == hold
        })
        .collect()
}

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    fn new(server: &Server) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: format!("{}/api/v1/holds", server.base),
        }
    }

    async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }

    async fn decide(
        &self,
        hold: &str,
        verb: &str,
        token: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        let response = self
            .http
            .post(format!("{}/{hold}/{verb}", self.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }
}

#[tokio::test]
async fn a_hold_is_listed_shown_and_approved_from_the_command_line_and_then_runs() {
    let server = Server::start();
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;

    let listed: Value =
        serde_json::from_str(&stdout(&server.cli(&["holds", "list", "--format", "json"]))).unwrap();
    let row = &listed["holds"][0];
    assert_eq!(row["id"], hold.as_str(), "{listed}");
    assert_eq!(row["state"], "pending");
    assert_eq!(row["tool"], "process_refund");
    assert_eq!(row["arguments"]["amount"], 300);
    assert!(listed["next"].is_null());
    let shown = stdout(&server.cli(&["holds", "show", &hold]));
    assert!(
        shown.contains("process_refund") && shown.contains(&session),
        "{shown}"
    );

    let blank = server.cli(&["holds", "approve", &hold, "--reason", "  "]);
    assert!(!blank.status.success());
    assert!(
        stderr(&blank).contains("give a reason"),
        "{}",
        stderr(&blank)
    );
    let approved =
        stdout(&server.cli(&["holds", "approve", &hold, "--reason", "Confirmed by phone"]));
    assert!(approved.contains("approved"), "{approved}");
    let again = server.cli(&["holds", "deny", &hold, "--reason", "changed my mind"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("can no longer be decided: it is approved"),
        "{}",
        stderr(&again)
    );

    let decided = decisions(&server, &hold);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["kind"], "hold_approved");
    assert_eq!(decided[0]["payload"]["channel"], "cli");
    // The local account (`cli:$USER`, or `cli` where no user is named).
    assert!(
        decided[0]["actor"].as_str().unwrap().starts_with("cli"),
        "{}",
        decided[0]
    );
    assert_ran(&resume(&client, &session, &hold, json!({})).await);
    assert_eq!(server.executed("process_refund").len(), 1);
}

#[tokio::test]
async fn a_hold_is_denied_through_the_api_and_a_second_decision_gets_409() {
    let server = Server::start();
    let door = door(&server).await;
    let rita = user_with_token(&door, "rita", ConsoleRole::Reviewer).await;
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let api = Api::new(&server);

    let (status, page) = api.get("?state=pending", &rita).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["holds"][0]["id"], hold.as_str(), "{page}");
    let (status, one) = api.get(&format!("/{hold}"), &rita).await;
    assert_eq!(
        (status, &one["rule"]),
        (StatusCode::OK, &page["holds"][0]["rule"])
    );

    let (status, denied) = api
        .decide(
            &hold,
            "deny",
            &rita,
            json!({"reason": "Not covered by the policy"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{denied}");
    assert_eq!(denied["state"], "denied");
    assert_eq!(denied["decided_by"], "rita");
    let (status, second) = api
        .decide(
            &hold,
            "approve",
            &rita,
            json!({"reason": "on second thought"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{second}");
    assert_eq!(second["error"], "conflict");

    let decided = decisions(&server, &hold);
    assert_eq!(
        decided.len(),
        1,
        "the second decision changed nothing: {decided:?}"
    );
    assert_eq!(decided[0]["kind"], "hold_denied");
    assert_eq!(decided[0]["actor"], "rita");
    assert_eq!(decided[0]["payload"]["channel"], "api");
    let resumed = resume(&client, &session, &hold, json!({})).await;
    assert!(resumed.is_error, "{}", resumed.text);
    assert!(server.executed("process_refund").is_empty());
}

#[tokio::test]
async fn the_api_refuses_bad_requests_with_a_clear_status_and_changes_nothing() {
    let server = Server::start();
    let door = door(&server).await;
    let rita = user_with_token(&door, "rita", ConsoleRole::Reviewer).await;
    let vic = user_with_token(&door, "vic", ConsoleRole::Viewer).await;
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let api = Api::new(&server);

    let anonymous = api.http.get(&api.base).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert!(anonymous.headers().contains_key("www-authenticate"));
    let (status, _) = api.get("", "sgp_not-a-token").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // An agent key is not a person's token.
    let (status, _) = api.get("", &server.support_key).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A viewer reads, and may not decide.
    let (status, _) = api.get("", &vic).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = api
        .decide(&hold, "approve", &vic, json!({"reason": "ok"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("reviewer"),
        "{body}"
    );
    let refused = server
        .audit_events()
        .into_iter()
        .find(|e| e["kind"] == "admin_refused" && e["actor"] == "vic")
        .expect("the viewer's attempt is on the record");
    assert_eq!(refused["payload"]["code"], "FORBIDDEN");
    assert_eq!(refused["payload"]["channel"], "api");

    let (status, body) = api
        .decide("hold_nope", "approve", &rita, json!({"reason": "ok"}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let (status, body) = api
        .decide(&hold, "approve", &rita, json!({"reason": "   "}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("reason"),
        "{body}"
    );
    let (status, _) = api.decide(&hold, "approve", &rita, json!({})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = api
        .decide(
            &hold,
            "approve",
            &rita,
            json!({"reason": "ok", "amount": 1}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown fields are refused"
    );
    let malformed = api
        .http
        .post(format!("{}/{hold}/approve", api.base))
        .bearer_auth(&rita)
        .header("content-type", "application/json")
        .body("{\"reason\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let (status, body) = api.get("?state=maybe", &rita).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    let (_, after) = api.get(&format!("/{hold}"), &rita).await;
    assert_eq!(after["state"], "pending", "{after}");
    assert!(decisions(&server, &hold).is_empty());
}

#[tokio::test]
async fn the_identity_that_made_the_call_cannot_approve_it_through_any_door() {
    let server = Server::start();
    let door = door(&server).await;
    let rita = user_with_token(&door, "rita", ConsoleRole::Reviewer).await;
    // Rita's own agent key raises the hold.
    let (_, key) = door
        .create_key("rita", "ritas-bot", &Slug::parse("support").unwrap(), None)
        .await
        .unwrap();
    let (client, session) = tier_one(&server, key.expose()).await;
    let hold = held(&client, &session, 300).await;

    let (status, body) = Api::new(&server)
        .decide(&hold, "approve", &rita, json!({"reason": "fine"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("another reviewer"),
        "{body}"
    );
    let cli = server.cli(&[
        "holds", "approve", &hold, "--reason", "fine", "--as", "rita",
    ]);
    assert!(!cli.status.success());
    assert!(
        stderr(&cli).contains("another reviewer"),
        "{}",
        stderr(&cli)
    );

    let refusals: Vec<Value> = server
        .audit_events()
        .into_iter()
        .filter(|e| e["kind"] == "admin_refused" && e["payload"]["code"] == "OWN_HOLD")
        .collect();
    let channels: Vec<&str> = refusals
        .iter()
        .map(|e| e["payload"]["channel"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["api", "cli"], "{refusals:?}");
    assert!(decisions(&server, &hold).is_empty());
}

#[tokio::test]
async fn a_revoked_token_a_disabled_user_and_a_lowered_role_are_refused_at_the_next_request() {
    let server = Server::start();
    let door = door(&server).await;
    let admin = person(&door, "admin").await;
    let rita = user_with_token(&door, "rita", ConsoleRole::Reviewer).await;
    let sam = user_with_token(&door, "sam", ConsoleRole::Reviewer).await;
    let ada = user_with_token(&door, "ada", ConsoleRole::Reviewer).await;
    let (client, session) = tier_one(&server, &server.support_key).await;
    let hold = held(&client, &session, 300).await;
    let api = Api::new(&server);
    for token in [&rita, &sam, &ada] {
        assert_eq!(api.get("", token).await.0, StatusCode::OK);
    }

    let ritas = door.store().list_api_tokens(None).await.unwrap();
    let ritas = ritas.iter().find(|t| t.user == "rita").unwrap();
    door.revoke_api_token(&admin, ritas.id).await.unwrap();
    assert_eq!(api.get("", &rita).await.0, StatusCode::UNAUTHORIZED);

    door.change_user_access(&admin, "sam", ConsoleRole::Reviewer, true)
        .await
        .unwrap();
    assert_eq!(api.get("", &sam).await.0, StatusCode::UNAUTHORIZED);

    door.change_user_access(&admin, "ada", ConsoleRole::Viewer, false)
        .await
        .unwrap();
    let (status, _) = api
        .decide(&hold, "approve", &ada, json!({"reason": "ok"}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(decisions(&server, &hold).is_empty());

    let events = server.audit_events();
    let actions: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "admin_change")
        .filter_map(|e| e["payload"]["action"].as_str())
        .filter(|a| a.starts_with("api_token."))
        .collect();
    assert_eq!(
        actions,
        [
            "api_token.create",
            "api_token.create",
            "api_token.create",
            "api_token.revoke"
        ]
    );
}

#[tokio::test]
async fn only_an_admin_issues_or_revokes_another_persons_token() {
    let server = Server::start();
    let door = door(&server).await;
    let admin = person(&door, "admin").await;
    door.add_user("admin", "rita", ConsoleRole::Reviewer, None)
        .await
        .unwrap();
    door.add_user("admin", "sam", ConsoleRole::Reviewer, None)
        .await
        .unwrap();
    let rita = person(&door, "rita").await;

    let (own, token) = door
        .create_api_token(&rita, "rita", "laptop", None)
        .await
        .unwrap();
    assert_eq!(
        (own.user.as_str(), own.created_by.as_str()),
        ("rita", "rita")
    );
    assert!(token.expose().starts_with(&own.prefix));
    let taken = door.create_api_token(&rita, "rita", "laptop", None).await;
    assert!(taken.unwrap_err().to_string().contains("already has"));
    let others = door.create_api_token(&rita, "sam", "laptop", None).await;
    assert!(others.unwrap_err().to_string().contains("only an admin"));
    let (sams, _) = door
        .create_api_token(&admin, "sam", "chat-bot", None)
        .await
        .unwrap();
    assert_eq!(sams.created_by, "admin");
    let revoke = door.revoke_api_token(&rita, sams.id).await;
    assert!(revoke.unwrap_err().to_string().contains("only an admin"));
    let past = chrono::Utc::now() - chrono::Duration::days(1);
    let expired = door
        .create_api_token(&rita, "rita", "old", Some(past))
        .await;
    assert!(
        expired
            .unwrap_err()
            .to_string()
            .contains("not in the future")
    );

    let listed = door.store().list_api_tokens(None).await.unwrap();
    let names: Vec<(&str, &str)> = listed
        .iter()
        .map(|t| (t.user.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(names, [("rita", "laptop"), ("sam", "chat-bot")]);
    assert!(listed.iter().all(|t| t.revoked_at.is_none()));
}
