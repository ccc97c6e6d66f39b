//! Console users: roles, password hashing and login.
//!
//! Passwords are hashed with argon2id on the blocking pool, never on the async runtime.
//! A login for an unknown user verifies against a dummy hash so it costs the same time as
//! a known one and reveals nothing about who exists.

use std::fmt;
use std::sync::OnceLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use chrono::{DateTime, Duration, Utc};
use rand::Rng;
use rand::distributions::Alphanumeric;
use serde::{Deserialize, Serialize};

use crate::audit::{AuditError, AuditLog, NewEvent};
use crate::store::{Store, StoreError};

/// Failed logins allowed per user name, and per client address, within [`THROTTLE_WINDOW`].
pub const MAX_FAILURES_PER_USER: i64 = 5;
pub const MAX_FAILURES_PER_ADDRESS: i64 = 20;
pub const THROTTLE_WINDOW: Duration = Duration::minutes(15);
pub const MIN_PASSWORD_LEN: usize = 12;

/// What a console user may do. Ordered: admin ⊇ reviewer ⊇ viewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsoleRole {
    Viewer,
    Reviewer,
    Admin,
}

impl ConsoleRole {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Reviewer => "reviewer",
            Self::Admin => "admin",
        }
    }

    /// True when this role includes everything `needed` may do.
    pub fn allows(self, needed: ConsoleRole) -> bool {
        self >= needed
    }
}

impl fmt::Display for ConsoleRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ConsoleRole {
    type Err = UserError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "admin" => Ok(Self::Admin),
            "reviewer" => Ok(Self::Reviewer),
            "viewer" => Ok(Self::Viewer),
            other => Err(UserError::UnknownRole(other.to_owned())),
        }
    }
}

/// A signed-in (or listable) console user, without any secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsoleUser {
    pub id: i64,
    pub name: String,
    pub role: ConsoleRole,
    pub disabled: bool,
}

/// A password in transit. Never printed, never serialized.
pub struct Password(String);

impl Password {
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// A fresh random password for the first admin: 24 alphanumerics ≈ 142 bits.
    pub fn generate() -> Self {
        Self(
            rand::thread_rng()
                .sample_iter(&Alphanumeric)
                .take(24)
                .map(char::from)
                .collect(),
        )
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("unknown console role `{0}`: use admin, reviewer or viewer")]
    UnknownRole(String),
    #[error("a user name is 1 to 64 characters of letters, digits, `.`, `_` or `-`")]
    InvalidName,
    #[error("a password needs at least {MIN_PASSWORD_LEN} characters")]
    WeakPassword,
    /// Deliberately vague: never says whether the user exists.
    #[error("wrong user name or password")]
    InvalidCredentials,
    #[error("too many failed sign-ins; wait {minutes} minutes and try again")]
    Throttled { minutes: i64 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("password hashing failed")]
    Hashing,
    #[error("you cannot disable yourself or lower your own console role; ask another admin")]
    SelfLockout,
    #[error(transparent)]
    Audit(#[from] AuditError),
}

fn validate_name(name: &str) -> Result<(), UserError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(UserError::InvalidName)
    }
}

fn hash_password_blocking(password: &str) -> Result<String, UserError> {
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|_| UserError::Hashing)
}

fn verify_blocking(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A valid argon2id hash of a password nobody knows, so unknown users cost a real verify.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        hash_password_blocking(Password::generate().expose()).expect("argon2 hashes a password")
    })
}

async fn hash_password(password: Password) -> Result<String, UserError> {
    tokio::task::spawn_blocking(move || hash_password_blocking(password.expose()))
        .await
        .map_err(|_| UserError::Hashing)?
}

/// Console user management and sign-in.
#[derive(Clone, Debug)]
pub struct Users {
    store: Store,
}

impl Users {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Creates the `admin` user with a random password when there are no users at all.
    /// Returns the password so the caller can show it exactly once.
    #[tracing::instrument(skip(self))]
    pub async fn bootstrap_admin(&self) -> Result<Option<Password>, UserError> {
        if self.store.count_users().await? > 0 {
            return Ok(None);
        }
        let password = Password::generate();
        let shown = Password::new(password.expose());
        self.add("admin", ConsoleRole::Admin, password).await?;
        Ok(Some(shown))
    }

    #[tracing::instrument(skip(self, password))]
    pub async fn add(
        &self,
        name: &str,
        role: ConsoleRole,
        password: Password,
    ) -> Result<ConsoleUser, UserError> {
        validate_name(name)?;
        if password.expose().chars().count() < MIN_PASSWORD_LEN {
            return Err(UserError::WeakPassword);
        }
        let hash = hash_password(password).await?;
        let id = self.store.insert_user(name, role.as_str(), &hash).await?;
        Ok(ConsoleUser {
            id,
            name: name.to_owned(),
            role,
            disabled: false,
        })
    }

