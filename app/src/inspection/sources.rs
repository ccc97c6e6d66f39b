//! The secret sources section of the inspectors page: the tools whose purpose is to return
//! secrets (a vault), which fields of their results are secrets, and the form to mark one.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;

use crate::components::csrf::CsrfField;
use crate::components::forms::{FieldError, FormOutcome, error_for, last_error};

use super::api::{MarkSecretSource, SecretSourceRow, UnmarkSecretSource};

const FIELDS: &[&str] = &["tool", "fields"];

/// The section: what a mark does, the marked tools, and (for an admin) the form.
pub fn secret_sources(
    sources: Vec<SecretSourceRow>,
    tools: Vec<String>,
    editable: bool,
    mark: ServerAction<MarkSecretSource>,
    unmark: ServerAction<UnmarkSecretSource>,
) -> impl IntoView {
    view! {
        <h2>"Secret sources"</h2>
        <p class="muted">
            "A tool whose purpose is to return secrets (a vault, a credential broker). Its results reach the agent: what "
            <code>"secrets"</code>
            " finds there, and every value of the fields named here whatever it looks like, is flagged in the audit instead of redacted, and remembered, so "
            <code>"secret_flow"</code>
            " still stops it on its way to any other upstream."
        </p>
        {table(sources, editable, unmark)}
        {editable.then(|| form(mark, tools))}
    }
}

fn table(
    sources: Vec<SecretSourceRow>,
    editable: bool,
    unmark: ServerAction<UnmarkSecretSource>,
) -> impl IntoView {
    if sources.is_empty() {
        return view! { <p class="notice info">"No tool is marked as a secret source."</p> }
            .into_any();
    }
    view! {
        <FormOutcome action=unmark fields=&[] saved="Unmarked." />
        <table class="table secret-sources">
            <thead>
                <tr>
                    <th scope="col">"Tool"</th>
                    <th scope="col">"Secret fields"</th>
                    {editable.then(|| view! { <th scope="col">"Unmark"</th> })}
                </tr>
            </thead>
            <tbody>
                {sources
                    .into_iter()
                    .map(|s| {
                        let tool = s.tool.clone();
                        let fields = if s.fields.is_empty() {
                            "what the detectors recognise".to_owned()
                        } else {
                            s.fields.join(", ")
                        };
                        view! {
                            <tr>
                                <td>
                                    <code>{s.tool}</code>
                                </td>
                                <td>{fields}</td>
                                {editable
                                    .then(|| {
                                        view! {
                                            <td>
                                                <ActionForm action=unmark attr:class="inline-form">
                                                    <CsrfField />
                                                    <input type="hidden" name="tool" value=tool />
                                                    <button type="submit" class="secondary">
                                                        "Unmark"
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

fn form(mark: ServerAction<MarkSecretSource>, tools: Vec<String>) -> impl IntoView {
    let error = last_error(mark);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <ActionForm action=mark attr:class="card form" attr:aria-labelledby="source-heading">
            <CsrfField />
            <h3 id="source-heading">"Mark a secret source"</h3>
            <FormOutcome action=mark fields=FIELDS saved="Marked." />
            <div class="form-row">
                <div>
                    <label for="source-tool">"Tool"</label>
                    <select id="source-tool" name="tool" aria-describedby="source-tool-error">
                        {tools
                            .into_iter()
                            .map(|n| view! { <option value=n.clone()>{n.clone()}</option> })
                            .collect_view()}
                    </select>
                    <FieldError id="source-tool-error" message=err("tool") />
                </div>
                <div>
                    <label for="source-fields">"Secret fields (JSON Pointers, optional)"</label>
                    <input
                        id="source-fields"
                        name="fields"
                        placeholder="/value, /secrets/*/password"
                        aria-describedby="source-fields-error"
                    />
                    <FieldError id="source-fields-error" message=err("fields") />
                </div>
            </div>
            <button type="submit" class="primary">
                "Mark as a secret source"
            </button>
        </ActionForm>
    }
}
