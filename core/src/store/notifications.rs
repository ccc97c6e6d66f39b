//! SQL for hold notifications: the notifiers (where holds are announced) and each
//! announcement's delivery (the outbox every replica's worker takes from, and the log).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreError, Tx, stamp};

/// A notifier as listed: everything but its secret, so it may be serialized and logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotifierInfo {
    pub id: i64,
    pub name: String,
    /// `webhook` or `email`.
    pub kind: String,
    /// The webhook's URL, or the email's recipients (comma-separated).
    pub target: String,
    /// An email notifier's SMTP server (host, port, tls, username, from); no password.
    pub settings: Option<serde_json::Value>,
    /// The scopes and roles whose holds it announces; empty: every one.
    pub scopes: Vec<String>,
    pub roles: Vec<String>,
    /// Announce a pending hold this many minutes before it expires (`None`: not at all).
    pub expiring_minutes: Option<u32>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
}

/// A notifier's signing secret. Never `Serialize`, never printed by `Debug`.
pub struct NotifierSecret(pub(crate) String);

impl NotifierSecret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for NotifierSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NotifierSecret(<redacted>)")
    }
}

/// One announcement of one hold to one notifier, and how its delivery went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotificationRow {
    pub id: String,
    pub notifier_id: i64,
    pub notifier: String,
    pub hold_id: String,
    /// `hold.created` or `hold.expiring`.
    pub event: String,
    /// `pending` (due, or waiting for its next attempt), `delivered` or `failed`.
    pub state: String,
    pub attempts: u32,
    pub next_attempt_at: DateTime<Utc>,
    /// The receiver's last HTTP status, when it answered.
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// What the store needs to insert a notifier.
#[derive(Debug)]
pub struct NewNotifier<'a> {
    pub name: &'a str,
    pub kind: &'a str,
    pub target: &'a str,
    pub settings: Option<&'a serde_json::Value>,
    pub secret: &'a NotifierSecret,
    pub scopes: &'a [String],
    pub roles: &'a [String],
    pub expiring_minutes: Option<u32>,
    pub created_at: DateTime<Utc>,
    pub created_by: &'a str,
}

const NOTIFIER_COLUMNS: &str =
    "id, name, kind, target, settings, scopes, roles, expiring_minutes, created_at, created_by";

const NOTIFICATION_SELECT: &str = "SELECT d.id, d.notifier_id, n.name AS notifier, d.hold_id, \
     d.event, d.state, d.attempts, d.next_attempt_at, d.last_status, d.last_error, \
     d.created_at, d.delivered_at \
     FROM hold_notifications d JOIN hold_notifiers n ON n.id = d.notifier_id";

fn time(what: &str, text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("hold notification {what}: {e}")))
}

fn optional_time(row: &AnyRow, column: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
    row.try_get::<Option<String>, _>(column)?
        .map(|text| time(column, &text))
        .transpose()
}

fn names(row: &AnyRow, column: &str) -> Result<Vec<String>, StoreError> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("notifier {column}: {e}")))
}

fn notifier_from_row(row: &AnyRow) -> Result<NotifierInfo, StoreError> {
    let minutes: Option<i64> = row.try_get("expiring_minutes")?;
    let settings = row
        .try_get::<Option<String>, _>("settings")?
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("notifier settings: {e}")))?;
    Ok(NotifierInfo {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        kind: row.try_get("kind")?,
        target: row.try_get("target")?,
        settings,
        scopes: names(row, "scopes")?,
        roles: names(row, "roles")?,
        expiring_minutes: minutes.and_then(|m| u32::try_from(m).ok()),
        created_at: time("created_at", &row.try_get::<String, _>("created_at")?)?,
        created_by: row.try_get("created_by")?,
    })
}

