//! How long write transactions wait for the store's write lock and how long they hold it.
//!
//! Every write takes the one lock (see [`Store::begin_write`](super::Store)): on
//! PostgreSQL, replicas take turns on it, so the time a commit holds it bounds how many
//! commits per second all replicas together can make. Both are histograms the gateway
//! publishes on `/metrics`.

use std::time::{Duration, Instant};

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The two histograms, shared by a store's clones (a histogram's clones share its counts).
#[derive(Debug, Clone)]
pub struct WriteLockTimes {
    wait: Histogram,
    hold: Histogram,
}

impl Default for WriteLockTimes {
    fn default() -> Self {
        // 25 µs doubling to about 0.8 s, as the gateway's phase histograms.
        let buckets = || exponential_buckets(0.000_025, 2.0, 16);
        Self {
            wait: Histogram::new(buckets()),
            hold: Histogram::new(buckets()),
        }
    }
}

impl WriteLockTimes {
    /// From asking for the lock to having it (on SQLite, `BEGIN IMMEDIATE` with the
    /// connection it runs on).
    pub fn wait(&self) -> &Histogram {
        &self.wait
    }

    /// From having the lock to the end of the transaction that took it.
    pub fn hold(&self) -> &Histogram {
        &self.hold
    }

    /// Records a wait and starts timing the hold.
    pub(super) fn acquired(&self, wait: Duration) -> Held {
        self.wait.observe(wait.as_secs_f64());
        Held {
            hold: self.hold.clone(),
            since: Instant::now(),
        }
    }
}

/// Kept beside a write transaction: records how long the lock was held when dropped, so
/// after the commit (or the rollback) at the end of the writer's scope.
#[must_use = "the hold is timed until this is dropped"]
pub(crate) struct Held {
    hold: Histogram,
    since: Instant,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.hold.observe(self.since.elapsed().as_secs_f64());
    }
}
