//! `decide`: whether one tool call may run, as a pure function of catalog, session and time.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::amount::decimal_from_json;
use super::digest::value_digest;
use super::remedy::Remedy;
use super::rules::Failure;
use super::{
    Arguments, CompiledCatalog, Decision, Denial, DenyCode, Hold, Permit, Reservation,
    ReservedAmount, SessionView, SuccessNote,
};
use crate::slug::Slug;

/// One `call_tool` request, after the MCP layer resolved the session it names.
#[derive(Debug)]
pub struct CallRequest<'a> {
    /// The session the call names (or the connection's newest session when it names none).
    pub session_id: &'a str,
    /// The agent key that authenticated the request.
    pub key_id: &'a str,
    pub tool: &'a str,
    /// Moved into the permit on `Allow`, so the upstream gets exactly what was decided on.
    pub arguments: Arguments,
    /// The [`arguments_digest`] of the call a reviewer approved in this session, when the
    /// call resumes a hold: it satisfies a requires-approval limit only for those arguments.
    pub approved: Option<&'a str>,
}

/// The digest that binds an approval to one call's arguments: canonical JSON, numbers as
/// exact decimals, so the same call written differently matches and any change does not.
pub fn arguments_digest(arguments: &Arguments) -> String {
    value_digest(&Value::Object(arguments.clone()))
}

