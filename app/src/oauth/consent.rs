//! The OAuth consent page: which client asks, where the browser goes next, and the one
//! scope the token will carry.
//!
//! The form is a plain HTML form posting to the server's `/oauth/consent` handler (which
//! answers with a redirect to the client), so it is the same with and without JavaScript.

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::components::{ErrorNotice, Loading};
use crate::oauth::api::{ConsentLookup, ConsentView, get_consent};

#[component]
pub fn ConsentPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let request = Resource::new(id, get_consent);
    // Why the last answer was refused (the consent post redirects back with `?error=`).
    let query = use_query_map();
    let refused = move || query.read().get("error");
    view! {
        <Title text="Sign in to a client" />
        {move || {
            refused()
                .map(|message| {
                    view! {
                        <p class="notice error" role="alert" id="consent-error">
                            {message}
                        </p>
                    }
                })
        }}
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match request.await {
                    Ok(ConsentLookup::Pending(request)) => consent_form(request).into_any(),
                    Ok(ConsentLookup::Gone(reason)) => {
                        #[cfg(feature = "ssr")]
                        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                            response.set_status(http::StatusCode::NOT_FOUND);
                        }
                        view! {
                            <h1>"This sign-in request is gone"</h1>
                            <div class="notice error" role="alert" id="consent-gone">
                                <p>{reason}</p>
                            </div>
                            <p>
                                "Nothing was granted. Start again from the client (the app or agent that sent you here): it opens a new request."
                            </p>
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

fn consent_form(request: ConsentView) -> impl IntoView {
    let can_approve = !request.scopes.is_empty();
    let known_as = if request.by_metadata_document {
        view! {
            <p>
                "Known by its metadata document at " <code id="consent-client-id">{request.client_id.clone()}</code>
                "."
            </p>
        }
        .into_any()
    } else {
        view! {
            <p>
                "It registered itself with this server (client "
                <code id="consent-client-id">{request.client_id.clone()}</code> "), so its name is its own claim."
            </p>
        }
        .into_any()
    };
    let preselected = request.preselected.clone();
    let choices = request
        .scopes
        .iter()
        .map(|scope| {
            let id = format!("consent-scope-{scope}");
            let checked = preselected.as_deref() == Some(scope.as_str());
            view! {
                <li>
                    <input
                        type="radio"
                        id=id.clone()
                        name="scope"
                        value=scope.clone()
                        checked=checked
                        required
                    />
                    <label for=id class="inline">
                        <code>{scope.clone()}</code>
                    </label>
                </li>
            }
        })
        .collect_view();
    view! {
        <h1>"Sign in to " <span id="consent-client-name">{request.client_name.clone()}</span></h1>
        <p class="lead">
            <strong>{request.client_name.clone()}</strong>
            " asks to act as you on this gateway's MCP endpoint, with the roles of one scope."
        </p>
        <section class="card form-card" aria-labelledby="consent-client-heading">
            <h2 id="consent-client-heading">"The client"</h2>
            {known_as}
            <p>
                "After you answer, your browser goes to " <strong id="consent-redirect-host">{request.redirect_host.clone()}</strong>
                ". Continue only if you started this sign-in there."
            </p>
            <p class="muted">
                "This request expires at " {request.expires_at.clone()} "."
            </p>
        </section>
        <form method="post" action="/oauth/consent" class="card form-card" id="consent-form">
            <CsrfField />
            <input type="hidden" name="request" value=request.id.clone() />
            {if can_approve {
                view! {
                    <fieldset class="checks">
                        <legend>"The scope its token will carry"</legend>
                        <ul>{choices}</ul>
                    </fieldset>
                    <p class="muted">
                        "The client can learn only the roles of the scope you choose, under its limits."
                    </p>
                }
                    .into_any()
            } else {
                view! {
                    <p class="notice info" role="status" id="consent-no-scope">
                        "No scope is allowed for your console user yet, so you cannot approve this. An admin must allow you a scope first (on the Users page); then start again from the client."
                    </p>
                }
                    .into_any()
            }}
            <div class="consent-actions">
                {can_approve
                    .then(|| {
                        view! {
                            <button
                                type="submit"
                                class="primary"
                                id="consent-approve"
                                name="decision"
                                value="approve"
                            >
                                "Approve"
                            </button>
                        }
                    })}
                <button
                    type="submit"
                    class="secondary"
                    id="consent-deny"
                    name="decision"
                    value="deny"
                    formnovalidate
                >
                    "Deny"
                </button>
            </div>
        </form>
    }
}