fn notification_from_row(row: &AnyRow) -> Result<NotificationRow, StoreError> {
    let attempts: i64 = row.try_get("attempts")?;
    let status: Option<i64> = row.try_get("last_status")?;
    Ok(NotificationRow {
        id: row.try_get("id")?,
        notifier_id: row.try_get("notifier_id")?,
        notifier: row.try_get("notifier")?,
        hold_id: row.try_get("hold_id")?,
        event: row.try_get("event")?,
        state: row.try_get("state")?,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        next_attempt_at: time(
            "next_attempt_at",
            &row.try_get::<String, _>("next_attempt_at")?,
        )?,
        last_status: status.and_then(|s| u16::try_from(s).ok()),
        last_error: row.try_get("last_error")?,
        created_at: time("created_at", &row.try_get::<String, _>("created_at")?)?,
        delivered_at: optional_time(row, "delivered_at")?,
    })
}

impl Store {
    pub async fn list_notifiers(&self) -> Result<Vec<NotifierInfo>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {NOTIFIER_COLUMNS} FROM hold_notifiers ORDER BY name"
        ))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(notifier_from_row).collect()
    }

    /// Every notifier with its secret, for the delivery worker only.
    pub async fn notifiers_with_secrets(
        &self,
    ) -> Result<Vec<(NotifierInfo, NotifierSecret)>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {NOTIFIER_COLUMNS}, secret FROM hold_notifiers ORDER BY id"
        ))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    notifier_from_row(row)?,
                    NotifierSecret(row.try_get("secret")?),
                ))
            })
            .collect()
    }

    /// Records that `hold_id` is to be announced to `notifier_id` as `event`, due at once,
    /// unless it already is (by this replica or another). Returns whether it was new.
    pub async fn enqueue_notification(
        &self,
        id: &str,
        notifier_id: i64,
        hold_id: &str,
        event: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO hold_notifications
                 (id, notifier_id, hold_id, event, state, attempts, next_attempt_at, created_at)
             VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6)
             ON CONFLICT (notifier_id, hold_id, event) DO NOTHING",
        )
        .bind(id)
        .bind(notifier_id)
        .bind(hold_id)
        .bind(event)
        .bind(stamp(now))
        .bind(stamp(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The (notifier, event) pairs already recorded for each of `hold_ids`.
    pub async fn notified_events(
        &self,
        hold_ids: &[String],
    ) -> Result<Vec<(String, i64, String)>, StoreError> {
        let mut found = Vec::new();
        // A bounded `IN` list per statement: both backends take 100 parameters easily.
        for chunk in hold_ids.chunks(100) {
            let params: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT hold_id, notifier_id, event FROM hold_notifications WHERE hold_id IN ({})",
                params.join(", ")
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(id);
            }
            for row in query.fetch_all(self.pool()).await? {
                found.push((
                    row.try_get("hold_id")?,
                    row.try_get("notifier_id")?,
                    row.try_get("event")?,
                ));
            }
        }
        Ok(found)
    }

    /// Takes up to `limit` due announcements for delivery, leasing them until `lease_until`
    /// so no other worker takes them meanwhile (one whose worker died is due again after).
    pub async fn claim_due_notifications(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<NotificationRow>, StoreError> {
        let now = stamp(now);
        // A read first: an idle worker (every second, on every replica) must not begin a
        // write, which on SQLite would contend with the audit writer for the lock.
        let due: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM hold_notifications
             WHERE state = 'pending' AND next_attempt_at <= $1
               AND (claimed_until IS NULL OR claimed_until < $2)
             ORDER BY next_attempt_at LIMIT $3",
        )
        .bind(&now)
        .bind(&now)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        // The conditions again: another worker may have leased some of them meanwhile (on
        // PostgreSQL one that waited on a row's lock re-checks them against its lease).
        let params: Vec<String> = (3..3 + due.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "UPDATE hold_notifications SET claimed_until = $1
             WHERE id IN ({}) AND state = 'pending'
               AND (claimed_until IS NULL OR claimed_until < $2)
             RETURNING id",
            params.join(", ")
        );
        let mut claim = sqlx::query_scalar(&sql).bind(stamp(lease_until)).bind(&now);
        for id in &due {
            claim = claim.bind(id);
        }
        let ids: Vec<String> = claim.fetch_all(self.pool()).await?;
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(row) = self.notification(&id).await? {
                claimed.push(row);
            }
        }
        Ok(claimed)
    }

    pub async fn notification(&self, id: &str) -> Result<Option<NotificationRow>, StoreError> {
        let row = sqlx::query(&format!("{NOTIFICATION_SELECT} WHERE d.id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(notification_from_row).transpose()
    }

    /// Records one delivery attempt: `state` `delivered`, `failed`, or `pending` again at
    /// `next_attempt_at`; the lease is given back.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_notification_attempt(
        &self,
        id: &str,
        state: &str,
        attempts: u32,
        status: Option<u16>,
        error: Option<&str>,
        next_attempt_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE hold_notifications
             SET state = $1, attempts = $2, last_status = $3, last_error = $4,
                 next_attempt_at = $5, claimed_until = NULL,
                 delivered_at = CASE WHEN $6 = 'delivered' THEN $7 ELSE delivered_at END
             WHERE id = $8",
        )
        .bind(state)
        .bind(i64::from(attempts))
        .bind(status.map(i64::from))
        .bind(error)
        .bind(stamp(next_attempt_at))
        .bind(state)
        .bind(stamp(now))
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The announcements of one hold, oldest first.
    pub async fn notifications_of_hold(
        &self,
        hold_id: &str,
    ) -> Result<Vec<NotificationRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "{NOTIFICATION_SELECT} WHERE d.hold_id = $1 ORDER BY d.created_at, d.id"
        ))
        .bind(hold_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(notification_from_row).collect()
    }

    /// The latest `limit` announcements, newest first: the delivery log.
    pub async fn recent_notifications(
        &self,
        limit: u32,
    ) -> Result<Vec<NotificationRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "{NOTIFICATION_SELECT} ORDER BY d.created_at DESC, d.id DESC LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(notification_from_row).collect()
    }
}

