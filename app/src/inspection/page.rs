//! The inspectors page: what each content inspector guards against and does by default,
//! the rules that change that per tool, role or scope, the secret sources, the external
//! guardrail hooks, and the schema and admission switches. Admins edit; reviewers and viewers read.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_meta::Title;

use crate::components::csrf::CsrfField;
use crate::components::forms::{FieldError, FormOutcome, error_for, last_error};
use crate::components::{ErrorNotice, Loading};

use super::api::{
    AddInspectionHook, AddInspectionRule, HookRow, InspectorsView, MarkSecretSource,
    RemoveInspectionHook, RemoveInspectionRule, RuleRow, SaveInspectionSwitches,
    UnmarkSecretSource, get_inspection,
};
use super::sources::secret_sources;

const RULE_FIELDS: &[&str] = &["inspector", "action", "tool", "role", "scope", "max_bytes"];
const HOOK_FIELDS: &[&str] = &[
    "name",
    "url",
    "stages",
    "tool",
    "role",
    "scope",
    "timeout_ms",
    "on_error",
    "secret_env",
];

/// The actions of the page, one per form.
#[derive(Clone, Copy)]
struct Actions {
    add: ServerAction<AddInspectionRule>,
    remove: ServerAction<RemoveInspectionRule>,
    switches: ServerAction<SaveInspectionSwitches>,
    add_hook: ServerAction<AddInspectionHook>,
    remove_hook: ServerAction<RemoveInspectionHook>,
    mark: ServerAction<MarkSecretSource>,
    unmark: ServerAction<UnmarkSecretSource>,
}

