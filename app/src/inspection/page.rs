//! The inspectors page: what each content inspector guards against and does by default,
//! the rules that change that per tool, role or scope, and the schema and admission
//! switches. Admins edit; reviewers and viewers read.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_meta::Title;

use crate::components::csrf::CsrfField;
use crate::components::forms::{FieldError, FormOutcome, error_for, last_error};
use crate::components::{ErrorNotice, Loading};

use super::api::{
    AddInspectionRule, InspectorsView, RemoveInspectionRule, RuleRow, SaveInspectionSwitches,
    get_inspection,
};

const RULE_FIELDS: &[&str] = &["inspector", "action", "tool", "role", "scope", "max_bytes"];

#[component]
pub fn InspectorsPage() -> impl IntoView {
    let add = ServerAction::<AddInspectionRule>::new();
    let remove = ServerAction::<RemoveInspectionRule>::new();
    let switches = ServerAction::<SaveInspectionSwitches>::new();
    let data = Resource::new(
        move || {
            (
                add.version().get(),
                remove.version().get(),
                switches.version().get(),
            )
        },
        |_| get_inspection(),
    );
    view! {
        <Title text="Inspectors" />
        <h1>"Inspectors"</h1>
        <p class="lead">
            "What the gateway looks for in a governed call's arguments and results, and what it does with a finding: flag it in the audit, redact it, or block the call. A rule changes that for one tool, role or scope; the most specific rule wins."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(view) => inspectors(view, add, remove, switches).into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

fn inspectors(
    data: InspectorsView,
    add: ServerAction<AddInspectionRule>,
    remove: ServerAction<RemoveInspectionRule>,
    switches: ServerAction<SaveInspectionSwitches>,
) -> impl IntoView {
    let editable = data.can_edit && data.managed_by.is_none();
    let names: Vec<String> = data.inspectors.iter().map(|i| i.name.clone()).collect();
    let managed = data.managed_by.clone().map(|file| {
        view! {
            <p class="notice info">
                "The catalog is managed as code in " <code>{file}</code>
                ": change its " <code>"inspection"</code> " section there."
            </p>
        }
    });
    view! {
        {managed}
        <h2>"Default per inspector"</h2>
        <table class="table">
            <thead>
                <tr>
                    <th scope="col">"Inspector"</th>
                    <th scope="col">"Guards against"</th>
                    <th scope="col">"Action when no rule selects the call"</th>
                </tr>
            </thead>
            <tbody>
                {data
                    .inspectors
                    .into_iter()
                    .map(|i| {
                        let note = (i.action != i.built_in)
                            .then(|| format!(" (built-in: {})", i.built_in));
                        view! {
                            <tr>
                                <td>
                                    <code>{i.name}</code>
                                </td>
                                <td>{i.threat}</td>
                                <td>
                                    <span class="badge">{i.action}</span>
                                    {note}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        <h2>"Rules"</h2>
        {rules_table(data.rules, editable, remove)}
        {editable
            .then(|| {
                rule_form(
                    add,
                    names,
                    data.actions,
                    data.tools,
                    data.roles,
                    data.scopes,
                )
            })}
        <h2>"Schemas and admission"</h2>
        <ActionForm action=switches attr:class="card form">
            <CsrfField />
            <FormOutcome action=switches fields=&[] saved="Saved." />
            <label class="checkbox" for="close-open-objects">
                <input
                    type="checkbox"
                    id="close-open-objects"
                    name="close_open_objects"
                    value="on"
                    checked=data.close_open_objects
                    disabled=!editable
                />
                " Refuse arguments a tool's schema does not declare, even where it leaves its objects open"
            </label>
            <p class="muted">
                "Covers an agent smuggling extra fields a lenient upstream acts on."
            </p>
            <label class="checkbox" for="validate-formats">
                <input
                    type="checkbox"
                    id="validate-formats"
                    name="validate_formats"
                    value="on"
                    checked=data.validate_formats
                    disabled=!editable
                />
                " Check each argument's format (date-time, email, uri, uuid, …)"
            </label>
            <p class="muted">
                "Covers malformed values (an address that is a command, a URL that is not one) reaching the upstream."
            </p>
            <label class="checkbox" for="refuse-admission">
                <input
                    type="checkbox"
                    id="refuse-admission"
                    name="refuse_admission_with_findings"
                    value="on"
                    checked=data.refuse_admission_with_findings
                    disabled=!editable
                />
                " Refuse to admit a tool whose offered definition has findings"
            </label>
            <p class="muted">
                "Covers tool poisoning: hidden characters, instructions aimed at the model or a name shadowing another tool in a definition."
            </p>
            {editable
                .then(|| {
                    view! {
                        <button type="submit" class="primary">
                            "Save"
                        </button>
                    }
                })}
        </ActionForm>
    }
}

fn rules_table(
    rules: Vec<RuleRow>,
    editable: bool,
    remove: ServerAction<RemoveInspectionRule>,
) -> impl IntoView {
    if rules.is_empty() {
        return view! {
            <p class="notice info">"No rules: every inspector takes its default above."</p>
        }
        .into_any();
    }
    let any = |v: Option<String>| v.unwrap_or_else(|| "any".to_owned());
    view! {
        <FormOutcome action=remove fields=&[] saved="Removed." />
        <table class="table">
            <thead>
                <tr>
                    <th scope="col">"Inspector"</th>
                    <th scope="col">"Action"</th>
                    <th scope="col">"Tool"</th>
                    <th scope="col">"Role"</th>
                    <th scope="col">"Scope"</th>
                    <th scope="col">"Max bytes"</th>
                    {editable.then(|| view! { <th scope="col">"Remove"</th> })}
                </tr>
            </thead>
            <tbody>
                {rules
                    .into_iter()
                    .map(|r| {
                        let key = r.key.clone();
                        view! {
                            <tr>
                                <td>
                                    <code>{r.inspector}</code>
                                </td>
                                <td>
                                    <span class="badge">{r.action}</span>
                                </td>
                                <td>{any(r.tool)}</td>
                                <td>{any(r.role)}</td>
                                <td>{any(r.scope)}</td>
                                <td>{r.max_bytes.map(|m| m.to_string()).unwrap_or_default()}</td>
                                {editable
                                    .then(|| {
                                        view! {
                                            <td>
                                                <ActionForm action=remove attr:class="inline-form">
                                                    <CsrfField />
                                                    <input type="hidden" name="key" value=key />
                                                    <button type="submit" class="secondary">
                                                        "Remove"
                                                    </button>
                                                </ActionForm>
                                            </td>
                                        }
                                    })}
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// `<option>`s for `names`, after an "any" option with an empty value.
fn options(names: Vec<String>, any: &'static str) -> impl IntoView {
    view! {
        <option value="">{any}</option>
        {names
            .into_iter()
            .map(|n| view! { <option value=n.clone()>{n.clone()}</option> })
            .collect_view()}
    }
}

fn rule_form(
    add: ServerAction<AddInspectionRule>,
    inspectors: Vec<String>,
    actions: Vec<String>,
    tools: Vec<String>,
    roles: Vec<String>,
    scopes: Vec<String>,
) -> impl IntoView {
    let error = last_error(add);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <ActionForm action=add attr:class="card form" attr:aria-labelledby="rule-heading">
            <CsrfField />
            <h3 id="rule-heading">"Add a rule"</h3>
            <FormOutcome action=add fields=RULE_FIELDS saved="Added." />
            <div class="form-row">
                <div>
                    <label for="rule-inspector">"Inspector"</label>
                    <select id="rule-inspector" name="inspector" aria-describedby="inspector-error">
                        {inspectors
                            .into_iter()
                            .map(|n| view! { <option value=n.clone()>{n.clone()}</option> })
                            .collect_view()}
                    </select>
                    <FieldError id="inspector-error" message=err("inspector") />
                </div>
                <div>
                    <label for="rule-action">"Action"</label>
                    <select id="rule-action" name="action" aria-describedby="action-error">
                        {actions
                            .into_iter()
                            .map(|a| view! { <option value=a.clone()>{a.clone()}</option> })
                            .collect_view()}
                    </select>
                    <FieldError id="action-error" message=err("action") />
                </div>
                <div>
                    <label for="rule-max-bytes">"Max bytes (result_size only)"</label>
                    <input
                        id="rule-max-bytes"
                        name="max_bytes"
                        inputmode="numeric"
                        aria-describedby="max-bytes-error"
                    />
                    <FieldError id="max-bytes-error" message=err("max_bytes") />
                </div>
            </div>
            <div class="form-row">
                <div>
                    <label for="rule-tool">"Tool"</label>
                    <select id="rule-tool" name="tool" aria-describedby="tool-error">
                        {options(tools, "any tool")}
                    </select>
                    <FieldError id="tool-error" message=err("tool") />
                </div>
                <div>
                    <label for="rule-role">"Role"</label>
                    <select id="rule-role" name="role" aria-describedby="role-error">
                        {options(roles, "any role")}
                    </select>
                    <FieldError id="role-error" message=err("role") />
                </div>
                <div>
                    <label for="rule-scope">"Scope"</label>
                    <select id="rule-scope" name="scope" aria-describedby="scope-error">
                        {options(scopes, "any scope")}
                    </select>
                    <FieldError id="scope-error" message=err("scope") />
                </div>
            </div>
            <button type="submit" class="primary">
                "Add rule"
            </button>
        </ActionForm>
    }
}