    #[tracing::instrument(skip(self, password))]
    pub async fn set_password(&self, name: &str, password: Password) -> Result<(), UserError> {
        if password.expose().chars().count() < MIN_PASSWORD_LEN {
            return Err(UserError::WeakPassword);
        }
        let hash = hash_password(password).await?;
        self.store.set_user_password(name, &hash).await?;
        Ok(())
    }

    pub async fn get(&self, id: i64) -> Result<Option<ConsoleUser>, UserError> {
        let Some(record) = self.store.find_user_by_id(id).await? else {
            return Ok(None);
        };
        Ok(Some(ConsoleUser {
            id: record.id,
            role: record.role.parse()?,
            name: record.name,
            disabled: record.disabled,
        }))
    }

    pub async fn list(&self) -> Result<Vec<ConsoleUser>, UserError> {
        self.store
            .list_users()
            .await?
            .into_iter()
            .map(|r| {
                Ok(ConsoleUser {
                    id: r.id,
                    role: r.role.parse()?,
                    name: r.name,
                    disabled: r.disabled,
                })
            })
            .collect()
    }

    /// Checks a name and password. Throttled per user name and per client address; the
    /// error never says whether the user exists.
    #[tracing::instrument(skip(self, password))]
    pub async fn login(
        &self,
        name: &str,
        password: Password,
        address: &str,
        now: DateTime<Utc>,
    ) -> Result<ConsoleUser, UserError> {
        let since = now - THROTTLE_WINDOW;
        let recent = self
            .store
            .login_failures_since(name, address, since)
            .await?;
        if recent.for_user >= MAX_FAILURES_PER_USER
            || recent.for_address >= MAX_FAILURES_PER_ADDRESS
        {
            return Err(UserError::Throttled {
                minutes: THROTTLE_WINDOW.num_minutes(),
            });
        }
        let record = self.store.find_user(name).await?;
        let hash = record
            .as_ref()
            .map(|r| r.password_hash.clone())
            .unwrap_or_else(|| dummy_hash().to_owned());
        let matches =
            tokio::task::spawn_blocking(move || verify_blocking(password.expose(), &hash))
                .await
                .map_err(|_| UserError::Hashing)?;
        match record {
            Some(record) if matches && !record.disabled => {
                self.store.clear_login_failures(name, since).await?;
                Ok(ConsoleUser {
                    id: record.id,
                    role: record.role.parse()?,
                    name: record.name,
                    disabled: false,
                })
            }
            _ => {
                self.store.record_login_failure(name, address, now).await?;
                Err(UserError::InvalidCredentials)
            }
        }
    }
}

/// User administration by a signed-in admin (the console's Users page). Every change is an
/// audited admin change naming who made it; passwords are generated here and returned once,
/// so an admin never has to invent, type or see a reusable one twice.
impl Users {
    #[tracing::instrument(skip(self, actor), fields(actor = %actor.name))]
    pub async fn create(
        &self,
        actor: &ConsoleUser,
        name: &str,
        role: ConsoleRole,
    ) -> Result<(ConsoleUser, Password), UserError> {
        let password = Password::generate();
        let user = self
            .add(name, role, Password::new(password.expose()))
            .await?;
        self.audit(
            actor,
            "console_user.create",
            name,
            serde_json::Value::Null,
            access_json(&user),
        )
        .await?;
        Ok((user, password))
    }

    /// Sets a user's console role and disabled flag. An admin may not lock themselves out,
    /// and no change may leave the console without an enabled admin.
    #[tracing::instrument(skip(self, actor), fields(actor = %actor.name))]
    pub async fn change_access(
        &self,
        actor: &ConsoleUser,
        name: &str,
        role: ConsoleRole,
        disabled: bool,
    ) -> Result<ConsoleUser, UserError> {
        if actor.name == name && (disabled || role != actor.role) {
            return Err(UserError::SelfLockout);
        }
        let before = self
            .store
            .update_user_access(name, role.as_str(), disabled)
            .await?;
        let before = ConsoleUser {
            id: before.id,
            role: before.role.parse()?,
            name: before.name,
            disabled: before.disabled,
        };
        let after = ConsoleUser {
            role,
            disabled,
            ..before.clone()
        };
        if before != after {
            self.audit(
                actor,
                "console_user.update",
                name,
                access_json(&before),
                access_json(&after),
            )
            .await?;
        }
        Ok(after)
    }

