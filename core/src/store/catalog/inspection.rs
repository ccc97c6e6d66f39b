//! The inspection policy: one JSON document in the one-row `inspection_policy` table
//! (migration 0020), loaded with the catalog. Writing it moves the catalog generation (the
//! table's triggers), so every replica recompiles.

use chrono::Utc;

use super::super::{StoreError, stamp};
use super::Tx;
use super::{from_json, to_json};
use crate::model::InspectionPolicy;

/// The stored policy; a database without the row reads as the built-in defaults.
pub(crate) async fn inspection_policy_on(conn: &mut Tx) -> Result<InspectionPolicy, sqlx::Error> {
    let conn = conn.conn();
    let text: Option<String> =
        sqlx::query_scalar("SELECT policy FROM inspection_policy WHERE id = 1")
            .fetch_optional(&mut *conn)
            .await?;
    match text {
        Some(text) => from_json("inspection policy", &text),
        None => Ok(InspectionPolicy::default()),
    }
}

/// Writes `policy` over the stored one, unchecked (the admin door and a catalog apply
/// check it against the catalog first).
pub(crate) async fn put_inspection_policy_on(
    conn: &mut Tx,
    policy: &InspectionPolicy,
) -> Result<(), StoreError> {
    let conn = conn.conn();
    let now = stamp(Utc::now());
    let done =
        sqlx::query("UPDATE inspection_policy SET policy = $1, updated_at = $2 WHERE id = 1")
            .bind(to_json(policy))
            .bind(&now)
            .execute(&mut *conn)
            .await?;
    if done.rows_affected() == 0 {
        sqlx::query("INSERT INTO inspection_policy (id, policy, updated_at) VALUES (1, $1, $2)")
            .bind(to_json(policy))
            .bind(&now)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
