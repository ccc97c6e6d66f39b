//! The outcome of a console form, for browsers without JavaScript.
//!
//! With JavaScript, an `ActionForm` receives its server function's result directly. A plain
//! form post instead gets a redirect back to the page it came from (leptos_axum does that
//! for requests that accept HTML), and the result would be lost; so the server function also
//! leaves it in the console session, and the page takes it out exactly once when it renders.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shared::ConsoleError;

/// What a form post reports back to the page it came from.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    pub error: bool,
    pub message: String,
    /// A secret shown exactly once (a generated password or agent key).
    pub secret: Option<String>,
}

// The secret stays out of logs and panic messages.
impl std::fmt::Debug for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notice")
            .field("error", &self.error)
            .field("message", &self.message)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Notice {
    pub fn ok(message: impl Into<String>) -> Self {
        Self {
            error: false,
            message: message.into(),
            secret: None,
        }
    }

    pub fn with_secret(message: impl Into<String>, secret: String) -> Self {
        Self {
            secret: Some(secret),
            ..Self::ok(message)
        }
    }
}

/// A form's outcome above a page's lists (`#form-outcome`): a success as a status, a
/// refusal or failure as an alert.
pub fn outcome(result: Result<Notice, ConsoleError>) -> impl IntoView {
    let (class, role, message) = match result {
        Ok(n) if !n.error => ("notice ok", "status", n.message),
        Ok(n) => ("notice error", "alert", n.message),
        Err(e) => ("notice error", "alert", e.to_string()),
    };
    view! {
        <div class=class role=role id="form-outcome">
            <p>{message}</p>
        </div>
    }
}

#[cfg(feature = "ssr")]
pub mod ssr {
    use super::Notice;
    use crate::shared::ConsoleError;
    use crate::shared::ssr::internal;

    const FLASH_KEY: &str = "console_flash";

    /// True when the current server-function request is a plain HTML form post.
    fn is_plain_form_post() -> bool {
        leptos::prelude::use_context::<http::request::Parts>()
            .and_then(|parts| {
                parts
                    .headers
                    .get(http::header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.contains("text/html"))
            })
            .unwrap_or(false)
    }

    /// Passes `result` through, and for a plain form post also keeps it in the session for
    /// the page the browser is redirected back to. Errors become error notices there.
    pub async fn keep_for_redirect(
        result: Result<Notice, ConsoleError>,
    ) -> Result<Notice, ConsoleError> {
        if is_plain_form_post() {
            let notice = match &result {
                Ok(notice) => notice.clone(),
                Err(e) => Notice {
                    error: true,
                    message: e.to_string(),
                    secret: None,
                },
            };
            let session: tower_sessions::Session =
                leptos_axum::extract().await.map_err(internal)?;
            session.insert(FLASH_KEY, notice).await.map_err(internal)?;
        }
        result
    }

    /// Leaves `notice` for the next page the session renders: for the plain handlers
    /// outside the server functions (the bundle upload) that redirect back themselves.
    pub async fn leave(
        session: &tower_sessions::Session,
        notice: &Notice,
    ) -> Result<(), tower_sessions::session::Error> {
        session.insert(FLASH_KEY, notice).await
    }

    /// The notice a plain form post left for this page, removed as it is read.
    pub async fn take() -> Result<Option<Notice>, ConsoleError> {
        let session: tower_sessions::Session = leptos_axum::extract().await.map_err(internal)?;
        session.remove(FLASH_KEY).await.map_err(internal)
    }
}
