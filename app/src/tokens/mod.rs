//! API tokens: a person's bearer credentials for the HTTP API (`/api/v1/holds`), issued
//! and revoked here; an admin also issues them for others (a chat bot's service user).

pub mod api;
mod page;

pub use page::TokensPage;
