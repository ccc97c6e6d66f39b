//! Building blocks of the authoring forms: field errors, the form-wide notice, the
//! description counter and the markdown editor with its preview.
//!
//! Every form is an `ActionForm` over a server function: without JavaScript it is a plain
//! form post that the server answers with a redirect back (an error travels in the URL and
//! the action reads it while rendering); with JavaScript it posts in the background and the
//! page updates in place.

use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos::server_fn::ServerFn;

use crate::components::markdown::PreviewMarkdown;
use crate::shared::ConsoleError;

/// The last result of `action`, if it was an error.
pub fn last_error<S>(action: ServerAction<S>) -> impl Fn() -> Option<ConsoleError> + Copy
where
    S: ServerFn<Error = ConsoleError> + Clone + Send + Sync + 'static,
    S::Output: Clone + Send + Sync + 'static,
{
    move || action.value().get().and_then(|r| r.err())
}

/// The message for `field`, when the last error was about that field.
pub fn error_for(error: Option<ConsoleError>, field: &str) -> Option<String> {
    match error {
        Some(ConsoleError::Field { field: f, message }) if f == field => Some(message),
        _ => None,
    }
}

/// An error shown next to one field; `id` is what the field's `aria-describedby` names.
#[component]
pub fn FieldError(#[prop(into)] id: String, message: Signal<Option<String>>) -> impl IntoView {
    view! {
        <p
            class="field-error"
            id=id
            role=move || message.get().map(|_| "alert")
            hidden=move || message.get().is_none()
        >
            {move || message.get()}
        </p>
    }
}

/// The form's own outcome: errors not tied to a field (a conflict, a refusal), or "Saved."
#[component]
pub fn FormOutcome<S>(
    action: ServerAction<S>,
    /// Field names this form shows next to their fields; errors on others show here.
    fields: &'static [&'static str],
    #[prop(into)] saved: String,
) -> impl IntoView
where
    S: ServerFn<Error = ConsoleError> + Clone + Send + Sync + 'static,
    S::Output: Clone + Send + Sync + 'static,
{
    move || match action.value().get() {
        Some(Err(ConsoleError::Field { field, .. })) if fields.contains(&field.as_str()) => view! {
            <p class="notice error" role="alert">
                "Not saved: fix the field marked below."
            </p>
        }
        .into_any(),
        Some(Err(e)) => view! {
            <p class="notice error" role="alert">
                <strong>"Not saved. "</strong>
                {e.to_string()}
            </p>
        }
        .into_any(),
        Some(Ok(_)) => view! {
            <p class="notice ok" role="status">
                {saved.clone()}
            </p>
        }
        .into_any(),
        None => ().into_any(),
    }
}

/// A description field with a live character count against `max`.
#[component]
pub fn CountedText(
    #[prop(into)] id: String,
    #[prop(into)] name: String,
    #[prop(into)] label: String,
    value: String,
    max: usize,
    error: Signal<Option<String>>,
) -> impl IntoView {
    let text = RwSignal::new(value.clone());
    let count_id = format!("{id}-count");
    let error_id = format!("{id}-error");
    view! {
        <label for=id.clone()>{label}</label>
        <textarea
            id=id
            name=name
            rows="3"
            aria-describedby=format!("{count_id} {error_id}")
            aria-invalid=move || error.get().is_some().to_string()
            on:input=move |ev| text.set(event_target_value(&ev))
        >
            {value}
        </textarea>
        <p
            class=move || {
                if text.with(|t| t.chars().count() > max) { "counter over" } else { "counter" }
            }
            id=count_id
            aria-live="polite"
        >
            {move || format!("{} / {max} characters", text.with(|t| t.chars().count()))}
        </p>
        <FieldError id=error_id message=error />
    }
}

/// A markdown textarea with a preview rendered (and sanitized) on the server: the saved
/// text when the page loads, then live as the admin types when JavaScript runs.
#[component]
pub fn MarkdownEditor(
    #[prop(into)] id: String,
    #[prop(into)] name: String,
    #[prop(into)] label: String,
    value: String,
    /// The server-rendered HTML of `value`.
    html: String,
    error: Signal<Option<String>>,
) -> impl IntoView {
    let preview = ServerAction::<PreviewMarkdown>::new();
    let error_id = format!("{id}-error");
    let preview_id = format!("{id}-preview");
    let shown = move || {
        preview
            .value()
            .get()
            .and_then(Result::ok)
            .unwrap_or_else(|| html.clone())
    };
    view! {
        <div class="md-editor">
            <div>
                <label for=id.clone()>{label}</label>
                <textarea
                    id=id
                    name=name
                    rows="12"
                    class="mono"
                    aria-describedby=error_id.clone()
                    on:input=move |ev| {
                        preview.dispatch(PreviewMarkdown { text: event_target_value(&ev) });
                    }
                >
                    {value}
                </textarea>
                <FieldError id=error_id message=error />
            </div>
            <div>
                <p class="label" id=preview_id.clone()>
                    "Preview"
                </p>
                <div class="prose md-preview" aria-labelledby=preview_id inner_html=shown></div>
            </div>
        </div>
    }
}

/// Checkboxes posting as `name[item]=on`, one per choice (`name` may itself be nested,
/// e.g. `limit[after]`).
pub fn checkbox_group(
    name: &'static str,
    legend: &'static str,
    choices: Vec<(String, String)>,
    checked: &[String],
    error: Signal<Option<String>>,
) -> impl IntoView + use<> {
    // `limit[after]` becomes ids like `limit-after-process_refund`.
    let id_base = name.replace('[', "-").replace(']', "");
    let error_id = format!("{id_base}-error");
    let items = choices
        .into_iter()
        .map(|(value, note)| {
            let is_checked = checked.contains(&value);
            let id = format!("{id_base}-{value}");
            view! {
                <li>
                    <input
                        type="checkbox"
                        id=id.clone()
                        name=format!("{name}[{value}]")
                        value="on"
                        checked=is_checked
                    />
                    <label for=id class="inline">
                        <code>{value}</code>
                        " "
                        <span class="muted">{note}</span>
                    </label>
                </li>
            }
        })
        .collect_view();
    view! {
        <fieldset class="checks" aria-describedby=error_id.clone()>
            <legend>{legend}</legend>
            <ul>{items}</ul>
            <FieldError id=error_id.clone() message=error />
        </fieldset>
    }
}
