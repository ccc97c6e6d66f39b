//! Console users: created, changed and given new passwords through the door. Generated
//! passwords are returned once, so an admin never has to invent, type or see a reusable one
//! twice; the audit says that a password changed, never what it is.

use chrono::Utc;
use serde_json::{Value, json};

use super::{AdminError, AdminService, target};
use crate::store::console_sso::issuer_of_user_on;
use crate::store::users::{
    clear_login_failures_on, count_users_on, insert_user_on, set_user_password_on,
    update_user_access_on,
};
use crate::users::{
    ConsoleRole, ConsoleUser, Password, THROTTLE_WINDOW, UserError, new_password_hash,
};

fn access_json(user: &ConsoleUser) -> Value {
    json!({ "role": user.role.as_str(), "disabled": user.disabled })
}

/// The console user a row read inside a door's transaction is.
pub(super) fn stored_user(
    record: crate::store::users::UserRecord,
) -> Result<ConsoleUser, crate::store::StoreError> {
    ConsoleUser::try_from(record).map_err(|e| crate::store::StoreError::Corrupt(e.to_string()))
}

fn user_target(name: &str) -> String {
    target("console_user", name)
}

impl AdminService {
    /// Creates the `admin` user with a random password when there are no users at all
    /// (the first start of an empty database), audited as by `bootstrap`. Returns the
    /// password so the caller can show it exactly once.
    #[tracing::instrument(skip(self))]
    pub async fn bootstrap_admin(&self) -> Result<Option<Password>, AdminError> {
        if self.store.count_users().await? > 0 {
            return Ok(None);
        }
        let password = Password::generate();
        let hash = new_password_hash("admin", Password::new(password.expose())).await?;
        let created = self
            .record(
                &crate::names::Actor::Bootstrap.to_string(),
                Box::new(move |conn| {
                    Box::pin(async move {
                        // Another replica may have bootstrapped first: then do nothing.
                        if count_users_on(conn).await? > 0 {
                            return Ok((false, Vec::new()));
                        }
                        insert_user_on(conn, "admin", ConsoleRole::Admin.as_str(), &hash).await?;
                        let after = json!({ "role": "admin", "disabled": false });
                        let changed = super::Changed::new(
                            "console_user.create",
                            user_target("admin"),
                            Value::Null,
                            after,
                        );
                        Ok((true, vec![changed]))
                    })
                }),
            )
            .await?;
        Ok(created.then_some(password))
    }

    /// Adds a console user with `password` (the CLI's `user add`), or with a generated one
    /// returned once when `password` is `None` (the console).
    #[tracing::instrument(skip(self, password))]
    pub async fn add_user(
        &self,
        actor: &str,
        name: &str,
        role: ConsoleRole,
        password: Option<Password>,
    ) -> Result<(ConsoleUser, Option<Password>), AdminError> {
        let (given, generated) = match password {
            Some(password) => (password, None),
            None => {
                let generated = Password::generate();
                (Password::new(generated.expose()), Some(generated))
            }
        };
        let hash = new_password_hash(name, given).await?;
        let name = name.to_owned();
        let user = self
            .save_record(
                actor,
                "console_user.create",
                user_target(&name),
                move |conn| {
                    Box::pin(async move {
                        let id = insert_user_on(conn, &name, role.as_str(), &hash).await?;
                        let user = ConsoleUser {
                            id,
                            name,
                            role,
                            disabled: false,
                        };
                        let after = access_json(&user);
                        Ok((user, Value::Null, after))
                    })
                },
            )
            .await?;
        Ok((user, generated))
    }

    /// Sets a user's console role and disabled flag. An admin may not lock themselves out,
    /// and no change may leave the console without an enabled admin. A change to the same
    /// values writes nothing.
    #[tracing::instrument(skip(self, actor), fields(actor = %actor.name))]
    pub async fn change_user_access(
        &self,
        actor: &ConsoleUser,
        name: &str,
        role: ConsoleRole,
        disabled: bool,
    ) -> Result<ConsoleUser, AdminError> {
        if actor.name == name && (disabled || role != actor.role) {
            return Err(UserError::SelfLockout.into());
        }
        let name = name.to_owned();
        self.record(
            &actor.name,
            Box::new(move |conn| {
                Box::pin(async move {
                    let before = stored_user(
                        update_user_access_on(conn, &name, role.as_str(), disabled).await?,
                    )?;
                    let after = ConsoleUser {
                        role,
                        disabled,
                        ..before.clone()
                    };
                    let changed = (before != after)
                        .then(|| {
                            super::Changed::new(
                                "console_user.update",
                                user_target(&name),
                                access_json(&before),
                                access_json(&after),
                            )
                        })
                        .into_iter()
                        .collect();
                    Ok((after, changed))
                })
            }),
        )
        .await
    }