/// Decides one call. `session` is `None` when the store knows no session by that id.
///
/// The order is fixed (DESIGN.md, "The policy engine") and each step fails closed:
/// 1. unknown, expired or foreign session → `ACCESS_DENIED`, revealing nothing more;
/// 2. no learned, in-scope role grants the tool → `ACCESS_DENIED` with the available tools;
///    a granted tool whose upstream is quarantined → `UPSTREAM_QUARANTINED`; a granted tool
///    that is quarantined → `TOOL_QUARANTINED`; one whose schema cannot be
///    compiled → `TOOL_UNUSABLE`;
/// 3. arguments that do not match the tool's schema → `INVALID_ARGUMENTS`;
/// 4. the scope's guardrails on the tool → `GOVERNANCE_VIOLATION` naming the guardrail;
/// 5. each granting role in learn order: step-order guards, per-call bounds, cumulative
///    caps; the first role whose rules all pass authorizes, else `GOVERNANCE_VIOLATION`
///    naming the first role's failed rule;
/// 6. an amount a cap must count that is not an exact number → `INVALID_ARGUMENTS`;
/// 7. a requires-approval limit of the scope or the authorizing role that applies, and no
///    approval of exactly these arguments → held, with the permit whose usage the hold
///    reserves (nothing executes);
/// 8. allow, with a permit naming that role and the session usage to reserve (every cap
///    counts the session's calls of the tool, whichever role authorised them).
pub fn decide(
    catalog: &CompiledCatalog,
    session: Option<&SessionView>,
    request: CallRequest<'_>,
    now: DateTime<Utc>,
) -> Decision {
    let CallRequest {
        session_id,
        key_id,
        tool,
        arguments,
        approved,
    } = request;
    let Some(session) =
        session.filter(|s| s.id == session_id && s.owner_key_id == key_id && now < s.expires_at)
    else {
        return deny(
            Denial::new(
                DenyCode::AccessDenied,
                "The session is unknown, expired or not yours: call `init_skilder` to start a new one.",
            )
            .with_remedy(Some(Remedy::StartSession)),
        );
    };

    let mut granting = catalog
        .effective_roles(session)
        .filter(|(_, role)| role.tools.contains(tool))
        .peekable();
    if granting.peek().is_none() {
        let (rule, learnable) = not_unlocked(catalog, session, tool);
        return deny(
            Denial::new(DenyCode::AccessDenied, rule)
                .with_remedy(learnable.map(|role| Remedy::learn(role.as_str())))
                .with_available(catalog.available_tools(session)),
        );
    }

    let Some(compiled) = catalog.compiled_tool(tool) else {
        // Granted by a skill but gone from the upstream's tool list: nothing to execute.
        return deny(
            Denial::new(
                DenyCode::AccessDenied,
                format!("`{tool}` is not provided by any upstream."),
            )
            .with_available(catalog.available_tools(session)),
        );
    };
    if let Some(upstream) = catalog.tool(tool).map(|t| &t.upstream)
        && let Some(reason) = catalog.upstream_quarantine(upstream.as_str())
    {
        return deny(
            Denial::new(
                DenyCode::UpstreamQuarantined,
                format!(
                    "`{tool}` is not called: its upstream `{upstream}` is quarantined until an admin admits it: {reason}"
                ),
            )
            .with_available(catalog.available_tools(session)),
        );
    }
    if let Some(reason) = catalog.tool(tool).and_then(|t| t.quarantine.as_deref()) {
        return deny(
            Denial::new(
                DenyCode::ToolQuarantined,
                format!("`{tool}` is quarantined until an admin admits it: {reason}"),
            )
            .with_available(catalog.available_tools(session)),
        );
    }
    let validator = match &compiled.validator {
        Ok(validator) => validator,
        Err(reason) => {
            return deny(Denial::new(
                DenyCode::ToolUnusable,
                format!(
                    "`{tool}` cannot be used: its input schema is invalid ({reason}), so no call of it can be checked. An admin must fix the tool."
                ),
            ));
        }
    };
    let arguments = Value::Object(arguments);
    if let Err(detail) = schema_check(validator, &arguments) {
        return deny(Denial::new(
            DenyCode::InvalidArguments,
            format!("The arguments do not match the input schema of `{tool}`: {detail}."),
        ));
    }
    let Value::Object(args) = arguments else {
        unreachable!("built as an object above")
    };

    if let Some(rules) = catalog.guardrails_on(session.scope.as_str(), tool)
        && let Err(Failure { rule, remedy }) = rules.check(tool, &args, &session.usage)
    {
        return deny(
            Denial::new(DenyCode::GovernanceViolation, rule)
                .with_remedy(remedy)
                .by_guardrail(session.scope.clone())
                .with_available(catalog.available_tools(session)),
        );
    }

    let mut authorized = None;
    let mut first_failure = None;
    for (slug, role) in granting {
        let outcome = match role.rules.get(tool) {
            None => Ok(()),
            Some(rules) => rules.check(tool, &args, &session.usage),
        };
        match outcome {
            Ok(()) => {
                authorized = Some((slug.clone(), role.rules.get(tool)));
                break;
            }
            Err(failure) => {
                first_failure.get_or_insert((slug, failure));
            }
        }
    }
    let Some((role, role_rules)) = authorized else {
        let Some((role, failure)) = first_failure else {
            unreachable!("at least one granting role was evaluated")
        };
        return deny(
            Denial::new(DenyCode::GovernanceViolation, failure.rule)
                .with_remedy(failure.remedy)
                .by_role(role.clone())
                .with_available(catalog.available_tools(session)),
        );
    };

    let reservation = match reservation(catalog, tool, &args) {
        Ok(reservation) => reservation,
        Err(rule) => return deny(Denial::new(DenyCode::InvalidArguments, rule)),
    };
    // Approval comes last: a call that would be refused anyway is refused, not held.
    let guardrail = catalog.guardrails_on(session.scope.as_str(), tool);
    let mut needed = None;
    for (rules, by_guardrail) in [(guardrail, true), (role_rules, false)] {
        let Some(rules) = rules else { continue };
        match rules.approval_needed(&args) {
            Ok(Some(rule)) => {
                needed = Some(rule);
                break;
            }
            Ok(None) => {}
            Err(Failure { rule, .. }) => {
                let denial = Denial::new(DenyCode::GovernanceViolation, rule)
                    .with_available(catalog.available_tools(session));
                return deny(if by_guardrail {
                    denial.by_guardrail(session.scope.clone())
                } else {
                    denial.by_role(role.clone())
                });
            }
        }
    }
    let note = success_note(catalog, tool, &args);
    let held = needed.filter(|_| approved.is_none_or(|digest| digest != arguments_digest(&args)));
    let permit = Permit::new(tool.to_owned(), role, args, reservation, note);
    match held {
        Some(rule) => Decision::Hold(Hold::new(permit, rule.sentence, rule.minutes)),
        None => Decision::Allow(permit),
    }
}

