//! Hold notifiers: added and removed through the door, so each has its `admin_change`
//! event. A notifier's signing secret is generated here and returned once; the audit and
//! every listing see only that it exists.

use chrono::Utc;
use serde_json::{Value, json};

use super::{AdminError, AdminService, target};
use crate::holds::notify::SmtpSettings;
use crate::model::check_upstream_url;
use crate::store::StoreError;
use crate::store::notifications::{
    NewNotifier, NotifierInfo, NotifierSecret, delete_notifier_on, insert_notifier_on,
};

/// The longest wait before expiry a notifier may announce: a day.
pub const MAX_EXPIRING_MINUTES: u32 = 24 * 60;
const MAX_NAME_LEN: usize = 64;

/// A webhook notifier to add: which holds (scopes, roles; empty: all) and whether to warn
/// before expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSpec {
    pub name: String,
    pub url: String,
    pub scopes: Vec<String>,
    pub roles: Vec<String>,
    pub expiring_minutes: Option<u32>,
}

/// An email notifier to add: the recipients, the SMTP server (`tls` defaults to STARTTLS),
/// and which holds, as for a webhook.
#[derive(Clone, PartialEq, Eq)]
pub struct EmailSpec {
    pub name: String,
    pub to: Vec<String>,
    pub smtp: SmtpSettings,
    /// The SMTP password; stored like a webhook's secret, never shown again.
    pub password: Option<String>,
    pub scopes: Vec<String>,
    pub roles: Vec<String>,
    pub expiring_minutes: Option<u32>,
}

impl std::fmt::Debug for EmailSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailSpec")
            .field("name", &self.name)
            .field("to", &self.to)
            .field("smtp", &self.smtp)
            .finish_non_exhaustive()
    }
}

/// A checked notifier, ready to store.
struct NewStored {
    name: String,
    kind: &'static str,
    target: String,
    settings: Option<Value>,
    scopes: Vec<String>,
    roles: Vec<String>,
    expiring_minutes: Option<u32>,
}

fn notifier_json(n: &NotifierInfo) -> Value {
    json!({
        "kind": n.kind,
        "target": n.target,
        "settings": n.settings,
        "scopes": n.scopes,
        "roles": n.roles,
        "expiring_minutes": n.expiring_minutes,
    })
}

impl AdminService {
    /// Adds a webhook that announces holds; returns it and its signing secret, shown once.
    #[tracing::instrument(skip(self))]
    pub async fn add_webhook_notifier(
        &self,
        actor: &str,
        spec: WebhookSpec,
    ) -> Result<(NotifierInfo, NotifierSecret), AdminError> {
        let name =
            self.check_selection(&spec.name, &spec.scopes, &spec.roles, spec.expiring_minutes)?;
        let url = spec.url.trim().to_owned();
        check_upstream_url(&url, false).map_err(|_| {
            AdminError::bad_input(
                "url",
                format!(
                    "`{url}` must be an https:// URL, or http:// to this machine (localhost, \
                     127.0.0.1, ::1): a webhook receives what held calls would do"
                ),
            )
        })?;
        let secret = NotifierSecret(crate::keys::random_secret("whsec_"));
        let stored = NewStored {
            name,
            kind: "webhook",
            target: url,
            settings: None,
            scopes: spec.scopes,
            roles: spec.roles,
            expiring_minutes: spec.expiring_minutes,
        };
        let info = self.store_notifier(actor, stored, &secret).await?;
        Ok((info, secret))
    }

    /// Adds an email notifier that announces holds to `spec.to` through `spec.smtp`.
    #[tracing::instrument(skip(self))]
    pub async fn add_email_notifier(
        &self,
        actor: &str,
        spec: EmailSpec,
    ) -> Result<NotifierInfo, AdminError> {
        let name =
            self.check_selection(&spec.name, &spec.scopes, &spec.roles, spec.expiring_minutes)?;
        if spec.to.is_empty() {
            return Err(AdminError::bad_input("to", "name at least one recipient"));
        }
        let addresses = spec.to.iter().map(|a| ("to", a));
        for (field, address) in addresses.chain([("from", &spec.smtp.from)]) {
            address.parse::<lettre::Address>().map_err(|e| {
                AdminError::bad_input(field, format!("`{address}` is not an email address: {e}"))
            })?;
        }
        let password = spec.password.as_deref().filter(|p| !p.is_empty());
        match (&spec.smtp.username, password) {
            (Some(_), None) => {
                return Err(AdminError::bad_input(
                    "password",
                    "give the password the SMTP user signs in with",
                ));
            }
            (None, Some(_)) => {
                return Err(AdminError::bad_input(
                    "username",
                    "name the SMTP user the password signs in",
                ));
            }
            _ => {}
        }
        let host = spec.smtp.host.trim();
        if host.is_empty() || host.contains(['/', ' ', ':']) {
            return Err(AdminError::bad_input(
                "smtp",
                "name the SMTP server's host, and its port apart",
            ));
        }
        let settings = serde_json::to_value(&spec.smtp).expect("settings serialize");
        let secret = NotifierSecret(spec.password.clone().unwrap_or_default());
        let stored = NewStored {
            name,
            kind: "email",
            target: spec.to.join(","),
            settings: Some(settings),
            scopes: spec.scopes,
            roles: spec.roles,
            expiring_minutes: spec.expiring_minutes,
        };
        self.store_notifier(actor, stored, &secret).await
    }