/// Inserts a notifier inside the caller's transaction (with its `admin_change` event); a
/// taken name is a [`StoreError::Conflict`].
pub(crate) async fn insert_notifier_on(
    conn: &mut Tx,
    notifier: &NewNotifier<'_>,
) -> Result<NotifierInfo, StoreError> {
    let json = |names: &[String]| serde_json::to_string(names).expect("strings serialize");
    let row = sqlx::query(&format!(
        "INSERT INTO hold_notifiers
             (name, kind, target, settings, secret, scopes, roles, expiring_minutes, created_at,
              created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         RETURNING {NOTIFIER_COLUMNS}"
    ))
    .bind(notifier.name)
    .bind(notifier.kind)
    .bind(notifier.target)
    .bind(notifier.settings.map(|s| s.to_string()))
    .bind(notifier.secret.expose())
    .bind(json(notifier.scopes))
    .bind(json(notifier.roles))
    .bind(notifier.expiring_minutes.map(i64::from))
    .bind(stamp(notifier.created_at))
    .bind(notifier.created_by)
    .fetch_one(&mut *conn.conn())
    .await
    .map_err(|e| match e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict(format!(
            "a notifier named `{}` already exists",
            notifier.name
        )),
        e => e.into(),
    })?;
    notifier_from_row(&row)
}

/// Removes the notifier `name` and its delivery log, inside the caller's transaction.
pub(crate) async fn delete_notifier_on(
    conn: &mut Tx,
    name: &str,
) -> Result<Option<NotifierInfo>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {NOTIFIER_COLUMNS} FROM hold_notifiers WHERE name = $1"
    ))
    .bind(name)
    .fetch_optional(&mut *conn.conn())
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let notifier = notifier_from_row(&row)?;
    sqlx::query("DELETE FROM hold_notifications WHERE notifier_id = $1")
        .bind(notifier.id)
        .execute(&mut *conn.conn())
        .await?;
    sqlx::query("DELETE FROM hold_notifiers WHERE id = $1")
        .bind(notifier.id)
        .execute(&mut *conn.conn())
        .await?;
    Ok(Some(notifier))
}
