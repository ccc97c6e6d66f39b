//! How people may sign in: with the company's identity provider, with a password, or both.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::ConsoleError;

/// Who may sign in with a password.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Passwords {
    All,
    /// Local admins only (break-glass), single sign-on for everyone else.
    Admins,
    Off,
}

/// What the sign-in page offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInOptions {
    /// The button's label, when single sign-on is configured.
    pub sso_label: Option<String>,
    pub passwords: Passwords,
}

impl Default for SignInOptions {
    fn default() -> Self {
        Self {
            sso_label: None,
            passwords: Passwords::All,
        }
    }
}

#[server(prefix = "/console/api")]
pub async fn get_sign_in_options() -> Result<SignInOptions, ConsoleError> {
    Ok(crate::shared::ssr::context().sign_in.clone())
}

/// What the sign-in page says about an `error` (and single sign-on's `code`) it was sent
/// back with.
pub fn error_message(error: &str, code: Option<&str>) -> String {
    match (error, code) {
        ("throttled", _) => "Too many failed sign-ins. Wait 15 minutes and try again.".into(),
        ("expired", _) => "This sign-in form had expired. Sign in again.".into(),
        ("password_off", _) => {
            "Password sign-in is off for this account: sign in with the identity provider.".into()
        }
        ("sso", Some("no_role")) => {
            "Your account at the identity provider is in no group that gives a console role.".into()
        }
        ("sso", Some("disabled")) => "Your console user is disabled. Ask an admin.".into(),
        ("sso", Some("conflict")) => {
            "Your account cannot be signed in: a local console user has its name, or it was the \
             last admin. Ask an admin."
                .into()
        }
        ("sso", Some("provider_unavailable")) => {
            "The identity provider cannot be reached. Try again later.".into()
        }
        ("sso", Some("provider_error")) => "The identity provider refused the sign-in.".into(),
        ("sso", Some("unknown_state" | "other_browser" | "expired")) => {
            "This sign-in was not started in this browser, was already used, or took too long. \
             Start again."
                .into()
        }
        ("sso", code) => format!(
            "Single sign-on failed ({}). Start again.",
            code.unwrap_or("unknown")
        ),
        _ => "Wrong user name or password.".into(),
    }
}
