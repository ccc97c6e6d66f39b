//! `skillgate-dev seed-audit --events N`: fills a database with a realistic, chain-valid
//! audit log (sessions that learn roles, call tools, get denied, violate limits and hit
//! downstream errors) for compliance benchmarks and demos.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context;
use chrono::{Duration, Utc};
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use skillgate_core::audit::chain::link;
use skillgate_core::audit::{Anchor, AuditRow, EventKind, canonical_json};
use skillgate_core::store::stamp;

use crate::database::DatabaseArg;

#[derive(Debug, Args)]
pub struct SeedAuditArgs {
    #[command(flatten)]
    pub database: DatabaseArg,
    /// How many events to append.
    #[arg(long, default_value_t = 10_000)]
    pub events: u64,
    /// Average events per session (1,000,000 events / 20 = 50,000 sessions).
    #[arg(long, default_value_t = 20)]
    pub per_session: u64,
    /// The events are spread evenly over this many days, ending now.
    #[arg(long, default_value_t = 30)]
    pub days: i64,
    /// Events per transaction.
    #[arg(long, default_value_t = 5_000)]
    pub batch: usize,
    /// Sessions in progress at once, whose events interleave in the chain.
    #[arg(long, default_value_t = 8)]
    pub concurrent: usize,
    /// Seed of the random generator, for reproducible data sets.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

const KEYS: &[&str] = &[
    "support-bot",
    "billing-agent",
    "ops-runner",
    "fraud-watch",
    "retention-ai",
];
const SCOPES: &[&str] = &["support", "billing", "ops"];
const ROLES: &[(&str, &[&str])] = &[
    (
        "tier-1-support",
        &[
            "lookup_customer",
            "lookup_order",
            "issue_refund",
            "open_ticket",
        ],
    ),
    ("retention-desk", &["lookup_customer", "offer_discount"]),
    ("billing-admin", &["adjust_invoice", "issue_credit"]),
    ("security-fraud", &["freeze_account", "list_logins"]),
    ("system-admin", &["reset_password", "delete_account"]),
];
const RULES: &[&str] = &[
    "max_refund_per_call",
    "refund_total_per_session",
    "lookup_before_refund",
    "max_discount_percent",
    "credit_cap",
];
const TASKS: &[&str] = &[
    "Customer asks for a refund of a damaged order",
    "Check the status of a late delivery",
    "Investigate suspicious logins on an account",
    "Apply a retention discount before cancellation",
    "Correct a duplicate invoice line",
    "Reset a locked-out user's password",
    "Escalate a complaint about a missing parcel",
];

/// A session being generated: its id, key, and the events still to write.
struct Live {
    id: String,
    key: &'static str,
    queue: std::vec::IntoIter<(EventKind, Value)>,
}

fn plan(rng: &mut StdRng, scope: &str, per_session: u64) -> Vec<(EventKind, Value)> {
    let mut events = vec![(
        EventKind::SessionStarted,
        json!({ "scope": scope, "task_summary": TASKS[rng.gen_range(0..TASKS.len())] }),
    )];
    let (role, tools) = ROLES[rng.gen_range(0..ROLES.len())];
    let versions = |rng: &mut StdRng| -> BTreeMap<String, u32> {
        BTreeMap::from([(format!("{role}-skill"), rng.gen_range(1..4))])
    };
    let v = versions(rng);
    events.push((
        EventKind::LearnGranted,
        json!({ "path": format!("/roles/{role}"), "role": role, "skill_versions": v }),
    ));
    let target = rng.gen_range(per_session / 2..=per_session * 3 / 2).max(3);
    while (events.len() as u64) < target {
        let tool = tools[rng.gen_range(0..tools.len())];
        let args = json!({ "customer_id": format!("C-{}", rng.gen_range(1000..9999)),
            "amount": rng.gen_range(5..900), "card": { "sha256": format!("{:032x}{:032x}", rng.r#gen::<u128>(), rng.r#gen::<u128>()) } });
        match rng.gen_range(0..100) {
            0..=2 => events.push((
                EventKind::LearnDenied,
                json!({ "path": "/roles/system-admin", "code": "ACCESS_DENIED" }),
            )),
            3..=6 => events.push((
                EventKind::CallDenied,
                json!({ "tool": "delete_account", "arguments": {}, "decision": "denied",
                        "code": "ACCESS_DENIED", "rule": null }),
            )),
            7..=9 => events.push((
                EventKind::CallDenied,
                json!({ "tool": tool, "arguments": args, "decision": "denied",
                        "code": "GOVERNANCE_VIOLATION", "rule": RULES[rng.gen_range(0..RULES.len())] }),
            )),
            10..=11 => {
                let (second, _) = ROLES[rng.gen_range(0..ROLES.len())];
                events.push((
                    EventKind::LearnGranted,
                    json!({ "path": format!("/roles/{second}"), "role": second,
                            "skill_versions": { format!("{second}-skill"): 1 } }),
                ));
            }
            12 => events.push((
                EventKind::Feedback,
                json!({ "skill": format!("{role}-skill"), "rating": rng.gen_range(1..6), "comment": "seeded" }),
            )),
            n => {
                events.push((
                    EventKind::CallAllowed,
                    json!({ "tool": tool, "arguments": args, "decision": "allowed", "role": role,
                            "skill_versions": v }),
                ));
                let duration = rng.gen_range(3..400);
                events.push(if n < 16 {
                    (
                        EventKind::CallResult,
                        json!({ "tool": tool, "status": "error", "duration_ms": duration,
                                "error": "upstream timed out" }),
                    )
                } else {
                    (
                        EventKind::CallResult,
                        json!({ "tool": tool, "status": "ok", "duration_ms": duration,
                                "result_size": rng.gen_range(40..4000),
                                "result_sha256": format!("{:032x}{:032x}", rng.r#gen::<u128>(), rng.r#gen::<u128>()) }),
                    )
                });
            }
        }
    }
    events
}

pub async fn run(args: SeedAuditArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.events > 0, "--events must be at least 1");
    anyhow::ensure!(args.per_session >= 3, "--per-session must be at least 3");
    anyhow::ensure!(args.days > 0, "--days must be at least 1");
    anyhow::ensure!(args.concurrent > 0, "--concurrent must be at least 1");
    let store = args.database.open().await?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let started = Instant::now();
    let now = Utc::now();
    let first_at = now - Duration::days(args.days);
    let step_us = (args.days * 86_400_000_000 / i64::try_from(args.events)?).max(1);
    // Several sessions run at once, so their events interleave in the chain as they do
    // in production.
    let mut live: Vec<Live> = Vec::new();
    let mut written = 0u64;
    let mut sessions = 0u64;
    while written < args.events {
        let batch_len = (args.events - written).min(args.batch as u64);
        let mut events: Vec<(String, &'static str, EventKind, String)> =
            Vec::with_capacity(batch_len as usize);
        while (events.len() as u64) < batch_len {
            if live.len() < args.concurrent {
                sessions += 1;
                let scope = SCOPES[rng.gen_range(0..SCOPES.len())];
                live.push(Live {
                    id: format!("seed-{:08x}-{sessions}", rng.r#gen::<u32>()),
                    key: KEYS[rng.gen_range(0..KEYS.len())],
                    queue: plan(&mut rng, scope, args.per_session).into_iter(),
                });
            }
            let pick = rng.gen_range(0..live.len());
            match live[pick].queue.next() {
                Some((kind, payload)) => events.push((
                    live[pick].id.clone(),
                    live[pick].key,
                    kind,
                    canonical_json(&payload),
                )),
                None => {
                    live.swap_remove(pick);
                }
            }
        }
        let base = written;
        store
            .audit_append_with(|tip| {
                let mut tip = tip.clone();
                events
                    .into_iter()
                    .enumerate()
                    .map(|(i, (session, key, kind, payload))| {
                        let offset = i64::try_from(base + i as u64).unwrap_or(i64::MAX);
                        let at = stamp(first_at + Duration::microseconds(offset * step_us));
                        let row: AuditRow = link(
                            &tip,
                            at,
                            Some(session),
                            kind.as_str().to_owned(),
                            Some(key.to_owned()),
                            payload,
                        );
                        tip = Anchor {
                            seq: row.seq,
                            hash: row.hash.clone(),
                        };
                        row
                    })
                    .collect()
            })
            .await
            .context("appending seeded audit events")?;
        written += batch_len;
    }
    println!(
        "seeded {written} audit events in about {sessions} sessions in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
