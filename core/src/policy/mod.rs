//! The policy engine: a compiled catalog snapshot and the pure `decide` function.
//!
//! Nothing here does I/O, awaits, or reads a clock: the MCP layer loads a [`SessionView`],
//! calls [`decide`] with the current time, and on `Allow` applies the [`Reservation`]
//! to the session before it calls the upstream.

mod amount;
mod compiled;
mod decide;
mod decision;
mod rules;
mod session;

pub use amount::{AmountError, decimal_from_json};
pub use compiled::{CatalogHandle, CompiledCatalog};
pub use decide::{CallRequest, decide};
pub use decision::{Decision, DenyCode, Reservation, ReservedAmount};
pub use session::{LearnedRole, LearnedSkill, SessionView, ToolUsage, Usage};
