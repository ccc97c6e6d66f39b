//! One async lock per governance session, so that within a process the decisions on a
//! session (and the downstream calls they allow) happen one at a time. Across processes
//! the session row's revision check keeps usage exact.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

#[derive(Default, Clone)]
pub struct SessionLocks {
    inner: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

pub struct SessionGuard {
    _guard: OwnedMutexGuard<()>,
    id: String,
    locks: SessionLocks,
}

impl SessionLocks {
    pub async fn lock(&self, session_id: &str) -> SessionGuard {
        let lock = {
            let mut map = self
                .inner
                .lock()
                .expect("session lock map is never poisoned");
            map.entry(session_id.to_owned())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
                .clone()
        };
        SessionGuard {
            _guard: lock.lock_owned().await,
            id: session_id.to_owned(),
            locks: self.clone(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap().len()
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        // Forget the lock once nobody holds or waits for it, so the map stays small.
        let mut map = self
            .locks
            .inner
            .lock()
            .expect("session lock map is never poisoned");
        if map.get(&self.id).is_some_and(|l| Arc::strong_count(l) <= 2) {
            map.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_locker_of_the_same_session_waits_until_the_first_releases() {
        let locks = SessionLocks::default();
        let first = locks.lock("s1").await;
        let waiting = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let _second = locks.lock("s1").await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        // Another session is not blocked by s1.
        drop(locks.lock("s2").await);
        drop(first);
        waiting.await.unwrap();
        assert_eq!(locks.len(), 0);
    }
}
