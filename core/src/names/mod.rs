//! Names that several layers read and write, defined once: the audit event kinds and the
//! audit actors. Nothing here depends on another module of the crate, so the store, the
//! audit log, the gateway and the console all import these downwards.

mod actor;
mod event_kind;

pub use actor::{Actor, CONSOLE_ACTOR_PREFIX};
pub use event_kind::{EventKind, UnknownKind};
