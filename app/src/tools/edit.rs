//! Tool authoring: which arguments the audit stores as a digest only, and admitting a
//! quarantined tool's offered definition.

use crate::components::csrf::CsrfField;
use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_router::components::A;

use super::api::SetSensitive;
use super::read::ArgumentRow;
use crate::components::forms::{FormOutcome, checkbox_group};
use crate::tools::pins::AdmitTool;

/// Checkboxes for the tool's arguments; ticked ones are stored as a SHA-256 digest in the
/// audit log instead of in clear. The server refuses anyone but an admin.
#[component]
pub fn SensitiveArgsForm(tool: String, arguments: Vec<ArgumentRow>) -> impl IntoView {
    let save = ServerAction::<SetSensitive>::new();
    let sensitive: Vec<String> = arguments
        .iter()
        .filter(|a| a.sensitive)
        .map(|a| a.name.clone())
        .collect();
    let picker = checkbox_group(
        "args",
        "Sensitive arguments (audited as a digest)",
        arguments.into_iter().map(|a| (a.name, a.kind)).collect(),
        &sensitive,
        Signal::derive(|| None),
    );
    let history = format!("/changes/tool/{tool}");
    view! {
        <section aria-labelledby="tool-sensitive">
            <h2 id="tool-sensitive">"Mark arguments sensitive"</h2>
            <p class="muted">
                <A href=history>"Change log"</A>
            </p>
            <ActionForm action=save attr:class="card form">
                <CsrfField />
                <FormOutcome action=save fields=&[] saved="Saved: later audit events store these as digests." />
                <input type="hidden" name="tool" value=tool />
                {picker}
                <button type="submit" class="primary">
                    "Save sensitive arguments"
                </button>
            </ActionForm>
        </section>
    }
}

/// Admits the offered definition the page shows: the form sends its hash back, so an offer
/// that changed since the page was rendered is refused, not admitted unseen. Keeping the
/// tool blocked is not admitting it. The server refuses anyone but an admin.
#[component]
pub fn AdmitForm(
    tool: String,
    offered_pin: String,
    action: ServerAction<AdmitTool>,
) -> impl IntoView {
    let history = format!("/changes/tool/{tool}");
    view! {
        <ActionForm action=action attr:class="card form" attr:aria-label="Admit the offered definition">
            <CsrfField />
            <input type="hidden" name="tool" value=tool />
            <input type="hidden" name="offered_pin" value=offered_pin />
            <p>
                "Admitting pins the offered definition: calls pass again, and agents read it when they learn a role that grants the tool. To keep it blocked, do nothing. "
                <A href=history>"Change log"</A>
            </p>
            <button type="submit" class="primary">
                "Admit the offered definition"
            </button>
        </ActionForm>
    }
}
