//! Server functions that change the limits of a role or the guardrails of a scope: one set
//! for both holders, since a guardrail is a limit that binds every role of a scope.
//!
//! The add form posts plain fields (`limit[kind]`, `limit[tool]`, …) so it works without
//! JavaScript; the server parses them into a [`skillgate_core::model::Limit`] and saves the
//! holder through the admin door, which validates, audits and swaps the snapshot.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::catalog::Checked;
use crate::shared::ConsoleError;

/// The fields of the add-limit form, posted as `limit[kind]`, `limit[tool]`, …
/// Which ones matter depends on `kind`: `bound` (tool, arg, op, value), `one_of` (tool,
/// arg, value: comma-separated), `max_length` (tool, arg, value), `no_shell` (tool, arg),
/// `path_under` (tool, arg, value: the root directory), `url_host` (tool, arg, value: hosts,
/// comma-separated), `sum_cap` (tool, arg, value), `count_cap` (tool, value), `requires`
/// (tool, after, and optionally
/// `same_args`: comma-separated, `result_pointer` with `result_equals`: a JSON value),
/// `requires_approval` (tool, optionally arg, op and value as its condition, and minutes).
/// A per-call check with `fleet_tools` (a glob) is a fleet rule instead: it reads every
/// argument matching `fleet_name` (a glob) or `fleet_format`, and ignores tool and arg.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitFields {
    pub kind: String,
    pub tool: String,
    pub arg: Option<String>,
    pub op: Option<String>,
    pub value: Option<String>,
    pub after: Checked,
    #[serde(default)]
    pub same_args: Option<String>,
    #[serde(default)]
    pub result_pointer: Option<String>,
    #[serde(default)]
    pub result_equals: Option<String>,
    /// For `requires_approval`: how long a hold waits and its approval lasts.
    #[serde(default)]
    pub minutes: Option<String>,
    /// A fleet rule: the tools it binds (a glob, `*` for every tool).
    #[serde(default)]
    pub fleet_tools: Option<String>,
    /// A fleet rule: the argument names it reads (a glob).
    #[serde(default)]
    pub fleet_name: Option<String>,
    /// A fleet rule: the schema `format` of the arguments it reads.
    #[serde(default)]
    pub fleet_format: Option<String>,
}

/// Adds one limit to a role (`holder` = `role`) or one guardrail to a scope (`scope`).
#[server(prefix = "/console/api", endpoint = "add_limit")]
pub async fn add_limit(
    holder: String,
    name: String,
    revision: i64,
    limit: LimitFields,
) -> Result<i64, ConsoleError> {
    let edit = ssr::LimitEdit::Add(ssr::parse_limit(limit)?);
    ssr::change_limits(&holder, &name, revision, move |limits| edit.apply(limits)).await
}

/// Replaces the number of the limit at `index` (the quick edit of a bound or cap).
#[server(prefix = "/console/api", endpoint = "edit_limit_value")]
pub async fn edit_limit_value(
    holder: String,
    name: String,
    revision: i64,
    index: usize,
    value: String,
) -> Result<i64, ConsoleError> {
    let edit = ssr::LimitEdit::Value { index, value };
    ssr::change_limits(&holder, &name, revision, move |limits| edit.apply(limits)).await
}

#[server(prefix = "/console/api", endpoint = "remove_limit")]
pub async fn remove_limit(
    holder: String,
    name: String,
    revision: i64,
    index: usize,
) -> Result<i64, ConsoleError> {
    let edit = ssr::LimitEdit::Remove { index };
    ssr::change_limits(&holder, &name, revision, move |limits| edit.apply(limits)).await
}

pub use what_if_form::*;

/// The what-if's server function, in its own module for one lint: it takes the save forms'
/// fields by their names, plus the two the page adds.
#[allow(clippy::too_many_arguments)]
mod what_if_form {
    use leptos::prelude::*;

    use super::LimitFields;
    #[cfg(feature = "ssr")]
    use super::ssr;
    use crate::shared::ConsoleError;

