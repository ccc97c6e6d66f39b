//! Subjects of trusted external issuers through the door (issue #52): the credential an
//! external token is admitted as is made on the subject's first token, and moved when its
//! claims map it to another scope, each with its `admin_change` event; a known subject in
//! the same scope is one read, and no event.

use chrono::Utc;
use serde_json::{Value, json};

use super::{AdminError, AdminService, target};
use crate::issuers::ExternalCaller;
use crate::keys::{AgentKeyInfo, LAST_USED_INTERVAL, hash_key, random_secret};
use crate::store::external_subjects::{
    NewExternalSubject, external_subject_on, insert_external_subject_on, set_external_scope_on,
};

/// What admitting an external caller into this workspace came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExternalAdmission {
    Admitted(AgentKeyInfo),
    /// An admin revoked the subject's credential: its tokens are refused.
    Revoked,
    /// The claims map to a scope this workspace's catalog does not have.
    UnknownScope,
}

/// The credential's name, which the audit shows as the agent: subject and issuer.
pub fn external_credential_name(caller: &ExternalCaller) -> String {
    format!("{}@{}", caller.subject, caller.issuer)
}

impl AdminService {
    /// The credential `caller` (a verified external token) is admitted as here.
    #[tracing::instrument(skip_all, fields(issuer = %caller.issuer, scope = %caller.scope))]
    pub async fn external_credential(
        &self,
        caller: &ExternalCaller,
    ) -> Result<ExternalAdmission, AdminError> {
        let known = self
            .live()
            .catalog()
            .scopes
            .iter()
            .any(|s| s.slug == caller.scope);
        if !known {
            return Ok(ExternalAdmission::UnknownScope);
        }
        let now = Utc::now();
        let stored = self
            .store()
            .external_subject(&caller.issuer, &caller.subject)
            .await?;
        let admitted = match stored {
            Some(info) if info.revoked_at.is_some() => return Ok(ExternalAdmission::Revoked),
            Some(info) if info.scope == caller.scope => info,
            stored => {
                let action = match stored {
                    None => "external_subject.admit",
                    Some(_) => "external_subject.scope",
                };
                match self.save_subject(caller, action).await {
                    // Two first tokens at once: the other made the row.
                    Err(AdminError::Conflict(_)) => self
                        .store()
                        .external_subject(&caller.issuer, &caller.subject)
                        .await?
                        .ok_or_else(|| AdminError::Conflict("the subject's credential".into()))?,
                    other => other?,
                }
            }
        };
        if admitted.revoked_at.is_some() {
            return Ok(ExternalAdmission::Revoked);
        }
        let stale_before = now - LAST_USED_INTERVAL;
        if admitted.last_used_at.is_none_or(|used| used < stale_before) {
            // Bookkeeping, not access control: a failed write must not refuse the token.
            if let Err(error) = self
                .store()
                .touch_agent_key(admitted.id, now, stale_before)
                .await
            {
                tracing::warn!(%error, "could not record an external subject's use");
            }
        }
        Ok(ExternalAdmission::Admitted(admitted))
    }

    /// Makes the subject's credential, or moves it to the caller's scope, in one
    /// transaction with its event (the row is read again inside it).
    async fn save_subject(
        &self,
        caller: &ExternalCaller,
        action: &'static str,
    ) -> Result<AgentKeyInfo, AdminError> {
        let name = external_credential_name(caller);
        let caller = caller.clone();
        let secret = random_secret("sgx_");
        self.save_record(&name.clone(), action, target("agent_key", &name), move |conn| {
            Box::pin(async move {
                let after = json!({"issuer": caller.issuer, "subject": caller.subject, "scope": caller.scope});
                match external_subject_on(conn, &caller.issuer, &caller.subject).await? {
                    None => {
                        let info = insert_external_subject_on(
                            conn,
                            &NewExternalSubject {
                                issuer: &caller.issuer,
                                subject: &caller.subject,
                                name: &name,
                                scope: &caller.scope,
                                key_hash: &hash_key(&secret),
                                at: Utc::now(),
                            },
                        )
                        .await?;
                        Ok((info, Value::Null, after))
                    }
                    Some(info) => {
                        let before = json!({"scope": info.scope});
                        let info = set_external_scope_on(conn, info.id, &caller.scope).await?;
                        Ok((info, before, after))
                    }
                }
            })
        })
        .await
    }
}
