//! The sign-in page.

use crate::components::csrf::CsrfField;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The sign-in form. It posts to the server's `/login` handler as a plain HTML form, so
/// it works the same with and without JavaScript.
#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let message = move || {
        query.with(|q| match q.get("error").as_deref() {
            Some("throttled") => Some("Too many failed sign-ins. Wait 15 minutes and try again."),
            Some("expired") => Some("This sign-in form had expired. Sign in again."),
            Some(_) => Some("Wrong user name or password."),
            None => None,
        })
    };
    let signed_out = move || query.with(|q| q.get("signed_out").is_some());
    // Where the sign-in guard sent the browser from; the server checks it is a console
    // path before it redirects there.
    let next = move || query.with(|q| q.get("next").filter(|n| !n.is_empty()));
    view! {
        <Title text="Sign in" />
        <main class="login">
            <form class="card login-card" method="post" action="/login">
                <CsrfField />
                {move || next().map(|next| view! { <input type="hidden" name="next" value=next /> })}
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
        </main>
    }
}