    /// Stores a checked notifier with its `admin_change` event.
    async fn store_notifier(
        &self,
        actor: &str,
        stored: NewStored,
        secret: &NotifierSecret,
    ) -> Result<NotifierInfo, AdminError> {
        let secret = NotifierSecret(secret.expose().to_owned());
        let actor_name = actor.to_owned();
        self.save_record(
            actor,
            "hold_notifier.create",
            target("hold_notifier", &stored.name),
            move |conn| {
                Box::pin(async move {
                    let info = insert_notifier_on(
                        conn,
                        &NewNotifier {
                            name: &stored.name,
                            kind: stored.kind,
                            target: &stored.target,
                            settings: stored.settings.as_ref(),
                            secret: &secret,
                            scopes: &stored.scopes,
                            roles: &stored.roles,
                            expiring_minutes: stored.expiring_minutes,
                            created_at: Utc::now(),
                            created_by: &actor_name,
                        },
                    )
                    .await?;
                    let after = notifier_json(&info);
                    Ok((info, Value::Null, after))
                })
            },
        )
        .await
    }

    /// Checks what every notifier has: its name (returned trimmed), its warning before
    /// expiry, and scopes and roles the catalog has.
    fn check_selection(
        &self,
        name: &str,
        scopes: &[String],
        roles: &[String],
        expiring_minutes: Option<u32>,
    ) -> Result<String, AdminError> {
        let name = name.trim().to_owned();
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(plain) {
            return Err(AdminError::bad_input(
                "name",
                format!("a notifier name is 1 to {MAX_NAME_LEN} letters, digits, `.`, `_` or `-`"),
            ));
        }
        if expiring_minutes.is_some_and(|m| m == 0 || m > MAX_EXPIRING_MINUTES) {
            return Err(AdminError::bad_input(
                "expiring_minutes",
                format!(
                    "warn 1 to {MAX_EXPIRING_MINUTES} minutes before a hold expires, or not at all"
                ),
            ));
        }
        let catalog = self.live();
        for scope in scopes {
            if catalog.scope(scope).is_none() {
                return Err(AdminError::bad_input(
                    "scopes",
                    format!("there is no scope `{scope}`"),
                ));
            }
        }
        for role in roles {
            if catalog.role(role).is_none() {
                return Err(AdminError::bad_input(
                    "roles",
                    format!("there is no role `{role}`"),
                ));
            }
        }
        Ok(name)
    }

    /// Removes a notifier and its delivery log: holds are no longer announced through it.
    #[tracing::instrument(skip(self))]
    pub async fn remove_notifier(
        &self,
        actor: &str,
        name: &str,
    ) -> Result<NotifierInfo, AdminError> {
        let name = name.to_owned();
        self.save_record(
            actor,
            "hold_notifier.delete",
            target("hold_notifier", &name),
            move |conn| {
                Box::pin(async move {
                    let info = delete_notifier_on(conn, &name)
                        .await?
                        .ok_or_else(|| StoreError::NotFound(format!("notifier `{name}`")))?;
                    let before = notifier_json(&info);
                    Ok((info, before, Value::Null))
                })
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::admin::EmailSpec;
    use crate::audit::AuditLog;
    use crate::holds::notify::SmtpTls;
    use crate::policy::CatalogHandle;
    use crate::store::test_store;

    fn spec(username: Option<&str>, password: Option<&str>, from: &str) -> EmailSpec {
        EmailSpec {
            name: "approvers".to_owned(),
            to: vec!["rita@example.com".to_owned()],
            smtp: SmtpSettings {
                host: "smtp.example.com".to_owned(),
                port: 587,
                tls: SmtpTls::Starttls,
                username: username.map(str::to_owned),
                from: from.to_owned(),
            },
            password: password.map(str::to_owned),
            scopes: Vec::new(),
            roles: Vec::new(),
            expiring_minutes: None,
        }
    }

    #[tokio::test]
    async fn an_email_notifier_with_half_a_sign_in_or_a_bad_sender_is_refused_by_field_and_not_stored()
     {
        let store = test_store().await;
        let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
        let admin = AdminService::new(store.clone(), AuditLog::new(store.clone()), catalog);
        for (spec, field) in [
            (spec(Some("mailer"), None, "gate@example.com"), "password"),
            (
                spec(Some("mailer"), Some(""), "gate@example.com"),
                "password",
            ),
            (spec(None, Some("secret"), "gate@example.com"), "username"),
            (spec(None, None, "not-an-address"), "from"),
        ] {
            let refused = admin
                .add_email_notifier("cli:alice", spec)
                .await
                .unwrap_err();
            assert_eq!(refused.field(), Some(field), "{refused}");
        }
        assert!(store.list_notifiers().await.unwrap().is_empty());
        let added = admin
            .add_email_notifier(
                "cli:alice",
                spec(Some("mailer"), Some("secret"), "gate@example.com"),
            )
            .await
            .unwrap();
        assert_eq!(added.target, "rita@example.com");
    }
}