    /// Replaces a user's password with a fresh random one, returned once, and lifts their
    /// sign-in throttle.
    #[tracing::instrument(skip(self))]
    pub async fn reset_user_password(
        &self,
        actor: &str,
        name: &str,
    ) -> Result<Password, AdminError> {
        let password = Password::generate();
        self.set_user_password(actor, name, Password::new(password.expose()))
            .await?;
        Ok(password)
    }

    /// Sets a user's password (the CLI's `user passwd`) and lifts their sign-in throttle.
    #[tracing::instrument(skip(self, password))]
    pub async fn set_user_password(
        &self,
        actor: &str,
        name: &str,
        password: Password,
    ) -> Result<(), AdminError> {
        let hash = new_password_hash(name, password).await?;
        let name = name.to_owned();
        self.save_record(
            actor,
            "console_user.reset_password",
            user_target(&name),
            move |conn| {
                Box::pin(async move {
                    // A password would be a second way in, around the provider's groups.
                    if issuer_of_user_on(conn, &name).await?.is_some() {
                        return Err(crate::store::StoreError::Conflict(format!(
                            "`{name}` signs in through the identity provider and has no \
                             password here"
                        )));
                    }
                    set_user_password_on(conn, &name, &hash).await?;
                    clear_login_failures_on(conn, &name, Utc::now() - THROTTLE_WINDOW).await?;
                    Ok(((), Value::Null, Value::Null))
                })
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Utc;
    use futures::TryStreamExt;

    use super::*;
    use crate::audit::AuditLog;
    use crate::policy::CatalogHandle;
    use crate::store::test_store;
    use crate::users::Users;

    async fn service() -> (AdminService, Users) {
        let store = test_store().await;
        let catalog = Arc::new(CatalogHandle::new(store.compiled_catalog().await.unwrap()));
        let admin = AdminService::new(store.clone(), AuditLog::new(store.clone()), catalog);
        (admin, Users::new(store))
    }

    async fn with_admin() -> (AdminService, Users, ConsoleUser) {
        let (admin, users) = service().await;
        let (root, _) = admin
            .add_user(
                "cli",
                "root",
                ConsoleRole::Admin,
                Some(Password::new("long enough pw")),
            )
            .await
            .unwrap();
        (admin, users, root)
    }

    async fn create(
        admin: &AdminService,
        actor: &ConsoleUser,
        name: &str,
        role: ConsoleRole,
    ) -> (ConsoleUser, Password) {
        let (user, password) = admin.add_user(&actor.name, name, role, None).await.unwrap();
        (user, password.expect("a generated password"))
    }

    #[tokio::test]
    async fn the_first_start_creates_one_admin_and_the_second_start_creates_none() {
        let (admin, users) = service().await;
        let password = admin
            .bootstrap_admin()
            .await
            .unwrap()
            .expect("a new password");
        assert_eq!(password.expose().len(), 24);
        assert!(admin.bootstrap_admin().await.unwrap().is_none());
        let signed_in = users
            .login("admin", password, "127.0.0.1", Utc::now())
            .await
            .unwrap();
        assert_eq!(signed_in.role, ConsoleRole::Admin);
    }

    #[tokio::test]
    async fn an_admin_creates_a_user_whose_generated_password_signs_in() {
        let (admin, users, root) = with_admin().await;
        let (created, password) = create(&admin, &root, "dana", ConsoleRole::Reviewer).await;
        assert_eq!(created.role, ConsoleRole::Reviewer);
        let signed_in = users
            .login("dana", password, "10.0.0.9", Utc::now())
            .await
            .unwrap();
        assert_eq!(signed_in.name, "dana");
    }

    #[tokio::test]
    async fn bad_names_short_passwords_and_duplicates_are_refused_name_their_field_and_change_nothing()
     {
        let (admin, users, root) = with_admin().await;
        let bad = admin
            .add_user(&root.name, "a b", ConsoleRole::Viewer, None)
            .await
            .unwrap_err();
        assert_eq!(bad.field(), Some("name"), "{bad}");
        let weak = admin
            .add_user(
                &root.name,
                "carol",
                ConsoleRole::Viewer,
                Some(Password::new("short")),
            )
            .await
            .unwrap_err();
        assert_eq!(weak.field(), Some("password"), "{weak}");
        create(&admin, &root, "carol", ConsoleRole::Viewer).await;
        let dup = admin
            .add_user(&root.name, "carol", ConsoleRole::Admin, None)
            .await
            .unwrap_err();
        assert!(dup.to_string().contains("already exists"), "{dup}");
        assert!(dup.is_user_error());
        let listed = users.list().await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].role, ConsoleRole::Viewer);
    }

    #[tokio::test]
    async fn an_admin_cannot_disable_or_demote_themselves() {
        let (admin, users, root) = with_admin().await;
        for (role, disabled) in [(ConsoleRole::Admin, true), (ConsoleRole::Viewer, false)] {
            let err = admin
                .change_user_access(&root, "root", role, disabled)
                .await
                .unwrap_err();
            assert!(
                matches!(err, AdminError::User(UserError::SelfLockout)),
                "{err}"
            );
        }
        let me = users.get(root.id).await.unwrap().unwrap();
        assert_eq!((me.role, me.disabled), (ConsoleRole::Admin, false));
    }

    #[tokio::test]
    async fn no_change_may_leave_the_console_without_an_enabled_admin() {
        let (admin, users, root) = with_admin().await;
        let (other, _) = create(&admin, &root, "erin", ConsoleRole::Admin).await;
        // Erin may disable root while erin remains an enabled admin …
        admin
            .change_user_access(&other, "root", ConsoleRole::Admin, true)
            .await
            .unwrap();
        // … but then nobody may demote erin, who is the last one.
        let err = admin
            .change_user_access(&root, "erin", ConsoleRole::Viewer, false)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no enabled admin"), "{err}");
        let erin = users.get(other.id).await.unwrap().unwrap();
        assert_eq!(erin.role, ConsoleRole::Admin);
    }

    #[tokio::test]
    async fn a_disabled_user_cannot_sign_in_and_a_reset_password_replaces_the_old_one() {
        let (admin, users, root) = with_admin().await;
        let (_, first) = create(&admin, &root, "finn", ConsoleRole::Viewer).await;
        let kept = Password::new(first.expose());
        admin
            .change_user_access(&root, "finn", ConsoleRole::Viewer, true)
            .await
            .unwrap();
        assert!(
            users
                .login("finn", first, "10.0.0.4", Utc::now())
                .await
                .is_err()
        );
        admin
            .change_user_access(&root, "finn", ConsoleRole::Viewer, false)
            .await
            .unwrap();
        let second = admin.reset_user_password(&root.name, "finn").await.unwrap();
        assert!(
            users
                .login("finn", kept, "10.0.0.4", Utc::now())
                .await
                .is_err()
        );
        users
            .login("finn", second, "10.0.0.4", Utc::now())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn user_administration_is_audited_with_the_actor_and_before_and_after() {
        let (admin, _, root) = with_admin().await;
        create(&admin, &root, "gina", ConsoleRole::Viewer).await;
        admin
            .change_user_access(&root, "gina", ConsoleRole::Reviewer, false)
            .await
            .unwrap();
        // The same values again change nothing and write no event.
        admin
            .change_user_access(&root, "gina", ConsoleRole::Reviewer, false)
            .await
            .unwrap();
        let password = admin.reset_user_password(&root.name, "gina").await.unwrap();
        let events: Vec<_> = admin.audit().events(None).try_collect().await.unwrap();
        let changes: Vec<_> = events
            .iter()
            .map(|e| {
                (
                    e.actor.clone().unwrap_or_default(),
                    e.payload["action"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            changes,
            [
                ("cli".to_owned(), "console_user.create".to_owned()),
                ("root".to_owned(), "console_user.create".to_owned()),
                ("root".to_owned(), "console_user.update".to_owned()),
                ("root".to_owned(), "console_user.reset_password".to_owned()),
            ]
        );
        assert_eq!(events[2].payload["before"]["role"], "viewer");
        assert_eq!(events[2].payload["after"]["role"], "reviewer");
        let text = serde_json::to_string(&events[3].payload).unwrap();
        assert!(!text.contains(password.expose()));
        assert!(admin.audit().verify().await.unwrap().is_intact());
    }
}
