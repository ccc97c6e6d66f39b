//! The server's integration tests, one module per area, linked into one test binary:
//! one link of the server instead of one per file (issue #49). Most start the real
//! `skillgate` binary (`common`).

mod audit_verify;
mod catalog_code;
mod cli_output;
mod common;
mod connect_console;
mod connections;
mod console_bodies;
mod console_security;
mod console_sso;
mod core_tasks;
mod database_faults;
mod feedback;
mod gitops;
mod guardrail_hook;
mod guardrails;
mod hardening;
mod hold_notifications;
mod holds;
mod holds_console;
mod holds_doors;
mod http_router;
mod inspection_policy;
mod mcp_endpoint;
mod mcp_skills;
mod migrate;
mod oauth;
mod otel_traces;
mod postgres_setup;
mod refusals;
mod replicas;
mod revisions;
mod skill_bundles;
mod static_assets;
mod tasks;
mod tool_pins;
mod trusted_issuers;
mod upstream_errors;
mod upstream_guardrails;
mod upstream_identity;
mod upstream_schemas;
mod upstream_tls;
mod workspaces;