    /// Replaces a user's password with a fresh random one and lifts their sign-in throttle.
    #[tracing::instrument(skip(self, actor), fields(actor = %actor.name))]
    pub async fn reset_password(
        &self,
        actor: &ConsoleUser,
        name: &str,
    ) -> Result<Password, UserError> {
        let password = Password::generate();
        self.set_password(name, Password::new(password.expose()))
            .await?;
        self.store
            .clear_login_failures(name, Utc::now() - THROTTLE_WINDOW)
            .await?;
        // The audit says that it happened, never what the password is.
        self.audit(
            actor,
            "console_user.reset_password",
            name,
            serde_json::Value::Null,
            serde_json::Value::Null,
        )
        .await?;
        Ok(password)
    }

    async fn audit(
        &self,
        actor: &ConsoleUser,
        action: &str,
        name: &str,
        before: serde_json::Value,
        after: serde_json::Value,
    ) -> Result<(), UserError> {
        AuditLog::new(self.store.clone())
            .append(NewEvent::admin_change(
                &actor.name,
                action,
                &format!("console_user:{name}"),
                before,
                after,
            ))
            .await?;
        Ok(())
    }
}

fn access_json(user: &ConsoleUser) -> serde_json::Value {
    serde_json::json!({ "role": user.role.as_str(), "disabled": user.disabled })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_store;

    async fn users() -> Users {
        Users::new(test_store().await)
    }

    #[tokio::test]
    async fn the_first_start_creates_one_admin_and_the_second_start_creates_none() {
        let users = users().await;
        let password = users
            .bootstrap_admin()
            .await
            .unwrap()
            .expect("a new password");
        assert_eq!(password.expose().len(), 24);
        assert!(users.bootstrap_admin().await.unwrap().is_none());
        let signed_in = users
            .login("admin", password, "127.0.0.1", Utc::now())
            .await
            .unwrap();
        assert_eq!(signed_in.role, ConsoleRole::Admin);
    }

    #[tokio::test]
    async fn a_wrong_password_and_an_unknown_user_get_the_same_error() {
        let users = users().await;
        users
            .add(
                "alice",
                ConsoleRole::Viewer,
                Password::new("correct horse battery"),
            )
            .await
            .unwrap();
        let wrong = users
            .login("alice", Password::new("nope"), "10.0.0.1", Utc::now())
            .await
            .unwrap_err();
        let unknown = users
            .login("mallory", Password::new("nope"), "10.0.0.1", Utc::now())
            .await
            .unwrap_err();
        assert_eq!(wrong.to_string(), unknown.to_string());
        assert!(matches!(wrong, UserError::InvalidCredentials));
    }

    #[tokio::test]
    async fn repeated_failures_throttle_the_user_even_with_the_right_password() {
        let users = users().await;
        users
            .add(
                "bob",
                ConsoleRole::Admin,
                Password::new("correct horse battery"),
            )
            .await
            .unwrap();
        let now = Utc::now();
        for _ in 0..MAX_FAILURES_PER_USER {
            let _ = users
                .login("bob", Password::new("bad"), "10.0.0.2", now)
                .await;
        }
        let err = users
            .login(
                "bob",
                Password::new("correct horse battery"),
                "10.0.0.3",
                now,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, UserError::Throttled { .. }), "{err}");
        // Once the window has passed, the right password works again.
        let later = now + THROTTLE_WINDOW + Duration::seconds(1);
        users
            .login(
                "bob",
                Password::new("correct horse battery"),
                "10.0.0.3",
                later,
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn bad_names_short_passwords_and_duplicates_are_refused_and_change_nothing() {
        let users = users().await;
        assert!(matches!(
            users
                .add("a b", ConsoleRole::Viewer, Password::new("long enough pw"))
                .await,
            Err(UserError::InvalidName)
        ));
        assert!(matches!(
            users
                .add("carol", ConsoleRole::Viewer, Password::new("short"))
                .await,
            Err(UserError::WeakPassword)
        ));
        users
            .add(
                "carol",
                ConsoleRole::Viewer,
                Password::new("long enough pw"),
            )
            .await
            .unwrap();
        let dup = users
            .add("carol", ConsoleRole::Admin, Password::new("long enough pw"))
            .await
            .unwrap_err();
        assert!(dup.to_string().contains("already exists"), "{dup}");
        assert_eq!(users.list().await.unwrap().len(), 1);
        assert_eq!(users.list().await.unwrap()[0].role, ConsoleRole::Viewer);
    }

    #[test]
    fn roles_are_ordered_admin_over_reviewer_over_viewer() {
        assert!(ConsoleRole::Admin.allows(ConsoleRole::Reviewer));
        assert!(ConsoleRole::Reviewer.allows(ConsoleRole::Viewer));
        assert!(!ConsoleRole::Viewer.allows(ConsoleRole::Reviewer));
        assert!(!ConsoleRole::Reviewer.allows(ConsoleRole::Admin));
    }

    #[test]
    fn a_password_never_shows_in_debug_output() {
        assert!(!format!("{:?}", Password::new("hunter2hunter2")).contains("hunter2"));
    }

    async fn users_with_admin() -> (Users, ConsoleUser) {
        let users = users().await;
        let admin = users
            .add("root", ConsoleRole::Admin, Password::new("long enough pw"))
            .await
            .unwrap();
        (users, admin)
    }

    #[tokio::test]
    async fn an_admin_creates_a_user_whose_generated_password_signs_in() {
        let (users, admin) = users_with_admin().await;
        let (created, password) = users
            .create(&admin, "dana", ConsoleRole::Reviewer)
            .await
            .unwrap();
        assert_eq!(created.role, ConsoleRole::Reviewer);
        let signed_in = users
            .login("dana", password, "10.0.0.9", Utc::now())
            .await
            .unwrap();
        assert_eq!(signed_in.name, "dana");
    }

    #[tokio::test]
    async fn an_admin_cannot_disable_or_demote_themselves() {
        let (users, admin) = users_with_admin().await;
        for (role, disabled) in [(ConsoleRole::Admin, true), (ConsoleRole::Viewer, false)] {
            let err = users
                .change_access(&admin, "root", role, disabled)
                .await
                .unwrap_err();
            assert!(matches!(err, UserError::SelfLockout), "{err}");
        }
        let me = users.get(admin.id).await.unwrap().unwrap();
        assert_eq!((me.role, me.disabled), (ConsoleRole::Admin, false));
    }

    #[tokio::test]
    async fn no_change_may_leave_the_console_without_an_enabled_admin() {
        let (users, admin) = users_with_admin().await;
        let (other, _) = users
            .create(&admin, "erin", ConsoleRole::Admin)
            .await
            .unwrap();
        // Erin may disable root while erin remains an enabled admin …
        users
            .change_access(&other, "root", ConsoleRole::Admin, true)
            .await
            .unwrap();
        // … but then nobody may demote erin, who is the last one.
        let err = users
            .change_access(&admin, "erin", ConsoleRole::Viewer, false)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no enabled admin"), "{err}");
        let erin = users.get(other.id).await.unwrap().unwrap();
        assert_eq!(erin.role, ConsoleRole::Admin);
    }

    #[tokio::test]
    async fn a_disabled_user_cannot_sign_in_and_a_reset_password_replaces_the_old_one() {
        let (users, admin) = users_with_admin().await;
        let (_, first) = users
            .create(&admin, "finn", ConsoleRole::Viewer)
            .await
            .unwrap();
        let kept = Password::new(first.expose());
        users
            .change_access(&admin, "finn", ConsoleRole::Viewer, true)
            .await
            .unwrap();
        assert!(
            users
                .login("finn", first, "10.0.0.4", Utc::now())
                .await
                .is_err()
        );
        users
            .change_access(&admin, "finn", ConsoleRole::Viewer, false)
            .await
            .unwrap();
        let second = users.reset_password(&admin, "finn").await.unwrap();
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
        let (users, admin) = users_with_admin().await;
        users
            .create(&admin, "gina", ConsoleRole::Viewer)
            .await
            .unwrap();
        users
            .change_access(&admin, "gina", ConsoleRole::Reviewer, false)
            .await
            .unwrap();
        let password = users.reset_password(&admin, "gina").await.unwrap();
        use futures::TryStreamExt;
        let log = AuditLog::new(users.store.clone());
        let events: Vec<_> = log.events(None).try_collect().await.unwrap();
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
                ("root".to_owned(), "console_user.create".to_owned()),
                ("root".to_owned(), "console_user.update".to_owned()),
                ("root".to_owned(), "console_user.reset_password".to_owned()),
            ]
        );
        assert_eq!(events[1].payload["before"]["role"], "viewer");
        assert_eq!(events[1].payload["after"]["role"], "reviewer");
        let text = serde_json::to_string(&events[2].payload).unwrap();
        assert!(!text.contains(password.expose()));
        assert!(log.verify().await.unwrap().is_intact());
    }
}
