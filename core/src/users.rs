//! Console users: roles, password hashing and login.
//!
//! Passwords are hashed with argon2id on the blocking pool, never on the async runtime,
//! and at most [`PASSWORD_WORK_CONCURRENCY`] at a time in the process: each argon2 run
//! needs about 19 MiB, so a burst of sign-ins must queue, not allocate, and checks reuse
//! that memory from one to the next. Before a password is checked, the sign-in reserves a
//! slot of the failed-attempt budget in the database (one atomic statement), so a burst
//! beyond the budget is refused without any argon2 work, on every replica alike. A login
//! for an unknown user verifies against a dummy hash under the same budget and bound, so it
//! costs the same time as a known one and reveals nothing about who exists.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use argon2::password_hash::{Output, PasswordHash, PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use chrono::{DateTime, Duration, Utc};
use rand::Rng;
use rand::distributions::Alphanumeric;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::audit::AuditError;
use crate::metrics::Metrics;
use crate::store::{LoginBudget, Store, StoreError};

/// Failed logins allowed per user name, and per client address, within [`THROTTLE_WINDOW`].
pub const MAX_FAILURES_PER_USER: i64 = 5;
pub const MAX_FAILURES_PER_ADDRESS: i64 = 20;
pub const THROTTLE_WINDOW: Duration = Duration::minutes(15);
pub const MIN_PASSWORD_LEN: usize = 12;

/// The password hash of a user who signs in through the identity provider only: never a
/// valid PHC string, so no password matches it.
pub const NO_PASSWORD: &str = "!";

/// Password hashes computed or verified at once in this process. argon2 is CPU-bound, so
/// more than the cores would only add memory; two keeps a sign-in burst at about 40 MiB.
pub const PASSWORD_WORK_CONCURRENCY: usize = 2;

/// Process-wide, because the memory it protects is the process's, however many `Users`
/// handles exist.
static PASSWORD_WORK: Semaphore = Semaphore::const_new(PASSWORD_WORK_CONCURRENCY);

/// The longest user name stored with a failed attempt: no user has a longer one, and an
/// attacker's megabyte of name must not become a megabyte per row.
const MAX_NAME_LEN: usize = 64;

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

impl TryFrom<crate::store::users::UserRecord> for ConsoleUser {
    type Error = UserError;

    /// The user a stored row is; a role the store should never hold is an error.
    fn try_from(record: crate::store::users::UserRecord) -> Result<Self, UserError> {
        Ok(Self {
            id: record.id,
            role: record.role.parse()?,
            name: record.name,
            disabled: record.disabled,
        })
    }
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

impl UserError {
    /// Whether the admin can fix this by changing the input.
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            Self::UnknownRole(_)
                | Self::InvalidName
                | Self::WeakPassword
                | Self::SelfLockout
                | Self::Store(StoreError::Conflict(_) | StoreError::NotFound(_))
        )
    }

    /// The field of a user form the refusal is about.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::InvalidName => Some("name"),
            Self::UnknownRole(_) => Some("role"),
            Self::WeakPassword => Some("password"),
            _ => None,
        }
    }
}

/// A console user name: 1 to 64 ASCII letters, digits and `.`, `_`, `-`, `@` (an email
/// address, the name many identity providers give a person).
pub(crate) fn validate_name(name: &str) -> Result<(), UserError> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
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

/// Checks `password` against the PHC string `hash`, as `PasswordVerifier::verify_password`
/// does, but in `memory`, which the caller keeps for the next check: allocating argon2's
/// 19 MiB afresh for every check fragmented the allocator, and the server's peak memory
/// grew by that much with each failed sign-in (measured: +19 MiB per sequential check).
fn verify_blocking(password: &str, hash: &str, memory: &mut Vec<Block>) -> bool {
    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
        return false;
    };
    let (Ok(algorithm), Ok(version), Ok(params)) = (
        Algorithm::try_from(parsed.algorithm),
        parsed
            .version
            .map_or(Ok(Version::default()), Version::try_from),
        Params::try_from(&parsed),
    ) else {
        return false;
    };
    let mut salt_bytes = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    if memory.len() < params.block_count() {
        memory.resize(params.block_count(), Block::default());
    }
    let mut computed = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut computed, &mut memory[..])
        .is_ok()
        // `Output` compares in constant time.
        && Output::new(&computed).is_ok_and(|computed| computed == expected)
}