    /// What a change to the limits would change, replayed instead of saved: `change` is
    /// `add` (with `limit`, as `add_limit` takes it), `value` (`index` and `value`, as
    /// `edit_limit_value`) or `remove` (`index`), made to the role or scope at `revision` (the
    /// page's). The page fills `change` and `window` in; the other fields are the save form's.
    #[server(prefix = "/console/api", endpoint = "what_if_limits")]
    pub async fn what_if_limits(
        holder: String,
        name: String,
        revision: i64,
        change: Option<String>,
        window: Option<String>,
        limit: Option<LimitFields>,
        index: Option<usize>,
        value: Option<String>,
    ) -> Result<crate::whatif::api::WhatIfView, ConsoleError> {
        use skillgate_core::users::ConsoleRole;
        let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
        let edit = ssr::LimitEdit::from_fields(change.as_deref(), limit, index, value)?;
        ssr::what_if_limits(&user.name, &holder, &name, revision, window, edit).await
    }
}

#[cfg_attr(not(feature = "ssr"), allow(dead_code))]
fn gone() -> ConsoleError {
    ConsoleError::Invalid("That limit no longer exists; reload the page.".into())
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use leptos::serde_json::{self, Value};
    use skillgate_core::model::{ApprovalCondition, ArgCheck, CmpOp, Limit, ResultCheck};
    use skillgate_core::users::ConsoleRole;

    use super::LimitFields;
    use crate::catalog::authoring::{
        authoring_error, field, slug_field, stored_role, stored_scope,
    };
    use crate::shared::ConsoleError;
    use crate::shared::ssr::internal;

    fn not_a_holder() -> ConsoleError {
        ConsoleError::Invalid("Limits belong to a role or a scope.".into())
    }

    /// One change to a holder's limits, as the save functions and the what-if make it.
    pub enum LimitEdit {
        Add(Limit),
        Value { index: usize, value: String },
        Remove { index: usize },
    }

    impl LimitEdit {
        pub fn from_fields(
            change: Option<&str>,
            limit: Option<LimitFields>,
            index: Option<usize>,
            value: Option<String>,
        ) -> Result<Self, ConsoleError> {
            let malformed = || ConsoleError::Invalid("That change cannot be replayed.".into());
            match (change, limit, index, value) {
                (Some("add"), Some(limit), _, _) => Ok(Self::Add(parse_limit(limit)?)),
                (Some("value"), _, Some(index), Some(value)) => Ok(Self::Value { index, value }),
                (Some("remove"), _, Some(index), _) => Ok(Self::Remove { index }),
                _ => Err(malformed()),
            }
        }

        /// Makes the change to `limits`, as saving it would.
        pub fn apply(self, limits: &mut Vec<Limit>) -> Result<(), ConsoleError> {
            match self {
                Self::Add(limit) => limits.push(limit),
                Self::Value { index, value } => {
                    let limit = limits.get_mut(index).ok_or_else(super::gone)?;
                    set_limit_value(limit, &value)?;
                }
                Self::Remove { index } => {
                    if index >= limits.len() {
                        return Err(super::gone());
                    }
                    limits.remove(index);
                }
            }
            Ok(())
        }
    }

    /// Replays `window` of the audit under the live catalog with `edit` made to the limits
    /// of role or scope `name` as stored at `revision`: what saving it would enforce.
    /// Nothing is saved.
    pub async fn what_if_limits(
        actor: &str,
        holder: &str,
        name: &str,
        revision: i64,
        window: Option<String>,
        edit: LimitEdit,
    ) -> Result<crate::whatif::api::WhatIfView, ConsoleError> {
        let ctx = crate::shared::ssr::context();
        let slug = slug_field("name", name)?;
        let changed = || {
            ConsoleError::Invalid(format!(
                "The {holder} `{slug}` changed since this page was loaded; reload it to see what your change would do."
            ))
        };
        let mut proposed = ctx.authoring.live().catalog().clone();
        match holder {
            "role" => {
                let stored = ctx.authoring.role(&slug).await.map_err(internal)?;
                let mut role = stored
                    .filter(|r| r.revision == revision)
                    .ok_or_else(changed)?
                    .value;
                edit.apply(&mut role.limits)?;
                proposed.roles.retain(|r| r.slug != slug);
                proposed.roles.push(role);
            }
            "scope" => {
                let stored = ctx.authoring.scopes().await.map_err(internal)?;
                let mut scope = stored
                    .into_iter()
                    .find(|s| s.value.slug == slug)
                    .filter(|s| s.revision == revision)
                    .ok_or_else(changed)?
                    .value;
                edit.apply(&mut scope.guardrails)?;
                proposed.scopes.retain(|s| s.slug != slug);
                proposed.scopes.push(scope);
            }
            _ => return Err(not_a_holder()),
        }
        crate::whatif::api::ssr::replay(&ctx, actor, proposed, window).await
    }

    /// Loads the role or scope `name`, lets `change` edit its limits (a scope's are its
    /// guardrails), and saves it from `revision` as the signed-in admin.
    pub async fn change_limits(
        holder: &str,
        name: &str,
        revision: i64,
        change: impl FnOnce(&mut Vec<Limit>) -> Result<(), ConsoleError>,
    ) -> Result<i64, ConsoleError> {
        let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
        let ctx = crate::shared::ssr::context();
        match holder {
            "role" => {
                let mut role = stored_role(&ctx, name).await?;
                change(&mut role.limits)?;
                ctx.authoring
                    .update_role(&user.name, &role, revision)
                    .await
                    .map_err(authoring_error)
            }
            "scope" => {
                let mut scope = stored_scope(&ctx, &slug_field("name", name)?).await?;
                change(&mut scope.guardrails)?;
                ctx.authoring
                    .update_scope(&user.name, &scope, revision)
                    .await
                    .map_err(authoring_error)
            }
            _ => Err(not_a_holder()),
        }
    }

    /// The optional result condition of a step guard: a JSON Pointer and the JSON value
    /// it must equal (text that is not JSON is taken as a string).
    fn result_check(
        pointer: Option<&str>,
        equals: Option<&str>,
    ) -> Result<Option<ResultCheck>, ConsoleError> {
        let pointer = pointer.map(str::trim).unwrap_or_default();
        let equals = equals.map(str::trim).unwrap_or_default();
        match (pointer.is_empty(), equals.is_empty()) {
            (true, true) => Ok(None),
            (true, false) => Err(field(
                "result",
                "Name the result field (a JSON Pointer such as /eligible) the value is for.",
            )),
            (false, true) => Err(field(
                "result",
                "Give the value the result field must equal, e.g. true.",
            )),
            (false, false) => Ok(Some(ResultCheck {
                pointer: pointer.to_owned(),
                equals: serde_json::from_str(equals)
                    .unwrap_or_else(|_| Value::String(equals.to_owned())),
            })),
        }
    }

    fn decimal(name: &str, text: Option<&str>) -> Result<rust_decimal::Decimal, ConsoleError> {
        let text = text.map(str::trim).unwrap_or_default();
        if text.is_empty() {
            return Err(field(name, "Enter a number."));
        }
        text.parse()
            .map_err(|_| field(name, format!("`{text}` is not a number.")))
    }

    fn count(name: &str, text: Option<&str>) -> Result<u32, ConsoleError> {
        let text = text.map(str::trim).unwrap_or_default();
        text.parse().map_err(|_| {
            field(
                name,
                format!("`{text}` is not a whole number of 0 or more."),
            )
        })
    }

    fn op(text: Option<&str>) -> Result<CmpOp, ConsoleError> {
        Ok(match text.unwrap_or("<=") {
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::Ge,
            "==" => CmpOp::Eq,
            other => return Err(field("op", format!("`{other}` is not a comparison."))),
        })
    }

    /// The per-call check a kind of the form names (`bound`, `one_of`, `max_length`,
    /// `no_shell`, `path_under`, `url_host`), from its comparison and value; `None` for the
    /// other kinds.
    fn check_of(
        kind: &str,
        op_text: Option<&str>,
        value: Option<&str>,
    ) -> Result<Option<ArgCheck>, ConsoleError> {
        Ok(Some(match kind {
            "bound" => ArgCheck::Compare {
                op: op(op_text)?,
                value: decimal("value", value)?,
            },
            "one_of" => ArgCheck::OneOf {
                values: value
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(|v| {
                        serde_json::from_str::<Value>(v)
                            .unwrap_or_else(|_| Value::String(v.to_owned()))
                    })
                    .collect(),
            },
            "max_length" => ArgCheck::MaxLength {
                max: count("value", value)? as usize,
            },
            "no_shell" => ArgCheck::NoShell,
            "path_under" => {
                let root = value.map(str::trim).unwrap_or_default();
                if root.is_empty() {
                    return Err(field(
                        "value",
                        "Enter the directory the path must stay under, e.g. /srv/files.",
                    ));
                }
                ArgCheck::PathUnder {
                    root: root.to_owned(),
                }
            }
            "url_host" => {
                let hosts: Vec<String> = value
                    .unwrap_or_default()
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|h| !h.is_empty())
                    .map(str::to_owned)
                    .collect();
                if hosts.is_empty() {
                    return Err(field(
                        "value",
                        "Enter the hosts a URL may name, separated by commas, e.g. api.example.com, *.example.net.",
                    ));
                }
                ArgCheck::UrlHost { hosts }
            }
            _ => return Ok(None),
        }))
    }

    /// A fleet rule from the form: `tools` (a glob) and at least one of the name glob and
    /// the format, with the check the kind names.
    fn fleet_rule(
        tools: String,
        name: Option<String>,
        format: Option<String>,
        check: Option<ArgCheck>,
    ) -> Result<Limit, ConsoleError> {
        let Some(check) = check else {
            return Err(field(
                "kind",
                "A rule for many tools takes a per-call check: pick one of the checks.",
            ));
        };
        if name.is_none() && format.is_none() {
            return Err(field(
                "fleet",
                "Say which arguments it reads: a name pattern such as *url*, a format such as uri, or both.",
            ));
        }
        Ok(Limit::ArgRule {
            tools,
            name,
            format,
            check,
        })
    }

    pub fn parse_limit(fields: LimitFields) -> Result<Limit, ConsoleError> {
        let LimitFields {
            kind,
            tool,
            arg,
            op: op_text,
            value,
            after,
            same_args,
            result_pointer,
            result_equals,
            minutes,
            fleet_tools,
            fleet_name,
            fleet_format,
        } = fields;
        let given =
            |text: Option<String>| text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        let value = value.as_deref();
        let check = check_of(&kind, op_text.as_deref(), value)?;
        if let Some(tools) = given(fleet_tools) {
            return fleet_rule(tools, given(fleet_name), given(fleet_format), check);
        }
        if tool.trim().is_empty() {
            return Err(field("tool", "Pick the tool the limit bounds."));
        }
        let chosen_arg = given(arg);
        let arg = || {
            chosen_arg
                .clone()
                .ok_or_else(|| field("arg", "Pick the argument the limit reads."))
        };
        if let Some(check) = check {
            return Ok(Limit::ArgBound {
                tool,
                arg: arg()?,
                check,
            });
        }
        Ok(match kind.as_str() {
            "sum_cap" => Limit::SumCap {
                tool,
                arg: arg()?,
                max: decimal("value", value)?,
            },
            "count_cap" => Limit::CountCap {
                tool,
                max: count("value", value)?,
            },
            "requires_approval" => {
                let when = match chosen_arg {
                    None => None,
                    Some(arg) => Some(ApprovalCondition {
                        arg,
                        op: op(op_text.as_deref())?,
                        value: decimal("value", value)?,
                    }),
                };
                let minutes = minutes.as_deref().map(str::trim).filter(|m| !m.is_empty());
                Limit::RequiresApproval {
                    tool,
                    when,
                    expires_in_minutes: minutes.map(|m| count("minutes", Some(m))).transpose()?,
                }
            }
            "requires" => Limit::Requires {
                tool,
                after: after.unwrap_or_default().into_keys().collect(),
                same_args: same_args
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                    .collect(),
                result: result_check(result_pointer.as_deref(), result_equals.as_deref())?,
            },
            other => return Err(field("kind", format!("`{other}` is not a kind of limit."))),
        })
    }

    /// Sets the number a limit compares against; limits without one cannot be quick-edited.
    pub fn set_limit_value(limit: &mut Limit, text: &str) -> Result<(), ConsoleError> {
        match limit {
            Limit::ArgBound {
                check: ArgCheck::Compare { value, .. },
                ..
            }
            | Limit::ArgRule {
                check: ArgCheck::Compare { value, .. },
                ..
            } => *value = decimal("value", Some(text))?,
            Limit::ArgBound {
                check: ArgCheck::MaxLength { max },
                ..
            }
            | Limit::ArgRule {
                check: ArgCheck::MaxLength { max },
                ..
            } => *max = count("value", Some(text))? as usize,
            Limit::SumCap { max, .. } => *max = decimal("value", Some(text))?,
            Limit::CountCap { max, .. } => *max = count("value", Some(text))?,
            _ => {
                return Err(field(
                    "value",
                    "This limit has no single number; remove it and add a new one.",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use skillgate_core::model::{ArgCheck, Limit};

    use super::LimitFields;
    use super::ssr::parse_limit;

    fn requires(same_args: &str, pointer: &str, equals: &str) -> LimitFields {
        LimitFields {
            kind: "requires".into(),
            tool: "process_refund".into(),
            arg: None,
            op: None,
            value: None,
            after: Some([("check_refund_eligibility".to_owned(), "on".to_owned())].into()),
            same_args: Some(same_args.into()),
            result_pointer: Some(pointer.into()),
            result_equals: Some(equals.into()),
            minutes: None,
            fleet_tools: None,
            fleet_name: None,
            fleet_format: None,
        }
    }

    #[test]
    fn a_bound_guard_is_parsed_from_its_form_fields() {
        let Limit::Requires {
            after,
            same_args,
            result,
            ..
        } = parse_limit(requires("order_id, customer_id", "/eligible", "true")).unwrap()
        else {
            panic!("a step guard");
        };
        assert_eq!(after, ["check_refund_eligibility"]);
        assert_eq!(same_args, ["order_id", "customer_id"]);
        let result = result.unwrap();
        assert_eq!(result.pointer, "/eligible");
        assert_eq!(result.equals, leptos::serde_json::json!(true));
        let plain = parse_limit(requires("", "", "")).unwrap();
        assert!(
            matches!(plain, Limit::Requires { ref same_args, result: None, .. } if same_args.is_empty())
        );
    }

    fn text_check(kind: &str, value: &str) -> LimitFields {
        LimitFields {
            kind: kind.into(),
            tool: "fetch".into(),
            arg: Some("target".into()),
            op: None,
            value: Some(value.into()),
            after: None,
            same_args: None,
            result_pointer: None,
            result_equals: None,
            minutes: None,
            fleet_tools: None,
            fleet_name: None,
            fleet_format: None,
        }
    }

    #[test]
    fn a_check_with_a_tool_pattern_is_a_fleet_rule_that_needs_a_selector() {
        let mut fields = text_check("url_host", "*");
        fields.tool = String::new();
        fields.fleet_tools = Some(" * ".into());
        fields.fleet_name = Some("*url*".into());
        fields.fleet_format = Some(" ".into());
        assert_eq!(
            parse_limit(fields.clone()).unwrap(),
            Limit::ArgRule {
                tools: "*".into(),
                name: Some("*url*".into()),
                format: None,
                check: ArgCheck::UrlHost {
                    hosts: vec!["*".into()]
                },
            }
        );
        fields.fleet_name = None;
        let error = parse_limit(fields.clone()).unwrap_err();
        assert!(format!("{error:?}").contains("fleet"), "{error:?}");
        fields.fleet_name = Some("*url*".into());
        fields.kind = "count_cap".into();
        let error = parse_limit(fields).unwrap_err();
        assert!(format!("{error:?}").contains("kind"), "{error:?}");
    }

    #[test]
    fn shell_path_and_host_checks_are_parsed_from_their_form_fields() {
        let limit = |kind, value| match parse_limit(text_check(kind, value)).unwrap() {
            Limit::ArgBound { arg, check, .. } => {
                assert_eq!(arg, "target");
                check
            }
            other => panic!("an argument check, not {other:?}"),
        };
        assert_eq!(limit("no_shell", ""), ArgCheck::NoShell);
        assert_eq!(
            limit("path_under", " /srv/files "),
            ArgCheck::PathUnder {
                root: "/srv/files".into()
            }
        );
        assert_eq!(
            limit("url_host", "api.example.com, *.cdn.example.net"),
            ArgCheck::UrlHost {
                hosts: vec!["api.example.com".into(), "*.cdn.example.net".into()]
            }
        );
    }

    #[test]
    fn a_path_or_host_check_without_its_value_is_refused_next_to_the_value() {
        for (kind, blank) in [("path_under", "  "), ("url_host", " , ")] {
            let error = parse_limit(text_check(kind, blank)).unwrap_err();
            assert!(format!("{error:?}").contains("value"), "{kind}: {error:?}");
        }
    }

    #[test]
    fn half_a_result_condition_is_refused_next_to_its_field() {
        for (pointer, equals) in [("/eligible", ""), ("", "true")] {
            let error = parse_limit(requires("", pointer, equals)).unwrap_err();
            assert!(format!("{error:?}").contains("result"), "{error:?}");
        }
    }
}
