//! Which client connections the listener admits, and which it closes to admit another.
//!
//! A connection that does nothing (idle, or trickling its headers) costs a file descriptor
//! all the same, and a first-come cap lets one client hold them all. So, as nginx's and
//! envoy's per-address limits and their closing of slow connections do:
//!
//! - Each client address may hold at most `per_address` connections. A trusted proxy's
//!   connections carry many clients, so they are not counted against its address.
//! - At the cap, a new connection is admitted by closing one that is doing nothing: idle
//!   or still sending its headers, from the address that holds the most connections, the
//!   longest waiting first. A connection with a request in progress is never closed for
//!   this.
//! - A connection turned away (its address's share is used, or every connection is working)
//!   may take one of a few reserved slots where only `GET /healthz` is answered, so a load
//!   balancer's probe still reaches a healthy replica. A reserved slot still waiting for
//!   its request is likewise given up to a newer one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::client_addr::TrustedProxies;

/// Connections beyond the cap that may ask for `/healthz` and nothing else.
pub const HEALTH_SLOTS: usize = 16;

/// How a connection's state looks to admission.
pub trait Activity: Send + Sync {
    /// When the connection started waiting (for a request, or for the rest of its headers);
    /// `None` while a request is in progress.
    fn waiting_since(&self) -> Option<Instant>;
    /// Asks the connection to close at once.
    fn evict(&self);
}

/// How a connection was admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Served as usual.
    Regular,
    /// Served one `GET /healthz`; anything else is answered 503.
    HealthOnly,
}

/// Why a connection was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its address holds its share of connections.
    AddressShare,
    /// Every connection is working and the reserved slots are too.
    Full,
}

pub struct Admission {
    max: usize,
    per_address: usize,
    trusted: TrustedProxies,
    inner: Mutex<Inner>,
    closed: Notify,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    regular: Places,
    health: Places,
    per_address: HashMap<IpAddr, usize>,
}

/// The connections of one kind of slot.
#[derive(Default)]
struct Places {
    entries: HashMap<u64, Entry>,
    /// Entries not evicted: kept as a count, since every accepted connection reads it.
    taken: usize,
}

struct Entry {
    /// `None` for a trusted proxy's connection.
    address: Option<IpAddr>,
    activity: Arc<dyn Activity>,
    /// Asked to close to make room; no longer counted.
    evicted: bool,
}

/// A connection's place; gives it back when dropped.
pub struct Ticket {
    admission: Arc<Admission>,
    id: u64,
    slot: Slot,
}

impl Ticket {
    pub fn slot(&self) -> Slot {
        self.slot
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.release(self.id, self.slot);
    }
}

