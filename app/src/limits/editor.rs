//! The limit editor shared by roles and scopes: a role's limits and a scope's guardrails
//! are the same kind of rule, listed as the agent reads them and added with one form.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;

use crate::catalog::{LimitView, ToolChoice};
use crate::components::catalog::inline_code;
use crate::components::csrf::CsrfField;
use crate::components::forms::{FieldError, FormOutcome, checkbox_group, error_for, last_error};
use crate::limits::api::{AddLimit, EditLimitValue, RemoveLimit};
use crate::whatif::WhatIf;

/// Whose limits an editor shows: a role's (`kind` = `role`) or a scope's guardrails (`scope`).
pub struct LimitHolder {
    pub kind: &'static str,
    pub name: String,
    pub revision: i64,
    pub can_edit: bool,
    pub limits: Vec<LimitView>,
    /// The tools the limits may name, with their arguments: the form's pickers.
    pub tools: Vec<ToolChoice>,
}

/// The limits of a role or the guardrails of a scope, each with its quick edit and remove.
pub fn limit_list(
    holder: &LimitHolder,
    edit: ServerAction<EditLimitValue>,
    remove: ServerAction<RemoveLimit>,
    what_if: WhatIf,
) -> impl IntoView + use<> {
    if holder.limits.is_empty() {
        let empty = match holder.kind {
            "scope" => "No guardrails: each role's own limits bound its calls.",
            _ => "No limits yet: calls are bounded only by the tools' input schemas.",
        };
        return view! { <p class="muted">{empty}</p> }.into_any();
    }
    view! {
        <ul class="limit-editor">
            {holder
                .limits
                .iter()
                .map(|limit| limit_item(limit, holder, edit, remove, what_if))
                .collect_view()}
        </ul>
    }
    .into_any()
}

/// The number a limit compares against, if it has exactly one: what the quick edit changes.
fn limit_number(rule: &str) -> Option<String> {
    let (_, number) = rule.rsplit_once(' ')?;
    (rule.contains("<") || rule.contains(">") || rule.contains("=="))
        .then(|| number.to_owned())
        .filter(|n| n.parse::<f64>().is_ok())
}

fn limit_item(
    limit: &LimitView,
    holder: &LimitHolder,
    edit: ServerAction<EditLimitValue>,
    remove: ServerAction<RemoveLimit>,
    what_if: WhatIf,
) -> impl IntoView + use<> {
    let index = limit.index;
    let (kind, revision, can_edit) = (holder.kind, holder.revision, holder.can_edit);
    let slug = holder.name.clone();
    let edit_slug = slug.clone();
    let rule = limit.rule.clone();
    let remove_label = format!("Remove limit: {rule}");
    let value_what_if = format!("What would changing the value of {rule} change");
    let remove_what_if = format!("What would removing {rule} change");
    let value_id = format!("limit-{index}-value");
    let number = limit_number(&limit.rule);
    let edit_error = Signal::derive(move || {
        edit.value()
            .get()
            .and_then(|r| r.err())
            .filter(|_| {
                edit.input()
                    .get()
                    .is_none_or(|i: EditLimitValue| i.index == index)
            })
            .and_then(|e| error_for(Some(e), "value"))
    });
    view! {
        <li class="limit">
            <p class="sentence">{inline_code(&limit.sentence)}</p>
            <code class="rule">{rule}</code>
            <div class="limit-actions">
                {number
                    .map(|n| {
                        view! {
                            <ActionForm action=edit attr:class="inline-form">
                                <CsrfField />
                                <fieldset disabled=!can_edit class="plain">
                                    <input type="hidden" name="holder" value=kind />
                                    <input type="hidden" name="name" value=edit_slug.clone() />
                                    <input type="hidden" name="revision" value=revision />
                                    <input type="hidden" name="index" value=index />
                                    <label for=value_id.clone() class="inline">
                                        "Value"
                                    </label>
                                    <input
                                        id=value_id.clone()
                                        name="value"
                                        value=n
                                        inputmode="decimal"
                                        class="short"
                                        aria-describedby=format!("{value_id}-error")
                                    />
                                    <button type="submit" class="secondary">
                                        "Change"
                                    </button>
                                    {what_if.button("value", value_what_if.clone())}
                                    <FieldError id=format!("{value_id}-error") message=edit_error />
                                </fieldset>
                            </ActionForm>
                        }
                    })}
                <ActionForm action=remove attr:class="inline-form">
                    <CsrfField />
                    <fieldset disabled=!can_edit class="plain">
                        <input type="hidden" name="holder" value=kind />
                        <input type="hidden" name="name" value=slug.clone() />
                        <input type="hidden" name="revision" value=revision />
                        <input type="hidden" name="index" value=index />
                        <button type="submit" class="danger" aria-label=remove_label>
                            "Remove"
                        </button>
                        {what_if.button("remove", remove_what_if)}
                    </fieldset>
                </ActionForm>
            </div>
        </li>
    }
}

