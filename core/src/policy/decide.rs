//! `decide`: whether one tool call may run, as a pure function of catalog, session and time.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::rules::Failure;
use super::{CompiledCatalog, Decision, DenyCode, Reservation, SessionView};
use crate::slug::Slug;

/// One `call_tool` request, after the MCP layer resolved the session it names.
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    /// The session the call names (or the connection's newest session when it names none).
    pub session_id: &'a str,
    /// The agent key that authenticated the request.
    pub key_id: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
}

/// Decides one call. `session` is `None` when the store knows no session by that id.
///
/// The order is fixed (DESIGN.md, "The policy engine") and each step fails closed:
/// 1. unknown, expired or foreign session → `ACCESS_DENIED`, revealing nothing more;
/// 2. no learned, in-scope role grants the tool → `ACCESS_DENIED` with the available tools;
/// 3. arguments that do not match the tool's schema → `INVALID_ARGUMENTS`;
/// 4. each granting role in learn order: step-order guards, per-call bounds, cumulative
///    caps; the first role whose rules all pass authorizes, else `GOVERNANCE_VIOLATION`
///    naming the first role's failed rule;
/// 5. allow, with that role and the usage to reserve.
pub fn decide(
    catalog: &CompiledCatalog,
    session: Option<&SessionView>,
    request: &CallRequest<'_>,
    now: DateTime<Utc>,
) -> Decision {
    let Some(session) = session.filter(|s| {
        s.id == request.session_id && s.owner_key_id == request.key_id && now < s.expires_at
    }) else {
        return deny(
            DenyCode::AccessDenied,
            "The session is unknown, expired or not yours: call `init_skilder` to start a new one."
                .to_owned(),
            None,
            Vec::new(),
        );
    };

    let mut granting = catalog
        .effective_roles(session)
        .filter(|(_, role)| role.tools.contains(request.tool))
        .peekable();
    if granting.peek().is_none() {
        return deny(
            DenyCode::AccessDenied,
            not_unlocked(catalog, session, request.tool),
            None,
            catalog.available_tools(session),
        );
    }

    let Some(tool) = catalog.compiled_tool(request.tool) else {
        // Granted by a skill but gone from the upstream's tool list: nothing to execute.
        return deny(
            DenyCode::AccessDenied,
            format!("`{}` is not provided by any upstream.", request.tool),
            None,
            catalog.available_tools(session),
        );
    };
    let validator = match &tool.validator {
        Ok(validator) => validator,
        Err(reason) => {
            let rule = format!(
                "The input schema of `{}` is invalid ({reason}), so no call can be checked.",
                request.tool
            );
            return deny(DenyCode::InvalidArguments, rule, None, Vec::new());
        }
    };
    // `is_valid` short-circuits without building errors, so the common valid call stays cheap.
    if !validator.is_valid(request.arguments) {
        let detail = match validator.iter_errors(request.arguments).next() {
            Some(error) => {
                let at = error.instance_path.to_string();
                let place = if at.is_empty() {
                    "arguments".to_owned()
                } else {
                    format!("`{}`", at.trim_start_matches('/'))
                };
                format!("{place}: {error}")
            }
            None => "arguments".to_owned(),
        };
        let rule = format!(
            "The arguments do not match the input schema of `{}`: {detail}.",
            request.tool
        );
        return deny(DenyCode::InvalidArguments, rule, None, Vec::new());
    }
    let empty = Map::new();
    let args = match request.arguments {
        Value::Object(args) => args,
        // A schema that accepts non-objects still gets no argument to satisfy a limit with.
        _ => &empty,
    };

    let mut first_failure: Option<(&Slug, Failure)> = None;
    for (slug, role) in granting {
        let outcome = match role.rules.get(request.tool) {
            None => Ok(Vec::new()),
            Some(rules) => rules.check(slug.as_str(), request.tool, args, &session.usage),
        };
        match outcome {
            Ok(amounts) => {
                let reservation = Reservation::new(slug.clone(), request.tool.to_owned(), amounts);
                return Decision::Allow {
                    role: slug.clone(),
                    reservation,
                };
            }
            Err(failure) => {
                first_failure.get_or_insert((slug, failure));
            }
        }
    }
    let (role, failure) = first_failure.expect("at least one granting role was evaluated");
    deny(
        DenyCode::GovernanceViolation,
        failure.rule,
        Some(role.clone()),
        catalog.available_tools(session),
    )
}

fn deny(
    code: DenyCode,
    rule: String,
    role: Option<Slug>,
    available_tools: Vec<String>,
) -> Decision {
    Decision::Deny {
        code,
        rule,
        role,
        available_tools,
    }
}

/// Names a role in the session's scope that would unlock the tool, if one exists; says
/// nothing about roles outside the scope.
fn not_unlocked(catalog: &CompiledCatalog, session: &SessionView, tool: &str) -> String {
    let learnable = catalog
        .roles_granting(tool)
        .iter()
        .find(|role| catalog.scope_allows(session.scope.as_str(), role.as_str()));
    match learnable {
        Some(role) => format!(
            "`{tool}` is not unlocked by any role this session has learned; learning `/roles/{role}` unlocks it."
        ),
        None => format!("`{tool}` is not unlocked by any role this session has learned."),
    }
}
