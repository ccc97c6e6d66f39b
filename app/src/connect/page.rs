//! Connect an agent: ready-to-paste configurations of real MCP clients for an agent key or
//! a scope, and the admin's **try it** panel (`init_skilder`, `learn`, `call_tool` through
//! the gateway, as an agent of the scope would, audited as the admin's).
//!
//! Choosing a key or scope is a GET form, so it works without JavaScript. The try-it forms
//! are `ActionForm`s: with JavaScript they post in the background and the transcript
//! updates in place; without it, the browser comes back to this page, which reads the
//! transcript the server kept in the console session. The governance session travels in
//! a hidden field of the learn and call forms.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;

use crate::components::csrf::CsrfField;
use crate::components::forms::{FieldError, error_for, last_error};
use crate::components::{ErrorNotice, Loading};
use crate::connect::api::{
    ClientConfig, ConnectView, KEY_PLACEHOLDER, Transcript, TryCall, TryInit, TryLearn, TryStep,
    connect_overview,
};
use crate::shared::ConsoleError;

#[component]
pub fn ConnectPage() -> impl IntoView {
    let query = use_query_map();
    let param =
        move |name: &'static str| move || query.read().get(name).filter(|v| !v.trim().is_empty());
    let (key, scope) = (param("key"), param("scope"));
    let overview = Resource::new(move || (key(), scope()), |(k, s)| connect_overview(k, s));
    // Created here, outside the Suspense: an effect created inside a resolved Suspend
    // during hydration never saw the actions' results, so the transcript never updated.
    let tries = Tries::new();
    view! {
        <Title text="Connect an agent" />
        <h1>"Connect an agent"</h1>
        <p class="lead">
            "Agents reach Skillgate at one MCP endpoint with an agent key. Choose a key or a scope for configurations you can paste into an MCP client; admins can try the calls here, as an agent of that scope would make them."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match overview.await {
                    Ok(o) => overview_view(o, tries).into_any(),
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Connecting without a key: clients that follow the MCP authorization specification need
/// only the URL, and the person signs in here.
fn oauth_view(mcp_url: &str) -> impl IntoView {
    let config = format!(
        "{{\"mcpServers\": {{\"skillgate\": {{\"type\": \"http\", \"url\": \"{mcp_url}\"}}}}}}"
    );
    view! {
        <section aria-labelledby="connect-oauth">
            <h2 id="connect-oauth">"Or just the URL, with OAuth sign-in"</h2>
            <p>
                "MCP clients that follow the specification's authorization (Claude, VS Code, Cursor, the official SDKs) need only the endpoint's URL: they send you to this console to sign in, and you pick one of the scopes an admin allowed you. The client then acts as you in that scope; "
                <A href="/connected">"Connected clients"</A> " lists and revokes what you signed in to."
            </p>
            <pre class="schema"><code id="connect-oauth-config">{config}</code></pre>
        </section>
    }
}

/// The try-it forms' actions and the newest transcript one of them returned.
#[derive(Clone, Copy)]
struct Tries {
    init: ServerAction<TryInit>,
    learn: ServerAction<TryLearn>,
    call: ServerAction<TryCall>,
    latest: RwSignal<Option<Transcript>>,
}

impl Tries {
    fn new() -> Self {
        let tries = Self {
            init: ServerAction::new(),
            learn: ServerAction::new(),
            call: ServerAction::new(),
            latest: RwSignal::new(None),
        };
        Effect::new(move || {
            if let Some(Ok(t)) = tries.init.value().get() {
                tries.latest.set(Some(t));
            }
        });
        Effect::new(move || {
            if let Some(Ok(t)) = tries.learn.value().get() {
                tries.latest.set(Some(t));
            }
        });
        Effect::new(move || {
            if let Some(Ok(t)) = tries.call.value().get() {
                tries.latest.set(Some(t));
            }
        });
        tries
    }
}

fn overview_view(o: ConnectView, tries: Tries) -> impl IntoView {
    let chosen_key = o
        .target
        .as_ref()
        .and_then(|t| t.key.as_ref().map(|k| k.name.clone()));
    let chosen_scope = o.target.as_ref().map(|t| t.scope.clone());
    let for_whom = o.target.as_ref().map(|t| match &t.key {
        Some(k) => view! {
            "For the agent key " <strong>{k.name.clone()}</strong> " (scope "
            <code>{t.scope.clone()}</code> ", key starting " <code>{format!("{}…", k.prefix)}</code> ")."
        }
        .into_any(),
        None => view! { "For an agent key of scope " <code>{t.scope.clone()}</code> "." }.into_any(),
    });
    let secret_source = o.target.as_ref().map(|t| {
        let command = format!(
            "skillgate key create --name my-agent --scope {}",
            t.scope
        );
        let which = match &t.key {
            Some(k) => format!(
                "Paste the key {} where the configuration says {KEY_PLACEHOLDER}. ",
                k.name
            ),
            None => format!("Paste a key of this scope where the configuration says {KEY_PLACEHOLDER}. "),
        };
        view! {
            <p class="notice info secret-source" role="note">
                {which}
                "Skillgate stores keys hashed and shows each one only once, when it is created; if you no longer have it, create a new one on "
                <A href=format!("/scopes/{}", t.scope)>"the scope's page"</A>
                " (Create an agent key) or with " <code>{command}</code> "."
            </p>
        }
    });
    let default_scope = o
        .transcript
        .as_ref()
        .map(|t| t.scope.clone())
        .or_else(|| chosen_scope.clone())
        .unwrap_or_default();
    view! {
        {chooser(&o, chosen_key, chosen_scope)}
        {o.problem.clone().map(|p| view! { <p class="notice error" role="alert">{p}</p> })}
        {o.oauth.then(|| oauth_view(&o.mcp_url))}
        <section aria-labelledby="connect-configs">
            <h2 id="connect-configs">"Client configurations"</h2>
            <p>
                "The MCP endpoint: " <code class="mcp-url">{o.mcp_url.clone()}</code>
                " (streamable HTTP, " <code>"Authorization: Bearer …"</code> ")."
            </p>
            <p>{for_whom}</p>
            {secret_source}
            {o.configs.into_iter().map(config_view).collect_view()}
        </section>
        <section aria-labelledby="try-it">
            <h2 id="try-it">"Try it"</h2>
            {if o.can_try {
                try_panel(tries, o.transcript, o.scopes, default_scope, o.learn_paths).into_any()
            } else {
                view! {
                    <p class="notice info" role="status">
                        "Trying calls needs the admin console role: they run for real, through the gateway, and are audited as yours."
                    </p>
                }
                    .into_any()
            }}
        </section>
    }
}

/// Two GET forms: by key, or by scope.
fn chooser(
    o: &ConnectView,
    chosen_key: Option<String>,
    chosen_scope: Option<String>,
) -> impl IntoView + use<> {
    let keys = o
        .keys
        .iter()
        .map(|k| {
            let selected = chosen_key.as_deref() == Some(k.name.as_str());
            let label = if k.status == "active" {
                format!("{} (scope {}, {}…)", k.name, k.scope, k.prefix)
            } else {
                format!("{} (scope {}, {})", k.name, k.scope, k.status)
            };
            view! { <option value=k.name.clone() selected=selected>{label}</option> }
        })
        .collect_view();
    let scope_selected = chosen_key.is_none();
    let scopes = o
        .scopes
        .iter()
        .map(|s| {
            let selected = scope_selected && chosen_scope.as_deref() == Some(s.as_str());
            view! { <option value=s.clone() selected=selected>{s.clone()}</option> }
        })
        .collect_view();
    let no_keys = o.keys.is_empty();
    view! {
        <div class="detail-grid connect-choose">
            <form method="get" action="/connect" class="card form" aria-label="Choose an agent key">
                <label for="connect-key">"Agent key"</label>
                <select id="connect-key" name="key" disabled=no_keys>{keys}</select>
                <button type="submit" disabled=no_keys>"Show configurations"</button>
            </form>
            <form method="get" action="/connect" class="card form" aria-label="Choose a scope">
                <label for="connect-scope">"Scope"</label>
                <select id="connect-scope" name="scope">{scopes}</select>
                <button type="submit">"Show configurations"</button>
            </form>
        </div>
    }
}

fn config_view(c: ClientConfig) -> impl IntoView {
    let heading = format!("config-{}", c.id);
    view! {
        <section class="card client-config" id=c.id.clone() aria-labelledby=heading.clone()>
            <h3 id=heading.clone()>{c.client}</h3>
            <p class="muted">"Where: " {c.place}</p>
            <pre class="schema"><code>{c.text}</code></pre>
            <p>{c.note}</p>
        </section>
    }
}

fn try_panel(
    tries: Tries,
    initial: Option<Transcript>,
    scopes: Vec<String>,
    default_scope: String,
    learn_paths: Vec<String>,
) -> impl IntoView {
    let Tries {
        init,
        learn,
        call,
        latest,
    } = tries;
    // The newest result JavaScript posted, else the one the server kept for a page
    // without JavaScript.
    let initial = StoredValue::new(initial);
    let transcript = move || latest.get().or_else(|| initial.get_value());
    let session = move || transcript().and_then(|t| t.session_id.clone());
    let scope_now = move || {
        transcript()
            .map(|t| t.scope.clone())
            .unwrap_or_else(|| default_scope.clone())
    };
    let scope_options = scopes
        .into_iter()
        .map(|s| {
            let selected = scope_now() == s;
            view! { <option value=s.clone() selected=selected>{s.clone()}</option> }
        })
        .collect_view();
    let paths = learn_paths
        .into_iter()
        .map(|p| view! { <option value=p></option> })
        .collect_view();
    let init_error = last_error(init);
    let learn_error = last_error(learn);
    let call_error = last_error(call);
    let shown = move |error: Option<ConsoleError>, field: &str| error_for(error, field);
    view! {
        <p>
            "Each step runs through the gateway exactly as an agent of the scope would call it: policy, limits, holds, the upstream call and the audit log. The audit names you ("
            <code>"console:<your name>"</code>
            ") as the caller; the session's timeline shows every step."
        </p>
        <ActionForm action=init attr:class="card form try-form" attr:aria-label="Run init_skilder">
            <CsrfField />
            <label for="try-scope">"Scope"</label>
            <select id="try-scope" name="scope">{scope_options}</select>
            <FieldError id="try-scope-error" message=Signal::derive(move || shown(init_error(), "scope")) />
            <label for="try-task">"Task summary (optional)"</label>
            <input id="try-task" name="task_summary" placeholder="Refund a late order" />
            <button type="submit" class="primary">"1. Run init_skilder"</button>
            {move || other_error(init_error(), &["scope"])}
        </ActionForm>
        {move || {
            session()
                .map(|sid| {
                    let scope = transcript().map(|t| t.scope.clone()).unwrap_or_default();
                    let (learn_sid, call_sid) = (sid.clone(), sid.clone());
                    let (learn_scope, call_scope) = (scope.clone(), scope);
                    view! {
                        <p class="try-session">
                            "Session " <A href=format!("/sessions/{sid}")><code>{sid.clone()}</code></A>
                            ", carried in the forms below."
                        </p>
                        <ActionForm action=learn attr:class="card form try-form" attr:aria-label="Run learn">
                            <CsrfField />
                            <input type="hidden" name="scope" value=learn_scope />
                            <input type="hidden" name="session_id" value=learn_sid />
                            <label for="try-path">"Learn path"</label>
                            <input id="try-path" name="path" list="try-paths" required placeholder="/roles/<role>" />
                            <FieldError id="try-path-error" message=Signal::derive(move || shown(learn_error(), "path")) />
                            <button type="submit" class="primary">"2. Run learn"</button>
                            {move || other_error(learn_error(), &["path"])}
                        </ActionForm>
                        <ActionForm action=call attr:class="card form try-form" attr:aria-label="Run call_tool">
                            <CsrfField />
                            <input type="hidden" name="scope" value=call_scope />
                            <input type="hidden" name="session_id" value=call_sid />
                            <label for="try-tool">"Tool"</label>
                            <input id="try-tool" name="tool" required placeholder="lookup_customer" />
                            <FieldError id="try-tool-error" message=Signal::derive(move || shown(call_error(), "tool")) />
                            <label for="try-arguments">"Arguments (JSON)"</label>
                            <textarea id="try-arguments" name="arguments" rows="4" class="mono" placeholder="{\"customer_id\": \"C-1001\"}"></textarea>
                            <FieldError id="try-arguments-error" message=Signal::derive(move || shown(call_error(), "arguments")) />
                            <button type="submit" class="primary">"3. Run call_tool"</button>
                            {move || other_error(call_error(), &["tool", "arguments"])}
                        </ActionForm>
                    }
                })
        }}
        <datalist id="try-paths">{paths}</datalist>
        {move || transcript().map(transcript_view)}
    }
}

/// A refusal that belongs to no field of the form (a role, an internal error).
fn other_error(error: Option<ConsoleError>, fields: &[&str]) -> Option<impl IntoView + use<>> {
    match error {
        Some(ConsoleError::Field { field, .. }) if fields.contains(&field.as_str()) => None,
        Some(e) => Some(view! {
            <p class="notice error" role="alert"><strong>"Not run. "</strong>{e.to_string()}</p>
        }),
        None => None,
    }
}

fn transcript_view(t: Transcript) -> impl IntoView {
    view! {
        <section class="try-transcript" aria-labelledby="try-transcript">
            <h3 id="try-transcript">
                "What the agent got (scope " <code>{t.scope.clone()}</code> ", as "
                <code class="try-actor">{t.actor.clone()}</code> ")"
            </h3>
            <ol class="try-steps">
                {t.steps.into_iter().map(step_view).collect_view()}
            </ol>
        </section>
    }
}

fn step_view(step: TryStep) -> impl IntoView {
    let TryStep {
        tool,
        request,
        text,
        structured,
        is_error,
        result,
    } = step;
    view! {
        <li class="try-step" data-tool=tool.clone()>
            <h4>
                <code>{tool.clone()}</code>
                {is_error.then(|| view! { " " <span class="badge danger">"isError"</span> })}
            </h4>
            <details>
                <summary>"Request"</summary>
                <pre class="schema"><code>{request}</code></pre>
            </details>
            <p class="label">"Text"</p>
            {text
                .into_iter()
                .map(|block| view! { <pre class="diff try-text">{block}</pre> })
                .collect_view()}
            {structured.map(|s| view! {
                <p class="label">"structuredContent"</p>
                <pre class="schema try-structured"><code>{s}</code></pre>
            })}
            <details>
                <summary>"The whole result, as JSON"</summary>
                <pre class="schema"><code>{result}</code></pre>
            </details>
        </li>
    }
}
