//! SQL for console users and login throttling.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::Tx;
use super::{Store, StoreError, stamp};

/// A console user row. Holds the password *hash*, so it is deliberately neither
/// `Serialize` nor printed with its hash by `Debug`.
#[derive(Clone)]
pub struct UserRecord {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub password_hash: String,
    pub disabled: bool,
}

impl std::fmt::Debug for UserRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserRecord")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("role", &self.role)
            .field("disabled", &self.disabled)
            .finish_non_exhaustive()
    }
}

/// Failed sign-ins allowed within the throttle window, per user name and per address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginBudget {
    pub per_user: i64,
    pub per_address: i64,
}

/// Recent failed logins for one user name and for one client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginAttemptCounts {
    pub for_user: i64,
    pub for_address: i64,
}

pub(crate) fn user_from_row(row: &sqlx::any::AnyRow) -> Result<UserRecord, sqlx::Error> {
    Ok(UserRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: row.try_get("role")?,
        password_hash: row.try_get("password_hash")?,
        disabled: row.try_get::<i64, _>("disabled")? != 0,
    })
}

impl Store {
    pub async fn count_users(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) FROM console_users")
            .fetch_one(self.pool())
            .await?)
    }

    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn insert_user(
        &self,
        name: &str,
        role: &str,
        password_hash: &str,
    ) -> Result<i64, StoreError> {
        let mut conn = self.pool().acquire().await?;
        insert_user_on(Tx::wrap(&mut conn), name, role, password_hash).await
    }

    pub async fn find_user(&self, name: &str) -> Result<Option<UserRecord>, StoreError> {
        let row = sqlx::query("SELECT * FROM console_users WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.as_ref().map(user_from_row).transpose()?)
    }

    pub async fn find_user_by_id(&self, id: i64) -> Result<Option<UserRecord>, StoreError> {
        let row = sqlx::query("SELECT * FROM console_users WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.as_ref().map(user_from_row).transpose()?)
    }

    pub async fn list_users(&self) -> Result<Vec<UserRecord>, StoreError> {
        let rows = sqlx::query("SELECT * FROM console_users ORDER BY name")
            .fetch_all(self.pool())
            .await?;
        Ok(rows.iter().map(user_from_row).collect::<Result<_, _>>()?)
    }

    #[cfg(any(test, feature = "dev-tools"))]
    pub async fn set_user_password(
        &self,
        name: &str,
        password_hash: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        set_user_password_on(Tx::wrap(&mut conn), name, password_hash).await
    }

    /// Reserves one failed-sign-in slot for `user_name` and for `address` before the
    /// password is checked, only while both have fewer than their budget since `since`.
    /// Returns the slot's row id, or `None` when either budget is spent.
    ///
    /// The counts and the insert run under the write lock ([`Store::begin_write`]), so two
    /// requests (or two replicas on one database) cannot both take the last slot.
    pub async fn reserve_login_attempt(
        &self,
        user_name: &str,
        address: &str,
        at: DateTime<Utc>,
        since: DateTime<Utc>,
        budget: LoginBudget,
    ) -> Result<Option<i64>, StoreError> {
        let (mut tx, _held) = self.begin_write().await?;
        let slot = sqlx::query_scalar(
            "INSERT INTO login_failures (user_name, address, at)
             SELECT $1, $2, $3
             WHERE (SELECT COUNT(*) FROM login_failures WHERE user_name = $1 AND at >= $4) < $5
               AND (SELECT COUNT(*) FROM login_failures WHERE address = $2 AND at >= $4) < $6
             RETURNING id",
        )
        .bind(user_name)
        .bind(address)
        .bind(stamp(at))
        .bind(stamp(since))
        .bind(budget.per_user)
        .bind(budget.per_address)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(slot)
    }

    pub async fn login_failures_since(
        &self,
        user_name: &str,
        address: &str,
        since: DateTime<Utc>,
    ) -> Result<LoginAttemptCounts, StoreError> {
        let since = stamp(since);
        let for_user: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM login_failures WHERE user_name = $1 AND at >= $2",
        )
        .bind(user_name)
        .bind(&since)
        .fetch_one(self.pool())
        .await?;
        let for_address: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM login_failures WHERE address = $1 AND at >= $2",
        )
        .bind(address)
        .bind(&since)
        .fetch_one(self.pool())
        .await?;
        Ok(LoginAttemptCounts {
            for_user,
            for_address,
        })
    }

    /// Forgets a user's failures (and the slot the successful sign-in reserved) after a
    /// successful login, and prunes rows older than `before`.
    pub async fn clear_login_failures(
        &self,
        user_name: &str,
        before: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut conn = self.pool().acquire().await?;
        clear_login_failures_on(Tx::wrap(&mut conn), user_name, before).await
    }
}

