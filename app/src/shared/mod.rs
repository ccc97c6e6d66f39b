//! The bottom layer of the console: the error type every server function returns, the
//! signed-in user, and (on the server) the context server functions read. Nothing here
//! imports a feature or a component.

mod error;
mod me;
#[cfg(feature = "ssr")]
pub mod ssr;
mod sync;

pub use error::ConsoleError;
pub use me::{Me, whoami};
pub use sync::SyncSummary;

mod encode;
pub use encode::encode;
