//! Console users made and kept in step by single sign-on (issue #52): the first sign-in
//! through the provider makes the user, each later one sets the role the person's groups
//! give now. Through the door, so each change is an `admin_change` by the person.

use chrono::Utc;
use serde_json::json;

use super::users::stored_user;
use super::{AdminError, AdminService, Changed, target};
use crate::console_sso::SsoIdentity;
use crate::store::console_sso::{insert_identity_on, user_by_identity_on};
use crate::store::users::{insert_user_on, update_user_access_on};
use crate::users::{ConsoleRole, ConsoleUser, NO_PASSWORD};

/// What a sign-in through the provider came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SsoSignIn {
    SignedIn(ConsoleUser),
    /// Refused, and nothing changed: `code` for the audit, `reason` for the person.
    Refused {
        code: &'static str,
        reason: String,
    },
}

impl AdminService {
    /// Signs in the person `identity` names, whose groups give `role`: makes their console
    /// user on the first sign-in, sets the role on later ones. A user an admin disabled
    /// stays out, and a name a local user has is not taken over.
    #[tracing::instrument(skip(self, identity), fields(issuer = %identity.issuer, name = %identity.name))]
    pub async fn sso_sign_in(
        &self,
        identity: &SsoIdentity,
        role: ConsoleRole,
    ) -> Result<SsoSignIn, AdminError> {
        let issuer = identity.issuer.clone();
        let subject = identity.subject.clone();
        let name = identity.name.clone();
        let outcome = self
            .record(
                &identity.name,
                Box::new(move |conn| {
                    Box::pin(async move {
                        let access =
                            |role: ConsoleRole| json!({ "role": role.as_str(), "disabled": false });
                        let known = user_by_identity_on(conn, &issuer, &subject)
                            .await?
                            .map(stored_user)
                            .transpose()?;
                        match known {
                            Some(user) if user.disabled => Ok((
                                SsoSignIn::Refused {
                                    code: "disabled",
                                    reason: format!(
                                        "the console user `{}` is disabled; ask an admin",
                                        user.name
                                    ),
                                },
                                Vec::new(),
                            )),
                            Some(user) => {
                                let before = user.role;
                                let mut changed = Vec::new();
                                if before != role {
                                    update_user_access_on(conn, &user.name, role.as_str(), false)
                                        .await?;
                                    changed.push(Changed::new(
                                        "console_user.update",
                                        target("console_user", &user.name),
                                        access(before),
                                        access(role),
                                    ));
                                }
                                Ok((SsoSignIn::SignedIn(ConsoleUser { role, ..user }), changed))
                            }
                            None => {
                                let id =
                                    insert_user_on(conn, &name, role.as_str(), NO_PASSWORD).await?;
                                insert_identity_on(conn, id, &issuer, &subject, Utc::now()).await?;
                                let mut after = access(role);
                                after["issuer"] = json!(issuer);
                                after["subject"] = json!(subject);
                                let changed = Changed::new(
                                    "console_user.create",
                                    target("console_user", &name),
                                    serde_json::Value::Null,
                                    after,
                                );
                                let user = ConsoleUser {
                                    id,
                                    name,
                                    role,
                                    disabled: false,
                                };
                                Ok((SsoSignIn::SignedIn(user), vec![changed]))
                            }
                        }
                    })
                }),
            )
            .await;
        match outcome {
            // A local user has the name, or the new role would leave no enabled admin.
            Err(AdminError::Conflict(reason)) => Ok(SsoSignIn::Refused {
                code: "conflict",
                reason,
            }),
            other => other,
        }
    }
}