/// A valid argon2id hash of a password nobody knows, so unknown users cost a real verify.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        hash_password_blocking(Password::generate().expose()).expect("argon2 hashes a password")
    })
}

/// argon2's working memory, one buffer per [`PASSWORD_WORK`] permit, kept between checks.
static MEMORY: Mutex<Vec<Vec<Block>>> = Mutex::new(Vec::new());

/// Runs argon2 work on the blocking pool with a buffer from [`MEMORY`], holding a
/// [`PASSWORD_WORK`] permit until it ends. The permit moves into the blocking task, so a
/// sign-in request dropped while argon2 runs does not free a slot that is still computing.
async fn password_work<T: Send + 'static>(
    work: impl FnOnce(&mut Vec<Block>) -> T + Send + 'static,
) -> Result<T, UserError> {
    let permit = PASSWORD_WORK
        .acquire()
        .await
        .map_err(|_| UserError::Hashing)?;
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let pool = || MEMORY.lock().unwrap_or_else(PoisonError::into_inner);
        let mut memory = pool().pop().unwrap_or_default();
        let result = work(&mut memory);
        pool().push(memory);
        result
    })
    .await
    .map_err(|_| UserError::Hashing)
}

async fn hash_password(password: Password) -> Result<String, UserError> {
    password_work(move |_| hash_password_blocking(password.expose())).await?
}

/// Checks a new user's name and password and hashes the password (on the blocking pool),
/// before anything is stored.
pub(crate) async fn new_password_hash(name: &str, password: Password) -> Result<String, UserError> {
    validate_name(name)?;
    if password.expose().chars().count() < MIN_PASSWORD_LEN {
        return Err(UserError::WeakPassword);
    }
    hash_password(password).await
}