pub(crate) async fn insert_user_on(
    conn: &mut Tx,
    name: &str,
    role: &str,
    password_hash: &str,
) -> Result<i64, StoreError> {
    let conn = conn.conn();
    let now = stamp(Utc::now());
    let result = sqlx::query_scalar::<_, i64>(
        "INSERT INTO console_users (name, role, password_hash, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(name)
    .bind(role)
    .bind(password_hash)
    .bind(&now)
    .bind(&now)
    .fetch_one(&mut *conn)
    .await;
    match result {
        Ok(id) => Ok(id),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(StoreError::Conflict(
            format!("a console user named `{name}` already exists"),
        )),
        Err(e) => Err(e.into()),
    }
}

pub(crate) async fn set_user_password_on(
    conn: &mut Tx,
    name: &str,
    password_hash: &str,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    let done =
        sqlx::query("UPDATE console_users SET password_hash = $1, updated_at = $2 WHERE name = $3")
            .bind(password_hash)
            .bind(stamp(Utc::now()))
            .bind(name)
            .execute(&mut *conn)
            .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound(format!("console user `{name}`")));
    }
    Ok(())
}

pub(crate) async fn clear_login_failures_on(
    conn: &mut Tx,
    user_name: &str,
    before: DateTime<Utc>,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    sqlx::query("DELETE FROM login_failures WHERE user_name = $1 OR at < $2")
        .bind(user_name)
        .bind(stamp(before))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Sets a user's console role and disabled flag, refusing any change that would leave no
/// enabled admin (nobody could then manage the console); the caller's transaction rolls
/// the update back on that error. Returns the row as it was before, for the audit.
pub(crate) async fn update_user_access_on(
    conn: &mut Tx,
    name: &str,
    role: &str,
    disabled: bool,
) -> Result<UserRecord, StoreError> {
    let conn = conn.conn();
    let before = sqlx::query("SELECT * FROM console_users WHERE name = $1")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?
        .as_ref()
        .map(user_from_row)
        .transpose()?
        .ok_or_else(|| StoreError::NotFound(format!("console user `{name}`")))?;
    sqlx::query(
        "UPDATE console_users SET role = $1, disabled = $2, updated_at = $3 WHERE name = $4",
    )
    .bind(role)
    .bind(i64::from(disabled))
    .bind(stamp(Utc::now()))
    .bind(name)
    .execute(&mut *conn)
    .await?;
    let admins: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM console_users WHERE role = 'admin' AND disabled = 0",
    )
    .fetch_one(&mut *conn)
    .await?;
    if admins == 0 {
        return Err(StoreError::Conflict(
            "this would leave no enabled admin; make someone else admin first".to_owned(),
        ));
    }
    Ok(before)
}

/// How many console users there are, on a given connection.
pub(crate) async fn count_users_on(conn: &mut Tx) -> Result<i64, StoreError> {
    let conn = conn.conn();
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM console_users")
        .fetch_one(&mut *conn)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: LoginBudget = LoginBudget {
        per_user: 5,
        per_address: 20,
    };

    async fn reserve_many(store: &Store, n: usize, now: DateTime<Utc>) -> usize {
        let attempts = (0..n).map(|i| {
            let store = store.clone();
            async move {
                store
                    .reserve_login_attempt(
                        "admin",
                        &format!("10.0.0.{i}"),
                        now,
                        now - chrono::Duration::minutes(15),
                        BUDGET,
                    )
                    .await
                    .unwrap()
            }
        });
        futures::future::join_all(attempts)
            .await
            .into_iter()
            .filter(Option::is_some)
            .count()
    }

    #[tokio::test]
    async fn two_stores_on_one_database_file_never_both_take_the_last_slot() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("sg.db").display());
        let (first, second) = (
            Store::open(&url).await.unwrap(),
            Store::open(&url).await.unwrap(),
        );
        let now = Utc::now();
        let (a, b) = tokio::join!(
            reserve_many(&first, 20, now),
            reserve_many(&second, 20, now)
        );
        assert_eq!(a + b, 5, "{a} + {b} slots taken of a budget of 5");
        let counts = first
            .login_failures_since("admin", "10.0.0.1", now - chrono::Duration::minutes(15))
            .await
            .unwrap();
        assert_eq!(counts.for_user, 5);
    }

    #[tokio::test]
    async fn the_address_budget_binds_across_user_names_and_old_attempts_fall_out_of_it() {
        let store = crate::store::test_store().await;
        let now = Utc::now();
        let since = now - chrono::Duration::minutes(15);
        for i in 0..20 {
            let name = format!("user-{i}");
            assert!(
                store
                    .reserve_login_attempt(&name, "10.9.9.9", now, since, BUDGET)
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        assert!(
            store
                .reserve_login_attempt("fresh", "10.9.9.9", now, since, BUDGET)
                .await
                .unwrap()
                .is_none()
        );
        // A window later the old attempts no longer count.
        let later = now + chrono::Duration::minutes(16);
        assert!(
            store
                .reserve_login_attempt(
                    "fresh",
                    "10.9.9.9",
                    later,
                    later - chrono::Duration::minutes(15),
                    BUDGET
                )
                .await
                .unwrap()
                .is_some()
        );
    }
}
