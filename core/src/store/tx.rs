//! [`Tx`]: the connection of a write transaction, as the services hold it.
//!
//! A service that changes state hands the store a closure (an audited change, see
//! [`crate::audit::AuditLog::commit`]) which the store runs inside its own write
//! transaction, together with the audit events the change returns. The closure gets a
//! `&mut Tx` and passes it on to the store's `*_on` functions; it cannot begin, commit or
//! query on its own, and no sqlx type reaches it. Only `store/` sees the connection inside.

use futures::future::BoxFuture;
use ref_cast::RefCast;
use sqlx::AnyConnection;

use super::{Store, StoreError};

/// A connection the store lends: inside a write transaction it began, when a service's
/// audited change holds it, or a pool connection for a read ([`Store::with_conn`]). Opaque
/// outside `store/`: the services pass it along, the store's functions run on it.
#[derive(RefCast)]
#[repr(transparent)]
pub struct Tx(AnyConnection);

impl Tx {
    /// Wraps the connection of a transaction (or savepoint) the store began.
    pub(in crate::store) fn wrap(conn: &mut AnyConnection) -> &mut Tx {
        Tx::ref_cast_mut(conn)
    }

    /// The connection underneath, for the store's statements.
    pub(in crate::store) fn conn(&mut self) -> &mut AnyConnection {
        &mut self.0
    }

    /// The connection underneath, for a test's raw statement inside an audited change (as
    /// [`Store::test_pool`] is for one outside). Only with the `test-support` feature.
    #[cfg(feature = "test-support")]
    pub fn test_conn(&mut self) -> &mut AnyConnection {
        &mut self.0
    }
}

impl std::fmt::Debug for Tx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tx")
    }
}

impl Store {
    /// Runs `f` on a pool connection, outside any transaction: for a service's read through
    /// the same `*_on` functions its audited changes use, so the two cannot drift apart.
    pub async fn with_conn<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: for<'c> FnOnce(&'c mut Tx) -> BoxFuture<'c, Result<T, StoreError>>,
    {
        let mut conn = self.pool().acquire().await?;
        f(Tx::wrap(&mut conn)).await
    }
}
