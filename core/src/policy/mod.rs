//! The policy engine: a compiled catalog snapshot and the pure `decide` function.
//!
//! Nothing here does I/O, awaits, or reads a clock: the MCP layer loads a [`SessionView`],
//! calls [`decide`] with the current time, and on `Allow` gets a [`Permit`], the only
//! thing the reservation, the `call_allowed` event and the upstream call accept.

mod amount;
mod compiled;
mod decide;
mod decision;
mod digest;
mod remedy;
mod rules;
mod session;

pub use amount::{AmountError, decimal_from_json};
pub use compiled::{CatalogHandle, CompiledCatalog, compile_schema};
pub use decide::{CallRequest, arguments_digest, decide};
pub use decision::{
    Arguments, Decision, Denial, DenyCode, Hold, Permit, Reservation, ReservedAmount, SuccessNote,
};
pub use digest::value_digest;
pub use remedy::{ArgumentBound, Remedy};
pub use session::{
    HeldUsage, LearnedRole, LearnedSkill, MAX_OUTCOMES, MAX_SEEN_SECRETS, Outcome, SeenSecret,
    SessionView, ToolUsage, Usage,
};
