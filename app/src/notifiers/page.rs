//! The notifications page: the webhooks and email notifiers that announce holds to
//! approvers, the forms that add them (admins), and the delivery log.

use leptos::form::ActionForm;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::components::A;

use super::api::{
    AddEmailNotifier, AddWebhook, CreatedNotifier, DeliveryLine, NotifierLine, RemoveNotifier,
    list_notifiers,
};
use super::forms::{email_form, webhook_form};
use crate::components::csrf::CsrfField;
use crate::components::flash::outcome;
use crate::components::{ErrorNotice, Loading};

#[component]
pub fn NotifiersPage() -> impl IntoView {
    let add = ServerAction::<AddWebhook>::new();
    let email = ServerAction::<AddEmailNotifier>::new();
    let remove = ServerAction::<RemoveNotifier>::new();
    // Outside any `Suspend`: reading a reveal consumes it, so this fetch runs once per render.
    let query = leptos_router::hooks::use_query_map();
    let data = Resource::new(
        move || {
            (
                query.read().get("reveal"),
                add.version().get(),
                email.version().get(),
                remove.version().get(),
            )
        },
        |(reveal, _, _, _)| list_notifiers(reveal),
    );
    view! {
        <Title text="Notifications" />
        <h1>"Notifications"</h1>
        <p class="lead">
            "Webhooks and email that tell approvers a call waits for them: when a hold is raised and, if you ask, before it expires. Each webhook request is signed; a chat channel's incoming webhook can post it as it is."
        </p>
        <Suspense fallback=|| view! { <Loading /> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(view) => {
                        let from_redirect = view.notice.map(Ok);
                        let fresh = view.fresh.map(fresh_secret);
                        let forms = view
                            .can_edit
                            .then(|| view! { {webhook_form(add)} {email_form(email)} });
                        let notifiers = if view.notifiers.is_empty() {
                            view! {
                                <p class="muted" id="notifiers-none">
                                    "No notifiers: holds are seen only on the Holds page."
                                </p>
                            }
                                .into_any()
                        } else {
                            notifier_table(view.notifiers, view.can_edit, remove).into_any()
                        };
                        view! {
                            {move || {
                                remove.value().get().or_else(|| from_redirect.clone()).map(outcome)
                            }}
                            {fresh}
                            {move || {
                                add.value().get().and_then(Result::ok).flatten().map(fresh_secret)
                            }}
                            <h2 id="notifiers-heading">"Notifiers"</h2>
                            {notifiers}
                            {forms}
                            <h2 id="log-heading">"Delivery log"</h2>
                            {delivery_log(view.log)}
                        }
                            .into_any()
                    }
                    Err(e) => view! { <ErrorNotice error=e /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The new webhook's signing secret, shown once.
fn fresh_secret(created: CreatedNotifier) -> impl IntoView {
    view! {
        <div class="card fresh-key" id="new-notifier" role="status" aria-labelledby="fresh-notifier-heading">
            <h3 id="fresh-notifier-heading">{format!("Webhook “{}” to {}", created.name, created.url)}</h3>
            <p class="notice info">
                "Its signing secret is shown only once. Check each request's skillgate-signature: v1= and the hex HMAC-SHA256, under this secret, of skillgate-timestamp, a dot and the body."
            </p>
            <div class="key-line">
                <code id="fresh-notifier-secret">{created.secret}</code>
            </div>
        </div>
    }
}

fn notifier_table(
    rows: Vec<NotifierLine>,
    can_edit: bool,
    remove: ServerAction<RemoveNotifier>,
) -> impl IntoView {
    view! {
        <table class="table" aria-label="Notifiers">
            <thead>
                <tr>
                    <th scope="col">"Name"</th>
                    <th scope="col">"Kind"</th>
                    <th scope="col">"Target"</th>
                    <th scope="col">"Scopes"</th>
                    <th scope="col">"Roles"</th>
                    <th scope="col">"Before expiry"</th>
                    <th scope="col">"Added"</th>
                    {can_edit.then(|| view! { <th scope="col"><span class="visually-hidden">"Remove"</span></th> })}
                </tr>
            </thead>
            <tbody>
                {rows
                    .into_iter()
                    .map(|n| {
                        let name = n.name.clone();
                        let action = can_edit.then(move || {
                            let label = format!("Remove notifier {name}");
                            view! {
                                <td>
                                    <ActionForm action=remove attr:class="inline-form">
                                        <CsrfField />
                                        <input type="hidden" name="name" value=name />
                                        <button type="submit" class="danger" aria-label=label>"Remove"</button>
                                    </ActionForm>
                                </td>
                            }
                        });
                        view! {
                            <tr id=format!("notifier-{}", n.name)>
                                <td>{n.name.clone()}</td>
                                <td>{n.kind.clone()}</td>
                                <td><code>{n.target.clone()}</code></td>
                                <td>{n.scopes.clone()}</td>
                                <td>{n.roles.clone()}</td>
                                <td>{n.expiring_minutes.map_or_else(|| "no".to_owned(), |m| format!("{m} min"))}</td>
                                <td>{n.created.clone()}</td>
                                {action}
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

fn delivery_log(rows: Vec<DeliveryLine>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="muted" id="log-none">"Nothing announced yet."</p> }.into_any();
    }
    view! {
        <table class="table" aria-label="Delivery log">
            <thead>
                <tr>
                    <th scope="col">"When"</th>
                    <th scope="col">"Notifier"</th>
                    <th scope="col">"Hold"</th>
                    <th scope="col">"Event"</th>
                    <th scope="col">"State"</th>
                    <th scope="col">"Attempts"</th>
                    <th scope="col">"Last answer"</th>
                </tr>
            </thead>
            <tbody>
                {rows
                    .into_iter()
                    .map(|d| {
                        let answer = match (d.last_status, &d.last_error) {
                            (_, Some(error)) => error.clone(),
                            (Some(status), None) => format!("HTTP {status}"),
                            (None, None) => "-".to_owned(),
                        };
                        view! {
                            <tr id=format!("delivery-{}", d.id)>
                                <td>{d.at.clone()}</td>
                                <td>{d.notifier.clone()}</td>
                                <td><A href=format!("/holds/{}", d.hold_id)><code>{d.hold_id.clone()}</code></A></td>
                                <td>{d.event.clone()}</td>
                                <td><span class=format!("badge status-{}", d.state)>{d.state.clone()}</span></td>
                                <td>{d.attempts}</td>
                                <td>{answer}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