#[component]
pub fn InspectorsPage() -> impl IntoView {
    let add = ServerAction::<AddInspectionRule>::new();
    let remove = ServerAction::<RemoveInspectionRule>::new();
    let switches = ServerAction::<SaveInspectionSwitches>::new();
    let add_hook = ServerAction::<AddInspectionHook>::new();
    let remove_hook = ServerAction::<RemoveInspectionHook>::new();
    let mark = ServerAction::<MarkSecretSource>::new();
    let unmark = ServerAction::<UnmarkSecretSource>::new();
    let actions = Actions {
        add,
        remove,
        switches,
        add_hook,
        remove_hook,
        mark,
        unmark,
    };
    let data = Resource::new(
        move || {
            (
                add.version().get(),
                remove.version().get(),
                switches.version().get(),
                add_hook.version().get(),
                remove_hook.version().get(),
                mark.version().get(),
                unmark.version().get(),
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
                    Ok(view) => inspectors(view, actions).into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

fn inspectors(data: InspectorsView, actions: Actions) -> impl IntoView {
    let Actions {
        add,
        remove,
        switches,
        add_hook,
        remove_hook,
        mark,
        unmark,
    } = actions;
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
                    data.tools.clone(),
                    data.roles.clone(),
                    data.scopes.clone(),
                )
            })}
        {secret_sources(data.secret_sources, data.tools.clone(), editable, mark, unmark)}
        <h2>"External hooks"</h2>
        <p class="muted">
            "A web service asked about a call after the built-in inspectors: it answers allow, deny or (for a result) a modified result. Requests are signed with HMAC-SHA256 using the secret in the named environment variable of the gateway; a hook that does not answer in time blocks the call unless set to allow."
        </p>
        {hooks_table(data.hooks, editable, remove_hook)}
        {editable.then(|| hook_form(add_hook, data.tools, data.roles, data.scopes))}
        <h2>"Schemas, admission and egress"</h2>
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
            <label class="checkbox" for="resolve-names">
                <input
                    type="checkbox"
                    id="resolve-names"
                    name="resolve_names"
                    value="on"
                    checked=data.resolve_names
                    disabled=!editable
                />
                " Resolve the host names of URLs in arguments: one that resolves to an internal address, or does not resolve, is an egress finding"
            </label>
            <p class="muted">
                "Covers a name whose DNS answer is internal without spelling it. It takes egress's action (flag by default; block to fail closed) and up to 2 s per call."
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

fn hooks_table(
    hooks: Vec<HookRow>,
    editable: bool,
    remove: ServerAction<RemoveInspectionHook>,
) -> impl IntoView {
    if hooks.is_empty() {
        return view! { <p class="notice info">"No external hooks."</p> }.into_any();
    }
    let any = |v: Option<String>| v.unwrap_or_else(|| "any".to_owned());
    view! {
        <FormOutcome action=remove fields=&[] saved="Removed." />
        <table class="table">
            <thead>
                <tr>
                    <th scope="col">"Hook"</th>
                    <th scope="col">"URL"</th>
                    <th scope="col">"Stages"</th>
                    <th scope="col">"Tool"</th>
                    <th scope="col">"Role"</th>
                    <th scope="col">"Scope"</th>
                    <th scope="col">"Timeout"</th>
                    <th scope="col">"On error"</th>
                    <th scope="col">"Secret variable"</th>
                    {editable.then(|| view! { <th scope="col">"Remove"</th> })}
                </tr>
            </thead>
            <tbody>
                {hooks
                    .into_iter()
                    .map(|h| {
                        let name = h.name.clone();
                        let secret = if h.secret_set {
                            view! { <span class="badge">"set"</span> }.into_any()
                        } else {
                            view! { <span class="badge warn">"not set: the hook fails"</span> }
                                .into_any()
                        };
                        view! {
                            <tr>
                                <td>
                                    <code>{h.name}</code>
                                </td>
                                <td>
                                    <code>{h.url}</code>
                                </td>
                                <td>{h.stages.join(", ")}</td>
                                <td>{any(h.tool)}</td>
                                <td>{any(h.role)}</td>
                                <td>{any(h.scope)}</td>
                                <td>{format!("{} ms", h.timeout_ms)}</td>
                                <td>
                                    <span class="badge">{h.on_error}</span>
                                </td>
                                <td>
                                    <code>{h.secret_env}</code>
                                    " "
                                    {secret}
                                </td>
                                {editable
                                    .then(|| {
                                        view! {
                                            <td>
                                                <ActionForm action=remove attr:class="inline-form">
                                                    <CsrfField />
                                                    <input type="hidden" name="name" value=name />
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

fn hook_form(
    add: ServerAction<AddInspectionHook>,
    tools: Vec<String>,
    roles: Vec<String>,
    scopes: Vec<String>,
) -> impl IntoView {
    let error = last_error(add);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <ActionForm action=add attr:class="card form" attr:aria-labelledby="hook-heading">
            <CsrfField />
            <h3 id="hook-heading">"Add a hook"</h3>
            <FormOutcome action=add fields=HOOK_FIELDS saved="Added." />
            <div class="form-row">
                <div>
                    <label for="hook-name">"Name"</label>
                    <input id="hook-name" name="name" required aria-describedby="hook-name-error" />
                    <FieldError id="hook-name-error" message=err("name") />
                </div>
                <div>
                    <label for="hook-url">"URL (https://, or http:// to this machine)"</label>
                    <input
                        id="hook-url"
                        name="url"
                        type="url"
                        required
                        aria-describedby="hook-url-error"
                    />
                    <FieldError id="hook-url-error" message=err("url") />
                </div>
                <div>
                    <label for="hook-secret-env">"Secret variable"</label>
                    <input
                        id="hook-secret-env"
                        name="secret_env"
                        required
                        placeholder="SKILLGATE_HOOK_SECRET"
                        aria-describedby="hook-secret-env-error"
                    />
                    <FieldError id="hook-secret-env-error" message=err("secret_env") />
                </div>
            </div>
            <fieldset aria-describedby="hook-stages-error">
                <legend>"Stages"</legend>
                <label class="checkbox" for="hook-stage-arguments">
                    <input
                        type="checkbox"
                        id="hook-stage-arguments"
                        name="stage_arguments"
                        value="on"
                    />
                    " Arguments, before deciding"
                </label>
                <label class="checkbox" for="hook-stage-result">
                    <input
                        type="checkbox"
                        id="hook-stage-result"
                        name="stage_result"
                        value="on"
                        checked
                    />
                    " Result, before the agent's answer"
                </label>
                <FieldError id="hook-stages-error" message=err("stages") />
            </fieldset>
            <div class="form-row">
                <div>
                    <label for="hook-timeout">"Timeout (ms)"</label>
                    <input
                        id="hook-timeout"
                        name="timeout_ms"
                        inputmode="numeric"
                        placeholder="2000"
                        aria-describedby="hook-timeout-error"
                    />
                    <FieldError id="hook-timeout-error" message=err("timeout_ms") />
                </div>
                <div>
                    <label for="hook-on-error">"When it cannot answer"</label>
                    <select id="hook-on-error" name="on_error" aria-describedby="hook-on-error-error">
                        <option value="block">"block the call"</option>
                        <option value="allow">"allow the call (flagged)"</option>
                    </select>
                    <FieldError id="hook-on-error-error" message=err("on_error") />
                </div>
            </div>
            <div class="form-row">
                <div>
                    <label for="hook-tool">"Tool"</label>
                    <select id="hook-tool" name="tool" aria-describedby="hook-tool-error">
                        {options(tools, "any tool")}
                    </select>
                    <FieldError id="hook-tool-error" message=err("tool") />
                </div>
                <div>
                    <label for="hook-role">"Role"</label>
                    <select id="hook-role" name="role" aria-describedby="hook-role-error">
                        {options(roles, "any role")}
                    </select>
                    <FieldError id="hook-role-error" message=err("role") />
                </div>
                <div>
                    <label for="hook-scope">"Scope"</label>
                    <select id="hook-scope" name="scope" aria-describedby="hook-scope-error">
                        {options(scopes, "any scope")}
                    </select>
                    <FieldError id="hook-scope-error" message=err("scope") />
                </div>
            </div>
            <button type="submit" class="primary">
                "Add hook"
            </button>
        </ActionForm>
    }
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
