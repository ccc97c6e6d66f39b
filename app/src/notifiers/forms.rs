//! The forms that add a notifier (admins only): a webhook, whose signing secret the page
//! shows once, and an email notifier, whose SMTP password is never shown again.

use leptos::form::ActionForm;
use leptos::prelude::*;

use super::api::{AddEmailNotifier, AddWebhook};
use crate::components::csrf::CsrfField;
use crate::components::forms::{FieldError, FormOutcome, error_for, last_error};

pub fn webhook_form(add: ServerAction<AddWebhook>) -> impl IntoView {
    let error = last_error(add);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <ActionForm action=add attr:class="card form" attr:aria-labelledby="new-notifier-heading">
            <CsrfField />
            <h2 id="new-notifier-heading">"Add a webhook"</h2>
            <FormOutcome
                action=add
                fields=&["name", "url", "scopes", "roles", "expiring_minutes"]
                saved="Webhook added."
            />
            <div class="form-row">
                <div>
                    <label for="notifier-name">"Name"</label>
                    <input id="notifier-name" name="name" required placeholder="ops-chat" aria-describedby="notifier-name-error" />
                    <FieldError id="notifier-name-error" message=err("name") />
                </div>
                <div>
                    <label for="notifier-url">"URL (https://, or http:// to this machine)"</label>
                    <input id="notifier-url" name="url" required aria-describedby="notifier-url-error" />
                    <FieldError id="notifier-url-error" message=err("url") />
                </div>
            </div>
            <div class="form-row">
                <div>
                    <label for="notifier-scopes">"Scopes (comma-separated; empty: all)"</label>
                    <input id="notifier-scopes" name="scopes" aria-describedby="notifier-scopes-error" />
                    <FieldError id="notifier-scopes-error" message=err("scopes") />
                </div>
                <div>
                    <label for="notifier-roles">"Roles (comma-separated; empty: all)"</label>
                    <input id="notifier-roles" name="roles" aria-describedby="notifier-roles-error" />
                    <FieldError id="notifier-roles-error" message=err("roles") />
                </div>
                <div>
                    <label for="notifier-expiring">"Also warn this many minutes before expiry (empty: no)"</label>
                    <input id="notifier-expiring" name="expiring_minutes" inputmode="numeric" aria-describedby="notifier-expiring-error" />
                    <FieldError id="notifier-expiring-error" message=err("expiring_minutes") />
                </div>
            </div>
            <button type="submit" class="primary">"Add webhook"</button>
        </ActionForm>
    }
}

/// Email through the company's SMTP server. STARTTLS is the default and a server that does
/// not offer it is refused; plain text is for a relay on this machine only.
pub fn email_form(add: ServerAction<AddEmailNotifier>) -> impl IntoView {
    let error = last_error(add);
    let err = move |f: &'static str| Signal::derive(move || error_for(error(), f));
    view! {
        <ActionForm action=add attr:class="card form" attr:aria-labelledby="new-email-heading">
            <CsrfField />
            <h2 id="new-email-heading">"Add an email notifier"</h2>
            <FormOutcome
                action=add
                fields=&["name", "to", "from", "smtp", "smtp_port", "tls", "username", "password", "scopes", "roles", "expiring_minutes"]
                saved="Email notifier added."
            />
            <div class="form-row">
                <div>
                    <label for="email-name">"Name"</label>
                    <input id="email-name" name="email[name]" required placeholder="billing-approvers" aria-describedby="email-name-error" />
                    <FieldError id="email-name-error" message=err("name") />
                </div>
                <div>
                    <label for="email-to">"Recipients (comma-separated)"</label>
                    <input id="email-to" name="email[to]" required placeholder="approvers@example.com" aria-describedby="email-to-error" />
                    <FieldError id="email-to-error" message=err("to") />
                </div>
                <div>
                    <label for="email-from">"Sender"</label>
                    <input id="email-from" name="email[from]" required placeholder="skillgate@example.com" aria-describedby="email-from-error" />
                    <FieldError id="email-from-error" message=err("from") />
                </div>
            </div>
            <div class="form-row">
                <div>
                    <label for="email-host">"SMTP server"</label>
                    <input id="email-host" name="email[smtp_host]" required placeholder="smtp.example.com" aria-describedby="email-host-error" />
                    <FieldError id="email-host-error" message=err("smtp") />
                </div>
                <div>
                    <label for="email-tls">"Security"</label>
                    <select id="email-tls" name="email[tls]" aria-describedby="email-tls-error">
                        <option value="starttls" selected>"STARTTLS (refuse a server without it)"</option>
                        <option value="tls">"TLS from the first byte"</option>
                        <option value="none">"None: a relay on this machine only"</option>
                    </select>
                    <FieldError id="email-tls-error" message=err("tls") />
                </div>
                <div>
                    <label for="email-port">"Port (empty: 587, 465 or 25 by security)"</label>
                    <input id="email-port" name="email[smtp_port]" inputmode="numeric" aria-describedby="email-port-error" />
                    <FieldError id="email-port-error" message=err("smtp_port") />
                </div>
            </div>
            <div class="form-row">
                <div>
                    <label for="email-username">"SMTP user (empty: no sign-in)"</label>
                    <input id="email-username" name="email[username]" autocomplete="off" aria-describedby="email-username-error" />
                    <FieldError id="email-username-error" message=err("username") />
                </div>
                <div>
                    <label for="email-password">"Its password (stored, never shown again)"</label>
                    <input id="email-password" name="email[password]" type="password" autocomplete="new-password" aria-describedby="email-password-error" />
                    <FieldError id="email-password-error" message=err("password") />
                </div>
            </div>
            <div class="form-row">
                <div>
                    <label for="email-scopes">"Scopes (comma-separated; empty: all)"</label>
                    <input id="email-scopes" name="email[scopes]" aria-describedby="email-scopes-error" />
                    <FieldError id="email-scopes-error" message=err("scopes") />
                </div>
                <div>
                    <label for="email-roles">"Roles (comma-separated; empty: all)"</label>
                    <input id="email-roles" name="email[roles]" aria-describedby="email-roles-error" />
                    <FieldError id="email-roles-error" message=err("roles") />
                </div>
                <div>
                    <label for="email-expiring">"Also warn this many minutes before expiry (empty: no)"</label>
                    <input id="email-expiring" name="email[expiring_minutes]" inputmode="numeric" aria-describedby="email-expiring-error" />
                    <FieldError id="email-expiring-error" message=err("expiring_minutes") />
                </div>
            </div>
            <button type="submit" class="primary">"Add email notifier"</button>
        </ActionForm>
    }
}
