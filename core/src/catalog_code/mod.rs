//! Catalog as code: the whole catalog as one deterministic YAML document
//! (`skillgate catalog export`), its JSON Schema (`skillgate catalog schema`), and applying
//! a document back (`skillgate catalog apply`): checked whole, planned, and written in one
//! audited transaction through [`crate::admin::AdminService`].

mod apply;
mod diff;
pub mod document;
pub mod export;
mod plan;
mod shape;
mod shared;
mod validate;

pub use apply::{ApplyError, ApplyOptions, ApplyReport, CatalogFile, CreatedKey};
pub use diff::FieldChange;
pub use document::{CATALOG_VERSION, CatalogDocument, json_schema_text};
pub use plan::{Action, Change, EntityKind, Plan};
pub use validate::{Issue, parse};

/// The largest catalog file read by default (`--max-catalog-bytes`): hundreds of times the
/// exported demo catalog, while the server's memory stays bounded when a file is wrong.
pub const DEFAULT_MAX_CATALOG_BYTES: u64 = 4 * 1024 * 1024;

/// What a refusal of a too-big catalog file calls the limit.
pub const CATALOG_LIMIT_NAME: &str = "the catalog size limit (--max-catalog-bytes)";

/// Reads a catalog file of at most `max_bytes` bytes; a bigger one (or a pipe that goes on)
/// is refused, naming the limit, before more than `max_bytes + 1` bytes are in memory.
pub fn read_catalog_file(
    path: &std::path::Path,
    max_bytes: u64,
) -> Result<Vec<u8>, crate::limited_read::LimitedReadError> {
    crate::limited_read::read_limited(path, max_bytes, CATALOG_LIMIT_NAME)
}

#[cfg(test)]
mod tests;