const KINDS: &[(&str, &str)] = &[
    ("bound", "Per-call bound: argument compared with a number"),
    ("one_of", "Per-call bound: argument is one of listed values"),
    (
        "max_length",
        "Per-call bound: text argument of at most N characters",
    ),
    (
        "no_shell",
        "Per-call check: text argument without shell syntax (; | & $ ` < > line breaks)",
    ),
    (
        "path_under",
        "Per-call check: path argument stays under a directory",
    ),
    (
        "url_host",
        "Per-call check: URL argument on listed hosts, never internal addresses",
    ),
    ("sum_cap", "Cumulative cap: sum of an argument per session"),
    ("count_cap", "Call count cap per session"),
    (
        "requires",
        "Step order: tool runs only after other tools succeeded",
    ),
    (
        "requires_approval",
        "Approval: a reviewer approves each call (optionally only when an argument passes a comparison)",
    ),
];

/// The add form: kind, tool, argument, comparison and value, or a step guard's
/// prerequisites with what binds them.
pub fn limit_form(
    holder: &LimitHolder,
    add: ServerAction<AddLimit>,
    what_if: WhatIf,
) -> impl IntoView + use<> {
    let error = last_error(add);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    let tool = RwSignal::new(String::new());
    let kind = RwSignal::new("bound".to_owned());
    // Fields that do not apply to the chosen kind are hidden only once JavaScript runs;
    // without it every field shows and the server ignores the ones the kind does not use.
    let enhanced = RwSignal::new(false);
    Effect::new(move || enhanced.set(true));
    let tools: Vec<ToolChoice> = holder.tools.clone();
    let tool_options = tools
        .iter()
        .map(|t| view! { <option value=t.name.clone()>{t.name.clone()}</option> })
        .collect_view();
    let arg_groups = tools
        .iter()
        .map(|t| {
            let name = t.name.clone();
            let hidden = move || {
                let picked = tool.get();
                enhanced.get() && !picked.is_empty() && picked != name
            };
            view! {
                <optgroup label=t.name.clone() hidden=hidden>
                    {t
                        .args
                        .iter()
                        .map(|a| {
                            view! {
                                <option value=a.name.clone()>
                                    {format!("{} ({})", a.name, if a.kind.is_empty() { "any" } else { &a.kind })}
                                </option>
                            }
                        })
                        .collect_view()}
                </optgroup>
            }
        })
        .collect_view();
    let after = tools
        .iter()
        .map(|t| (t.name.clone(), String::new()))
        .collect();
    let needs = move |kinds: &'static [&'static str]| {
        move || enhanced.get() && !kinds.contains(&kind.get().as_str())
    };
    let can_edit = holder.can_edit;
    let (kind_of_holder, slug, revision) = (holder.kind, holder.name.clone(), holder.revision);
    let (heading, button, tool_prompt) = match kind_of_holder {
        "scope" => (
            "Add a guardrail",
            "Add guardrail",
            "Pick a tool of this scope's roles",
        ),
        _ => ("Add a limit", "Add limit", "Pick a tool of this role"),
    };
    let after_picker = checkbox_group(
        "limit[after]",
        "Only after these succeeded",
        after,
        &[],
        err("after"),
    );
    view! {
        <ActionForm action=add attr:class="card form" attr:aria-labelledby="add-limit-heading">
            <CsrfField />
            <fieldset disabled=!can_edit class="plain">
                <h3 id="add-limit-heading">{heading}</h3>
                <FormOutcome
                    action=add
                    fields=&["kind", "tool", "arg", "op", "value", "fleet", "after", "result", "minutes"]
                    saved="Added. The gateway enforces it from the next call."
                />
                <input type="hidden" name="holder" value=kind_of_holder />
                <input type="hidden" name="name" value=slug />
                <input type="hidden" name="revision" value=revision />
                <div class="form-row">
                    <div>
                        <label for="limit-kind">"Kind"</label>
                        <select
                            id="limit-kind"
                            name="limit[kind]"
                            aria-describedby="kind-error"
                            on:change=move |ev| kind.set(event_target_value(&ev))
                        >
                            {KINDS
                                .iter()
                                .map(|(value, label)| view! { <option value=*value>{*label}</option> })
                                .collect_view()}
                        </select>
                        <FieldError id="kind-error" message=err("kind") />
                    </div>
                    <div>
                        <label for="limit-tool">"Tool"</label>
                        <select
                            id="limit-tool"
                            name="limit[tool]"
                            aria-describedby="tool-error"
                            on:change=move |ev| tool.set(event_target_value(&ev))
                        >
                            <option value="">{tool_prompt}</option>
                            {tool_options}
                        </select>
                        <FieldError id="tool-error" message=err("tool") />
                    </div>
                    <div hidden=needs(&["bound", "one_of", "max_length", "no_shell", "path_under", "url_host", "sum_cap", "requires_approval"])>
                        <label for="limit-arg">"Argument"</label>
                        <select id="limit-arg" name="limit[arg]" aria-describedby="arg-error">
                            <option value="">"Pick an argument"</option>
                            {arg_groups}
                        </select>
                        <FieldError id="arg-error" message=err("arg") />
                    </div>
                    <div hidden=needs(&["bound", "requires_approval"])>
                        <label for="limit-op">"Comparison"</label>
                        <select id="limit-op" name="limit[op]" aria-describedby="op-error">
                            <option value="<=">"<= at most"</option>
                            <option value="<">"< less than"</option>
                            <option value=">=">">= at least"</option>
                            <option value=">">"> greater than"</option>
                            <option value="==">"== exactly"</option>
                        </select>
                        <FieldError id="op-error" message=err("op") />
                    </div>
                    <div hidden=needs(&["bound", "one_of", "max_length", "path_under", "url_host", "sum_cap", "count_cap", "requires_approval"])>
                        <label for="limit-value">"Value"</label>
                        <input
                            id="limit-value"
                            name="limit[value]"
                            aria-describedby="value-help value-error"
                        />
                        <p class="help" id="value-help">
                            "A number; for “one of”, values separated by commas; for a path, the directory it must stay under (/srv/files); for URL hosts, the hosts separated by commas (*.example.com allows its subdomains)."
                        </p>
                        <FieldError id="value-error" message=err("value") />
                    </div>
                </div>
                <fieldset
                    class="plain"
                    hidden=needs(&["bound", "one_of", "max_length", "no_shell", "path_under", "url_host"])
                >
                    <legend>"Or apply the check to many tools (a fleet rule)"</legend>
                    <div class="form-row">
                        <div>
                            <label for="limit-fleet-tools">"Tools (a pattern, * for every tool)"</label>
                            <input id="limit-fleet-tools" name="limit[fleet_tools]" placeholder="*" />
                        </div>
                        <div>
                            <label for="limit-fleet-name">"Arguments named like"</label>
                            <input id="limit-fleet-name" name="limit[fleet_name]" placeholder="*url*" />
                        </div>
                        <div>
                            <label for="limit-fleet-format">"Arguments of format"</label>
                            <input id="limit-fleet-format" name="limit[fleet_format]" placeholder="uri" />
                        </div>
                    </div>
                    <p class="help" id="fleet-help">
                        "Filled in, the check reads every argument, at any depth, whose name matches or whose schema declares the format, in every tool the pattern names (tools added later too); the tool and argument above are then not used."
                    </p>
                    <FieldError id="fleet-error" message=err("fleet") />
                </fieldset>
                <div hidden=needs(&["requires_approval"])>
                    <label for="limit-minutes">"Approval valid for (minutes, empty: 15)"</label>
                    <input
                        id="limit-minutes"
                        name="limit[minutes]"
                        inputmode="numeric"
                        class="short"
                        aria-describedby="minutes-help minutes-error"
                    />
                    <p class="help" id="minutes-help">
                        "A held call waits this long for a reviewer, and an approval this long for its run. For approval only when an argument passes a comparison, pick the argument, comparison and value above."
                    </p>
                    <FieldError id="minutes-error" message=err("minutes") />
                </div>
                <div hidden=needs(&["requires"])>
                    {after_picker}
                    <div class="form-row">
                        <div>
                            <label for="limit-same-args">"With the same values of (optional)"</label>
                            <input
                                id="limit-same-args"
                                name="limit[same_args]"
                                placeholder="order_id"
                                aria-describedby="same-args-help"
                            />
                            <p class="help" id="same-args-help">
                                "Arguments, separated by commas, that the earlier call must have had with the same values."
                            </p>
                        </div>
                        <div>
                            <label for="limit-result-pointer">"Whose result field (optional)"</label>
                            <input
                                id="limit-result-pointer"
                                name="limit[result_pointer]"
                                placeholder="/eligible"
                                aria-describedby="result-help result-error"
                            />
                        </div>
                        <div>
                            <label for="limit-result-equals">"Equals"</label>
                            <input
                                id="limit-result-equals"
                                name="limit[result_equals]"
                                placeholder="true"
                                aria-describedby="result-help result-error"
                            />
                        </div>
                    </div>
                    <p class="help" id="result-help">
                        "A JSON Pointer into the earlier call's structured result, and the JSON value it must equal."
                    </p>
                    <FieldError id="result-error" message=err("result") />
                </div>
                <button type="submit" class="primary">
                    {button}
                </button>
                {what_if.button("add", format!("What would adding this {} change", button.to_lowercase().trim_start_matches("add ")))}
            </fieldset>
        </ActionForm>
    }
}
