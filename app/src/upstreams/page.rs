//! Upstreams: register one (stdio command or streamable HTTP URL), check its health, and
//! sync the tools of every upstream. A tool an upstream stops listing is kept and flagged.

use crate::components::csrf::CsrfField;
use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos::server::ServerAction;
use leptos_meta::Title;

use crate::components::catalog::link_list;
use crate::components::forms::{FieldError, FormOutcome, error_for, last_error};
use crate::components::{ErrorNotice, Loading};
use leptos_router::hooks::use_query_map;

use super::api::{
    AdmitUpstreamIdentity, IdentityView, RegisterUpstream, SyncSummary, SyncUpstreams, UpstreamRow,
    list_upstreams,
};

#[component]
pub fn UpstreamsPage() -> impl IntoView {
    let register = ServerAction::<RegisterUpstream>::new();
    let sync = ServerAction::<SyncUpstreams>::new();
    let admit = ServerAction::<AdmitUpstreamIdentity>::new();
    let query = use_query_map();
    let check = move || query.read().get("check");
    let view_data = Resource::new(
        move || {
            (
                check(),
                register.version().get(),
                sync.version().get(),
                admit.version().get(),
            )
        },
        |(check, ..)| list_upstreams(check),
    );
    view! {
        <Title text="Upstreams" />
        <h1>"Upstreams"</h1>
        <p class="lead">
            "The MCP servers whose tools the gateway executes. A sync lists each one's tools into the catalog; a tool an upstream stops listing is kept and flagged, never silently dropped."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match view_data.await {
                    Ok(data) => {
                        let can_edit = data.can_edit;
                        view! {
                            {if can_edit {
                                view! {
                                    <ActionForm action=sync attr:class="inline-form">
                                        <CsrfField />
                                        <button type="submit" class="secondary">
                                            "Sync tools of every upstream"
                                        </button>
                                    </ActionForm>
                                    <FormOutcome action=sync fields=&[] saved="Synced." />
                                    <FormOutcome
                                        action=admit
                                        fields=&[]
                                        saved="Identity admitted and synced."
                                    />
                                }
                                    .into_any()
                            } else {
                                view! {
                                    <p class="notice info read-only">
                                        "You can read the upstreams and check their health. Registering, syncing and admitting an identity need the admin role."
                                    </p>
                                }
                                    .into_any()
                            }}
                            {data
                                .health
                                .map(|h| view! { <p class="notice info health" role="status">{h}</p> })}
                            {sync_reports(data.last_sync)}
                            {upstream_table(data.rows, can_edit.then_some(admit))}
                            {can_edit.then(|| register_form(register))}
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Registers a new upstream (or replaces one of the same name) and syncs it.
fn register_form(register: ServerAction<RegisterUpstream>) -> impl IntoView {
    let error = last_error(register);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <ActionForm action=register attr:class="card form" attr:aria-labelledby="register-heading">
            <CsrfField />
            <h2 id="register-heading">"Register an upstream"</h2>
            <FormOutcome
                action=register
                fields=&["name", "kind", "command", "url", "ca_bundle", "env", "headers"]
                saved="Registered and synced."
            />
            <div class="form-row">
                <div>
                    <label for="upstream-name">"Name (slug)"</label>
                    <input id="upstream-name" name="name" required aria-describedby="name-error" />
                    <FieldError id="name-error" message=err("name") />
                </div>
                <div>
                    <label for="upstream-kind">"Transport"</label>
                    <select id="upstream-kind" name="kind" aria-describedby="kind-error">
                        <option value="stdio">"stdio: a command the gateway starts"</option>
                        <option value="http">"streamable HTTP: a URL"</option>
                    </select>
                    <FieldError id="kind-error" message=err("kind") />
                </div>
            </div>
            <div class="form-row">
                <div>
                    <label for="upstream-command">"Command (stdio)"</label>
                    <input id="upstream-command" name="command" aria-describedby="command-error" />
                    <FieldError id="command-error" message=err("command") />
                    <label for="upstream-args">"Arguments (stdio, one per line)"</label>
                    <textarea id="upstream-args" name="args" rows="3" class="mono"></textarea>
                </div>
                <div>
                    <label for="upstream-url">"URL (HTTP)"</label>
                    <input
                        id="upstream-url"
                        name="url"
                        placeholder="https://tools.internal/mcp"
                        aria-describedby="url-error"
                    />
                    <FieldError id="url-error" message=err("url") />
                    <label class="checkbox" for="upstream-allow-plaintext">
                        <input
                            type="checkbox"
                            id="upstream-allow-plaintext"
                            name="allow_plaintext"
                            value="on"
                            aria-describedby="allow-plaintext-help"
                        />
                        " Allow plain http:// to a remote host"
                    </label>
                    <p class="muted" id="allow-plaintext-help">
                        "Without TLS anyone on the network path can read the calls and results and rewrite the tools the agent is shown. Loopback URLs need no permission."
                    </p>
                    <label for="upstream-ca-bundle">"CA bundle (HTTPS, PEM, optional)"</label>
                    <textarea
                        id="upstream-ca-bundle"
                        name="ca_bundle"
                        rows="3"
                        class="mono"
                        placeholder="-----BEGIN CERTIFICATE-----"
                        aria-describedby="ca-bundle-error ca-bundle-help"
                    ></textarea>
                    <FieldError id="ca-bundle-error" message=err("ca_bundle") />
                    <p class="muted" id="ca-bundle-help">
                        "Certificates of an internal CA, trusted for this upstream beside the system's roots. Part of the upstream's definition, like its URL: register it again without them and they are removed."
                    </p>
                </div>
            </div>
            <fieldset class="plain credentials">
                <legend>"Credentials: stored, used by the gateway, never shown again"</legend>
                <div class="form-row">
                    <div>
                        <label for="upstream-env">"Environment (stdio, one KEY=value per line)"</label>
                        <textarea
                            id="upstream-env"
                            name="env"
                            rows="3"
                            class="mono"
                            autocomplete="off"
                            aria-describedby="env-error env-help"
                        ></textarea>
                        <FieldError id="env-error" message=err("env") />
                    </div>
                    <div>
                        <label for="upstream-bearer">"Bearer token (HTTP)"</label>
                        <input
                            id="upstream-bearer"
                            name="bearer"
                            type="password"
                            autocomplete="off"
                            aria-describedby="env-help"
                        />
                        <label for="upstream-headers">"Extra headers (HTTP, one Name: value per line)"</label>
                        <textarea
                            id="upstream-headers"
                            name="headers"
                            rows="2"
                            class="mono"
                            autocomplete="off"
                            placeholder="X-Api-Key: …"
                            aria-describedby="headers-error env-help"
                        ></textarea>
                        <FieldError id="headers-error" message=err("headers") />
                    </div>
                </div>
                <p class="muted" id="env-help">
                    "Left empty, a stored environment, token or set of headers is kept. Entered, it replaces the stored one. Only names are shown after saving."
                </p>
                <label class="checkbox" for="upstream-clear">
                    <input type="checkbox" id="upstream-clear" name="clear_credentials" value="on" />
                    " Remove the stored credentials first"
                </label>
            </fieldset>
            <button type="submit" class="primary">
                "Register and sync"
            </button>
        </ActionForm>
    }
}

fn sync_reports(reports: Vec<SyncSummary>) -> impl IntoView {
    (!reports.is_empty()).then(|| view! {
        <ul class="sync-reports">
            {reports
                .into_iter()
                .map(|r| {
                    let text = match &r.error {
                        Some(e) => format!("{}: sync failed, its tools are unchanged: {e}", r.upstream),
                        None => format!("{}: {} tools listed", r.upstream, r.tools),
                    };
                    view! {
                        <li class=if r.error.is_some() { "notice error" } else { "notice ok" }>
                            {text}
                            {(!r.missing.is_empty())
                                .then(|| {
                                    view! {
                                        <p>
                                            <span class="badge danger">"no longer listed"</span>
                                            " kept with their last definition: "
                                            {r.missing.join(", ")}
                                        </p>
                                    }
                                })}
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    })
}

/// Which credentials are stored, never what they are.
fn credentials_text(row: &UpstreamRow) -> String {
    let mut parts = Vec::new();
    if !row.env_keys.is_empty() {
        parts.push(format!("env {}", row.env_keys.join(", ")));
    }
    if row.bearer {
        parts.push("bearer token stored".to_owned());
    }
    if !row.header_names.is_empty() {
        parts.push(format!("headers {}", row.header_names.join(", ")));
    }
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The pinned identity and its last upgrade; while quarantined, the offered one beside it
/// and the admit form.
fn identity_cell(
    upstream: String,
    identity: Option<IdentityView>,
    admit: Option<ServerAction<AdmitUpstreamIdentity>>,
) -> impl IntoView {
    let Some(identity) = identity else {
        return view! { <span class="muted">"not synced yet"</span> }.into_any();
    };
    let quarantined = identity
        .quarantined_since
        .clone()
        .zip(identity.offered.clone());
    view! {
        <p class="identity-pinned">
            "Pinned: " <code>{identity.pinned}</code>
            <span class="muted">" since " {identity.pinned_at}</span>
        </p>
        {identity
            .upgraded
            .map(|(from, at)| {
                view! {
                    <p class="identity-upgraded muted">
                        "Upgraded from version " <code>{from}</code> " at " {at}
                        ": same key and name, so it was pinned, not quarantined."
                    </p>
                }
            })}
        {quarantined
            .map(|(since, offered)| {
                let digest = identity.offered_digest.clone().unwrap_or_default();
                view! {
                    <p class="identity-offered">
                        <span
                            class="badge danger"
                            title="Its tools' calls are refused with UPSTREAM_QUARANTINED"
                        >
                            "quarantined"
                        </span>
                        " since " {since} ". Offered: " <code>{offered}</code>
                    </p>
                    {admit
                        .map(|admit| {
                            view! {
                                <ActionForm action=admit attr:class="inline-form">
                                    <CsrfField />
                                    <input type="hidden" name="upstream" value=upstream.clone() />
                                    <input type="hidden" name="offered" value=digest />
                                    <button type="submit" class="danger">
                                        "Admit the offered identity"
                                    </button>
                                </ActionForm>
                            }
                        })}
                }
            })}
    }
    .into_any()
}

/// The upstreams; `admit` is the admit action of a caller who may admit an identity.
fn upstream_table(
    rows: Vec<UpstreamRow>,
    admit: Option<ServerAction<AdmitUpstreamIdentity>>,
) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="notice info">"No upstreams yet."</p> }.into_any();
    }
    view! {
        <table class="table">
            <thead>
                <tr>
                    <th scope="col">"Upstream"</th>
                    <th scope="col">"Transport"</th>
                    <th scope="col">"Command or URL"</th>
                    <th scope="col">"Credentials"</th>
                    <th scope="col">"Identity"</th>
                    <th scope="col">"Tools"</th>
                    <th scope="col">"Health"</th>
                </tr>
            </thead>
            <tbody>
                {rows
                    .into_iter()
                    .map(|u| {
                        let label = format!("Check health of {}", u.name);
                        let href = format!("/upstreams?check={}", u.name);
                        let credentials = credentials_text(&u);
                        view! {
                            <tr>
                                <td>
                                    <code>{u.name.clone()}</code>
                                </td>
                                <td>{u.kind}</td>
                                <td>
                                    <code>{u.target}</code>
                                    {u.ca_bundle.then(|| view! { <p class="muted">"trusts its own CA bundle"</p> })}
                                    {u
                                        .allow_plaintext
                                        .then(|| {
                                            view! {
                                                <p>
                                                    <span
                                                        class="badge warn"
                                                        title="Dialled without TLS: calls, results and tool definitions can be read and changed on the network path"
                                                    >
                                                        "plaintext allowed"
                                                    </span>
                                                </p>
                                            }
                                        })}
                                </td>
                                <td class="credentials-cell">{credentials}</td>
                                <td class="identity-cell">
                                    {identity_cell(u.name.clone(), u.identity, admit)}
                                </td>
                                <td>{link_list("/tools", u.tools)}</td>
                                <td>
                                    <a href=href aria-label=label>
                                        "Check"
                                    </a>
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
