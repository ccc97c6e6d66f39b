//! Catalog as code: the whole catalog as one deterministic YAML document
//! (`skillgate catalog export`), its JSON Schema (`skillgate catalog schema`), and applying
//! a document back (`skillgate catalog apply`): checked whole, planned, and written in one
//! audited transaction through [`crate::admin::AdminService`].

mod apply;
pub mod document;
pub mod export;
mod plan;
mod validate;

pub use apply::{ApplyError, ApplyOptions, ApplyReport, CatalogFile, CreatedKey};
pub use document::{CATALOG_VERSION, CatalogDocument, json_schema_text};
pub use plan::{Action, Change, EntityKind, Plan};
pub use validate::{Issue, parse};

#[cfg(test)]
mod tests;