fn deny(denial: Denial) -> Decision {
    Decision::Deny(denial)
}

/// Validates against the compiled schema, naming the first failing place. A validator that
/// panics on some input denies instead of taking the request down.
fn schema_check(validator: &jsonschema::Validator, arguments: &Value) -> Result<(), String> {
    let checked = catch_unwind(AssertUnwindSafe(|| {
        // `is_valid` short-circuits without building errors: the common valid call stays cheap.
        if validator.is_valid(arguments) {
            return Ok(());
        }
        Err(match validator.iter_errors(arguments).next() {
            Some(error) => {
                let at = error.instance_path().to_string();
                // The place is made of the agent's own keys: bounded like the message.
                let place = if at.is_empty() {
                    "arguments".to_owned()
                } else {
                    format!("`{}`", bounded(at.trim_start_matches('/')))
                };
                format!("{place}: {}", bounded(&error.to_string()))
            }
            None => "arguments".to_owned(),
        })
    }));
    checked.unwrap_or_else(|_| Err("the arguments could not be checked".to_owned()))
}

/// A validator's message quotes the offending value: keep it short.
fn bounded(text: &str) -> String {
    const MAX: usize = 300;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}…")
    }
}

/// The usage this call adds to the session: what every cap of the catalog on the tool reads.
fn reservation(
    catalog: &CompiledCatalog,
    tool: &str,
    args: &Arguments,
) -> Result<Reservation, String> {
    let Some(tracked) = catalog.tracked(tool) else {
        return Ok(Reservation::default());
    };
    let mut amounts = Vec::with_capacity(tracked.sums.len());
    for arg in &tracked.sums {
        let Some(value) = args.get(arg) else { continue };
        let amount = decimal_from_json(value).map_err(|e| {
            format!("`{arg}` {e}, so it cannot be counted toward the session's caps on `{tool}`.")
        })?;
        // A negative amount would lower a sum another role's cap reads: it counts as nothing.
        if amount.is_sign_positive() && !amount.is_zero() {
            amounts.push(ReservedAmount {
                arg: arg.clone(),
                amount,
            });
        }
    }
    Ok(Reservation::new(tracked.count, amounts))
}

/// What a success of this call must leave for bound guards that compare against `tool`.
fn success_note(catalog: &CompiledCatalog, tool: &str, args: &Arguments) -> SuccessNote {
    let Some(watched) = catalog.watched(tool) else {
        return SuccessNote::default();
    };
    let digests: BTreeMap<String, String> = watched
        .args
        .iter()
        .filter_map(|arg| Some((arg.clone(), value_digest(args.get(arg)?))))
        .collect();
    SuccessNote::new(
        tool.to_owned(),
        digests,
        watched.pointers.iter().cloned().collect(),
    )
}

/// Names a role in the session's scope that would unlock the tool, if one exists, with the
/// sentence that says so; says nothing about roles outside the scope.
fn not_unlocked<'a>(
    catalog: &'a CompiledCatalog,
    session: &SessionView,
    tool: &str,
) -> (String, Option<&'a Slug>) {
    let learnable = catalog
        .roles_granting(tool)
        .iter()
        .find(|role| catalog.scope_allows(session.scope.as_str(), role.as_str()));
    let rule = match learnable {
        Some(role) => format!(
            "`{tool}` is not unlocked by any role this session has learned; learning `/roles/{role}` unlocks it."
        ),
        None => format!("`{tool}` is not unlocked by any role this session has learned."),
    };
    (rule, learnable)
}
