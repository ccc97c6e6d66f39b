//! A quarantined tool's admission: the server function that admits the offered definition
//! the admin reviewed (admins only; checked on the server), and the inspection findings on
//! that definition shown beside the admit button.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::ConsoleError;

/// One inspection finding on an offered definition, as the diff page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefinitionFindingRow {
    /// `hidden_characters`, `model_instruction`, `shadows_tool`, …
    pub kind: String,
    /// Where in the definition: `name`, `description`, `inputSchema/properties/x/description`.
    pub field: String,
    pub detail: String,
}

/// Admits `tool` if its upstream still offers the definition hashing to `offered_pin` (what
/// the page showed); answers the new pin.
#[server(prefix = "/console/api", endpoint = "admit_tool")]
pub async fn admit_tool(tool: String, offered_pin: String) -> Result<String, ConsoleError> {
    use skillgate_core::users::ConsoleRole;
    let user = crate::shared::ssr::require(ConsoleRole::Admin).await?;
    if offered_pin.len() != 64 || !offered_pin.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ConsoleError::Invalid(
            "The form names no offered definition (a SHA-256 in hex): reload the tool page and review it again.".into(),
        ));
    }
    crate::shared::ssr::context()
        .authoring
        .admit_tool(&user.name, &tool, &offered_pin.to_ascii_lowercase())
        .await
        .map_err(crate::catalog::authoring::authoring_error)
}

/// The findings on the definition `tool`'s upstream offers while it is quarantined, and
/// whether the inspection policy refuses to admit it while any is open.
#[cfg(feature = "ssr")]
pub(crate) fn offered_findings(
    findings: Vec<skillgate_core::inspect::DefinitionFinding>,
) -> (Vec<DefinitionFindingRow>, bool) {
    let refuses = crate::shared::ssr::context()
        .authoring
        .live()
        .catalog()
        .inspection
        .definitions
        .refuse_admission_with_findings;
    let rows = findings
        .into_iter()
        .map(|f| DefinitionFindingRow {
            kind: f.kind.to_owned(),
            field: f.field,
            detail: f.detail,
        })
        .collect();
    (rows, refuses)
}

/// The findings beside the admit button: what inspecting the offered definition found, and
/// whether admitting it is refused until the upstream offers one without.
#[component]
pub fn DefinitionFindings(findings: Vec<DefinitionFindingRow>, refuses: bool) -> impl IntoView {
    if findings.is_empty() {
        return view! {
            <p class="muted" id="definition-findings">
                "Inspecting the offered definition found nothing: no hidden characters, instructions aimed at the model or shadowed names."
            </p>
        }
        .into_any();
    }
    let consequence = if refuses {
        "The inspection policy refuses to admit a definition with findings: admitting it is refused until its upstream offers one without."
    } else {
        "Admitting it records these findings in its change log."
    };
    view! {
        <section class="notice error" id="definition-findings" aria-labelledby="definition-findings-heading">
            <h3 id="definition-findings-heading">
                {format!("Inspection findings on the offered definition ({})", findings.len())}
            </h3>
            <table class="table">
                <thead>
                    <tr>
                        <th scope="col">"Finding"</th>
                        <th scope="col">"Field"</th>
                        <th scope="col">"Detail"</th>
                    </tr>
                </thead>
                <tbody>
                    {findings
                        .into_iter()
                        .map(|f| {
                            view! {
                                <tr>
                                    <td>
                                        <span class="badge warn">{f.kind}</span>
                                    </td>
                                    <td>
                                        <code>{f.field}</code>
                                    </td>
                                    <td>{f.detail}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
            <p>{consequence}</p>
        </section>
    }
    .into_any()
}