/// The first [`MAX_NAME_LEN`] bytes of `name` (on a character boundary).
fn budget_name(name: &str) -> &str {
    let mut end = name.len().min(MAX_NAME_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Console user management and sign-in.
#[derive(Clone, Debug)]
pub struct Users {
    store: Store,
    metrics: Option<Arc<Metrics>>,
}

impl Users {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            metrics: None,
        }
    }

    /// Counts every password verification in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Verifies `password` against `hash`, or against the dummy hash when there is no user.
    async fn verify(&self, password: Password, hash: Option<String>) -> Result<bool, UserError> {
        let metrics = self.metrics.clone();
        password_work(move |memory| {
            if let Some(metrics) = metrics {
                metrics.count_password_verification();
            }
            let hash = hash.as_deref().unwrap_or_else(|| dummy_hash());
            verify_blocking(password.expose(), hash, memory)
        })
        .await
    }

    /// Creates a user directly, without an audit event: for tests of sign-in only. Real
    /// user administration goes through [`crate::admin::AdminService`].
    #[cfg(test)]
    pub(crate) async fn add(
        &self,
        name: &str,
        role: ConsoleRole,
        password: Password,
    ) -> Result<ConsoleUser, UserError> {
        let hash = new_password_hash(name, password).await?;
        let id = self.store.insert_user(name, role.as_str(), &hash).await?;
        Ok(ConsoleUser {
            id,
            name: name.to_owned(),
            role,
            disabled: false,
        })
    }

    pub async fn get(&self, id: i64) -> Result<Option<ConsoleUser>, UserError> {
        self.store
            .find_user_by_id(id)
            .await?
            .map(ConsoleUser::try_from)
            .transpose()
    }

    /// The issuer each user made by single sign-on signs in with, by user id.
    pub async fn sso_issuers(&self) -> Result<std::collections::HashMap<i64, String>, UserError> {
        Ok(self.store.console_user_issuers().await?)
    }

    pub async fn list(&self) -> Result<Vec<ConsoleUser>, UserError> {
        self.store
            .list_users()
            .await?
            .into_iter()
            .map(ConsoleUser::try_from)
            .collect()
    }

    /// Checks a name and password. Throttled per user name and per client address; the
    /// error never says whether the user exists.
    ///
    /// Every attempt first takes a slot of the failed-attempt budget (it counts as a
    /// failure unless it succeeds, which clears the user's failures), so the budget bounds
    /// how many passwords are verified, however many requests arrive at once.
    #[tracing::instrument(skip(self, password))]
    pub async fn login(
        &self,
        name: &str,
        password: Password,
        address: &str,
        now: DateTime<Utc>,
    ) -> Result<ConsoleUser, UserError> {
        let since = now - THROTTLE_WINDOW;
        let budget = LoginBudget {
            per_user: MAX_FAILURES_PER_USER,
            per_address: MAX_FAILURES_PER_ADDRESS,
        };
        let reserved = self
            .store
            .reserve_login_attempt(budget_name(name), address, now, since, budget)
            .await?;
        if reserved.is_none() {
            return Err(UserError::Throttled {
                minutes: THROTTLE_WINDOW.num_minutes(),
            });
        }
        // No user has a name outside the rules, and the rules are public: nothing to hide
        // by verifying, so such an attempt costs a slot and no argon2 work.
        if validate_name(name).is_err() {
            return Err(UserError::InvalidCredentials);
        }
        let record = self.store.find_user(name).await?;
        // A user without a password is verified against the dummy hash, as an unknown one
        // is: the same time, so a sign-in attempt cannot tell such users from others.
        let hash = record
            .as_ref()
            .map(|r| r.password_hash.clone())
            .filter(|hash| hash != NO_PASSWORD);
        let matches = self.verify(password, hash).await?;
        match record {
            Some(record) if matches && !record.disabled => {
                self.store.clear_login_failures(name, since).await?;
                ConsoleUser::try_from(record)
            }
            // The reserved slot stays: it is this failure.
            _ => Err(UserError::InvalidCredentials),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_store;

    async fn users() -> Users {
        Users::new(test_store().await)
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

    #[test]
    fn a_check_in_reused_memory_agrees_with_the_argon2_crate() {
        let hash = hash_password_blocking("correct horse battery").unwrap();
        let small = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(64, 1, 1, None).unwrap(),
        )
        .hash_password(
            b"little memory",
            &SaltString::generate(&mut argon2::password_hash::rand_core::OsRng),
        )
        .unwrap()
        .to_string();
        let mut memory = Vec::new();
        // The same buffer, dirty from every check before, for each of these.
        for _ in 0..2 {
            assert!(verify_blocking("correct horse battery", &hash, &mut memory));
            assert!(!verify_blocking(
                "correct horse batterx",
                &hash,
                &mut memory
            ));
            assert!(verify_blocking("little memory", &small, &mut memory));
            assert!(!verify_blocking("little memorx", &small, &mut memory));
        }
        for broken in ["", "$argon2id$v=19$m=64,t=1,p=1$bm9zYWx0$", "plain text"] {
            assert!(!verify_blocking("", broken, &mut memory), "{broken}");
        }
        let crate_says = |password: &str| {
            argon2::PasswordVerifier::verify_password(
                &Argon2::default(),
                password.as_bytes(),
                &PasswordHash::new(&hash).unwrap(),
            )
            .is_ok()
        };
        assert!(crate_says("correct horse battery") && !crate_says("correct horse batterx"));
    }

    fn verifications(metrics: &Metrics) -> u64 {
        metrics
            .render()
            .lines()
            .find_map(|line| line.strip_prefix("skillgate_password_verifications_total "))
            .and_then(|value| value.trim().parse().ok())
            .expect("the verification counter is rendered")
    }

    async fn counted_users() -> (Users, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new());
        (
            Users::new(test_store().await).with_metrics(metrics.clone()),
            metrics,
        )
    }

    #[tokio::test]
    async fn a_burst_of_wrong_passwords_verifies_at_most_the_budget() {
        let (users, metrics) = counted_users().await;
        users
            .add(
                "hana",
                ConsoleRole::Admin,
                Password::new("correct horse battery"),
            )
            .await
            .unwrap();
        let now = Utc::now();
        let attempts = (0..40).map(|i| {
            let users = users.clone();
            async move {
                users
                    .login(
                        "hana",
                        Password::new(format!("wrong-{i}")),
                        &format!("10.1.0.{i}"),
                        now,
                    )
                    .await
            }
        });
        let outcomes = futures::future::join_all(attempts).await;
        let invalid = outcomes
            .iter()
            .filter(|o| matches!(o, Err(UserError::InvalidCredentials)))
            .count();
        let throttled = outcomes
            .iter()
            .filter(|o| matches!(o, Err(UserError::Throttled { .. })))
            .count();
        assert_eq!(
            (invalid, throttled),
            (
                MAX_FAILURES_PER_USER as usize,
                40 - MAX_FAILURES_PER_USER as usize
            )
        );
        assert_eq!(verifications(&metrics), MAX_FAILURES_PER_USER as u64);
    }

    #[tokio::test]
    async fn an_unknown_user_costs_a_dummy_verification_under_the_same_budget() {
        let (users, metrics) = counted_users().await;
        let now = Utc::now();
        for _ in 0..MAX_FAILURES_PER_USER {
            let err = users
                .login("nobody", Password::new("guess"), "10.2.0.1", now)
                .await
                .unwrap_err();
            assert!(matches!(err, UserError::InvalidCredentials), "{err}");
        }
        assert_eq!(verifications(&metrics), MAX_FAILURES_PER_USER as u64);
        let err = users
            .login("nobody", Password::new("guess"), "10.2.0.2", now)
            .await
            .unwrap_err();
        assert!(matches!(err, UserError::Throttled { .. }), "{err}");
        assert_eq!(verifications(&metrics), MAX_FAILURES_PER_USER as u64);
    }

    #[tokio::test]
    async fn a_name_no_user_can_have_costs_a_slot_but_no_argon2_and_is_stored_short() {
        let (users, metrics) = counted_users().await;
        let now = Utc::now();
        let long = "é".repeat(10_000);
        let err = users
            .login(&long, Password::new("guess"), "10.3.0.1", now)
            .await
            .unwrap_err();
        assert!(matches!(err, UserError::InvalidCredentials), "{err}");
        assert_eq!(verifications(&metrics), 0);
        let stored: Vec<String> = sqlx::query_scalar("SELECT user_name FROM login_failures")
            .fetch_all(users.store.pool())
            .await
            .unwrap();
        assert_eq!(stored, [budget_name(&long).to_owned()]);
        assert!(stored[0].len() <= MAX_NAME_LEN);
    }

    #[tokio::test]
    async fn a_successful_sign_in_frees_its_slot_and_the_users_failures() {
        let users = users().await;
        users
            .add(
                "ivan",
                ConsoleRole::Viewer,
                Password::new("correct horse battery"),
            )
            .await
            .unwrap();
        let now = Utc::now();
        for _ in 0..MAX_FAILURES_PER_USER - 1 {
            let _ = users
                .login("ivan", Password::new("bad"), "10.4.0.1", now)
                .await;
        }
        users
            .login(
                "ivan",
                Password::new("correct horse battery"),
                "10.4.0.1",
                now,
            )
            .await
            .unwrap();
        let counts = users
            .store
            .login_failures_since("ivan", "10.4.0.1", now - THROTTLE_WINDOW)
            .await
            .unwrap();
        assert_eq!((counts.for_user, counts.for_address), (0, 0));
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
}
