//! The sign-in page.

use super::options::{Passwords, error_message, get_sign_in_options};
use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The sign-in page: the identity provider's button when single sign-on is on, and the
/// password form unless it is off. The form posts to the server's `/login` handler as a
/// plain HTML form, and the button is a link, so both work the same without JavaScript.
#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let message = move || {
        query.with(|q| {
            q.get("error")
                .map(|error| error_message(&error, q.get("code").as_deref()))
        })
    };
    let signed_out = move || query.with(|q| q.get("signed_out").is_some());
    // Where the sign-in guard sent the browser from; the server checks it is a console
    // path before it redirects there.
    let next = move || query.with(|q| q.get("next").filter(|n| !n.is_empty()));
    let options = Resource::new(|| (), |_| get_sign_in_options());
    let sso_href = move || {
        let mut href = "/auth/sso/start".to_owned();
        if let Some(next) = next() {
            href.push_str("?next=");
            href.push_str(&crate::shared::encode(&next));
        }
        href
    };
    view! {
        <Title text="Sign in" />
        <main class="login">
            <div class="card login-card">
                <h1>"Skillgate"</h1>
                <p class="muted">"Sign in to the admin console."</p>
                <Show when=signed_out>
                    <p class="notice info" role="status">
                        "You are signed out."
                    </p>
                </Show>
                {move || {
                    message()
                        .map(|m| {
                            view! {
                                <p class="notice error" role="alert" id="login-error">
                                    {m}
                                </p>
                            }
                        })
                }}
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        let options = options.await.unwrap_or_default();
                        let sso = options
                            .sso_label
                            .map(|label| {
                                view! {
                                    // External: the hydrated router must not take it
                                    // for a console page; the browser goes to the server.
                                    <a
                                        class="sso-button"
                                        id="sso-sign-in"
                                        href=sso_href
                                        rel="external"
                                    >
                                        {label}
                                    </a>
                                }
                            });
                        let passwords = options.passwords;
                        view! {
                            {sso}
                            <Show when=move || passwords != Passwords::Off>
                                <PasswordForm next=next() passwords=passwords />
                            </Show>
                        }
                    })}
                </Suspense>
            </div>
        </main>
    }
}

/// The user name and password form; with single sign-on on, for break-glass admins only.
#[component]
fn PasswordForm(next: Option<String>, passwords: Passwords) -> impl IntoView {
    view! {
        <form method="post" action="/login" class="login-form">
            <CsrfField />
            {next.map(|next| view! { <input type="hidden" name="next" value=next /> })}
            {(passwords == Passwords::Admins)
                .then(|| {
                    view! {
                        <p class="muted" id="break-glass">
                            "Local admins only (break-glass): everyone else signs in with the identity provider."
                        </p>
                    }
                })}
            <label for="name">"User name"</label>
            <input id="name" name="name" type="text" autocomplete="username" required />
            <label for="password">"Password"</label>
            <input
                id="password"
                name="password"
                type="password"
                autocomplete="current-password"
                required
            />
            <button type="submit" class="primary">
                "Sign in"
            </button>
        </form>
    }
}