impl Admission {
    pub fn new(max: usize, per_address: usize, trusted: TrustedProxies) -> Arc<Self> {
        Arc::new(Admission {
            max: max.max(1),
            per_address: per_address.clamp(1, max.max(1)),
            trusted,
            inner: Mutex::new(Inner::default()),
            closed: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a connection from `peer`, closing another to make room if it must.
    pub fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        activity: Arc<dyn Activity>,
    ) -> Result<Ticket, Refusal> {
        let peer = peer.to_canonical();
        let address = (!self.trusted.trusts(peer)).then_some(peer);
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        let over_share = address
            .is_some_and(|a| inner.per_address.get(&a).copied().unwrap_or(0) >= self.per_address);
        let entry = Entry {
            address,
            activity,
            evicted: false,
        };
        let room = !over_share && (inner.regular.taken < self.max || inner.evict_one_regular());
        if room {
            if let Some(a) = address {
                *inner.per_address.entry(a).or_default() += 1;
            }
            inner.regular.take(id, entry);
            return Ok(self.ticket(id, Slot::Regular));
        }
        if inner.health.taken < HEALTH_SLOTS || inner.health.evict_longest_waiting(|_| 0).is_some()
        {
            inner.health.take(id, entry);
            return Ok(self.ticket(id, Slot::HealthOnly));
        }
        Err(if over_share {
            Refusal::AddressShare
        } else {
            Refusal::Full
        })
    }

    fn ticket(self: &Arc<Self>, id: u64, slot: Slot) -> Ticket {
        Ticket {
            admission: Arc::clone(self),
            id,
            slot,
        }
    }

    fn release(&self, id: u64, slot: Slot) {
        let mut inner = self.lock();
        match slot {
            Slot::Regular => {
                if let Some(address) = inner.regular.release(id) {
                    inner.forget_address(address);
                }
            }
            Slot::HealthOnly => {
                inner.health.release(id);
            }
        }
        let empty = inner.is_empty();
        drop(inner);
        if empty {
            self.closed.notify_waiters();
        }
    }

    /// Completes once every admitted connection is closed.
    pub async fn all_closed(&self) {
        loop {
            let notified = self.closed.notified();
            {
                if self.lock().is_empty() {
                    return;
                }
            }
            notified.await;
        }
    }
}

impl Inner {
    fn is_empty(&self) -> bool {
        self.regular.entries.is_empty() && self.health.entries.is_empty()
    }

    /// Closes the waiting connection of the address holding the most, the longest waiting
    /// first; false if every connection is working.
    fn evict_one_regular(&mut self) -> bool {
        let counts = &self.per_address;
        let weight = |entry: &Entry| {
            entry
                .address
                .map_or(0, |a| counts.get(&a).copied().unwrap_or(0))
        };
        let Some(address) = self.regular.evict_longest_waiting(weight) else {
            return false;
        };
        if let Some(address) = address {
            self.forget_address(address);
        }
        true
    }

    fn forget_address(&mut self, address: IpAddr) {
        if let Some(count) = self.per_address.get_mut(&address) {
            *count -= 1;
            if *count == 0 {
                self.per_address.remove(&address);
            }
        }
    }
}

impl Places {
    fn take(&mut self, id: u64, entry: Entry) {
        self.taken += 1;
        self.entries.insert(id, entry);
    }

    /// Asks the waiting connection with the greatest `weight` (the longest waiting among
    /// equals) to close, and gives its place back at once: `Some` of its counted address,
    /// or `None` if every connection is working.
    fn evict_longest_waiting(
        &mut self,
        weight: impl Fn(&Entry) -> usize,
    ) -> Option<Option<IpAddr>> {
        let id = self
            .entries
            .iter()
            .filter(|(_, e)| !e.evicted)
            .filter_map(|(id, e)| {
                e.activity
                    .waiting_since()
                    .map(|since| (*id, weight(e), since))
            })
            .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)))
            .map(|(id, ..)| id)?;
        let entry = self.entries.get_mut(&id)?;
        entry.evicted = true;
        entry.activity.evict();
        self.taken -= 1;
        Some(entry.address)
    }

    /// Forgets a closed connection; its counted address if it still held its place (an
    /// evicted one gave it back when it was evicted).
    fn release(&mut self, id: u64) -> Option<IpAddr> {
        let entry = self.entries.remove(&id).filter(|e| !e.evicted)?;
        self.taken -= 1;
        entry.address
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    struct Fake {
        since: Mutex<Option<Instant>>,
        evicted: AtomicBool,
    }

    impl Fake {
        fn waiting(since: Instant) -> Arc<Self> {
            Arc::new(Fake {
                since: Mutex::new(Some(since)),
                evicted: AtomicBool::new(false),
            })
        }
        fn working() -> Arc<Self> {
            Arc::new(Fake {
                since: Mutex::new(None),
                evicted: AtomicBool::new(false),
            })
        }
        fn was_evicted(&self) -> bool {
            self.evicted.load(Ordering::SeqCst)
        }
    }

    impl Activity for Fake {
        fn waiting_since(&self) -> Option<Instant> {
            *self.since.lock().unwrap()
        }
        fn evict(&self) {
            self.evicted.store(true, Ordering::SeqCst);
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn an_address_past_its_share_gets_only_a_health_slot() {
        let admission = Admission::new(10, 2, TrustedProxies::default());
        let now = Instant::now();
        let _a = admission.admit(ip(2), Fake::waiting(now)).unwrap();
        let _b = admission.admit(ip(2), Fake::waiting(now)).unwrap();
        let third = admission.admit(ip(2), Fake::waiting(now)).unwrap();
        assert_eq!(third.slot(), Slot::HealthOnly);
        let other = admission.admit(ip(3), Fake::waiting(now)).unwrap();
        assert_eq!(other.slot(), Slot::Regular);
    }

    #[test]
    fn a_trusted_proxy_is_not_held_to_one_address_share() {
        let trusted = TrustedProxies::parse(&["127.0.0.9"]).unwrap();
        let admission = Admission::new(10, 1, trusted);
        let now = Instant::now();
        let tickets: Vec<_> = (0..5)
            .map(|_| admission.admit(ip(9), Fake::waiting(now)).unwrap())
            .collect();
        assert!(tickets.iter().all(|t| t.slot() == Slot::Regular));
    }

    #[test]
    fn at_the_cap_the_longest_waiting_connection_of_the_busiest_address_is_closed() {
        let admission = Admission::new(4, 3, TrustedProxies::default());
        let start = Instant::now();
        let old_single = Fake::waiting(start);
        let heavy_old = Fake::waiting(start + Duration::from_millis(1));
        let heavy_new = Fake::waiting(start + Duration::from_millis(2));
        let heavy_working = Fake::working();
        let _s = admission.admit(ip(3), old_single.clone()).unwrap();
        let _h1 = admission.admit(ip(2), heavy_old.clone()).unwrap();
        let _h2 = admission.admit(ip(2), heavy_new.clone()).unwrap();
        let _h3 = admission.admit(ip(2), heavy_working.clone()).unwrap();
        let newcomer = admission.admit(ip(4), Fake::working()).unwrap();
        assert_eq!(newcomer.slot(), Slot::Regular);
        assert!(heavy_old.was_evicted());
        assert!(!old_single.was_evicted() && !heavy_new.was_evicted());
        assert!(!heavy_working.was_evicted());
    }

    #[test]
    fn a_working_connection_is_never_closed_and_the_newcomer_gets_a_health_slot() {
        let admission = Admission::new(2, 2, TrustedProxies::default());
        let working = [Fake::working(), Fake::working()];
        let _held: Vec<_> = working
            .iter()
            .map(|w| admission.admit(ip(2), w.clone()).unwrap())
            .collect();
        let newcomer = admission
            .admit(ip(3), Fake::waiting(Instant::now()))
            .unwrap();
        assert_eq!(newcomer.slot(), Slot::HealthOnly);
        assert!(working.iter().all(|w| !w.was_evicted()));
    }

    #[test]
    fn full_health_slots_give_up_their_longest_waiting_one_and_refuse_when_all_work() {
        let admission = Admission::new(1, 1, TrustedProxies::default());
        let _regular = admission.admit(ip(2), Fake::working()).unwrap();
        let start = Instant::now();
        let waiting: Vec<_> = (0..HEALTH_SLOTS)
            .map(|i| Fake::waiting(start + Duration::from_millis(i as u64)))
            .collect();
        let _slots: Vec<_> = waiting
            .iter()
            .map(|w| admission.admit(ip(3), w.clone()).unwrap())
            .collect();
        let probe = admission
            .admit(ip(4), Fake::waiting(Instant::now()))
            .unwrap();
        assert_eq!(probe.slot(), Slot::HealthOnly);
        assert!(waiting[0].was_evicted());
        assert!(waiting[1..].iter().all(|w| !w.was_evicted()));

        let admission = Admission::new(1, 1, TrustedProxies::default());
        let _regular = admission.admit(ip(2), Fake::working()).unwrap();
        let _slots: Vec<_> = (0..HEALTH_SLOTS)
            .map(|_| admission.admit(ip(3), Fake::working()).unwrap())
            .collect();
        assert_eq!(
            admission.admit(ip(4), Fake::working()).err(),
            Some(Refusal::Full)
        );
    }

    #[test]
    fn a_closed_connection_gives_its_place_and_its_address_share_back() {
        let admission = Admission::new(1, 1, TrustedProxies::default());
        let first = admission.admit(ip(2), Fake::working()).unwrap();
        drop(first);
        let again = admission.admit(ip(2), Fake::working()).unwrap();
        assert_eq!(again.slot(), Slot::Regular);
    }
}
