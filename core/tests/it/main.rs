//! The core's integration tests, one module per area, linked into one test binary:
//! one link of the core instead of one per file (issue #49). `upstream_stdio` stays a
//! binary of its own because it is also the stdio upstream its tests spawn.

mod admin_catalog;
mod admin_door;
mod atomic_changes;
mod audit_checkpoints;
mod audit_export;
mod audit_log;
mod audit_scale;
mod audit_walk;
mod call_pipeline;
mod call_tasks;
mod catalog_apply;
mod compliance;
mod console_try_it;
mod desk;
mod gateway_platform_tools;
mod guardrail_eval;
mod inspect_corpus;
mod oauth;
mod paging;
mod policy_arbitrary_json;
mod policy_arg_checks;
mod policy_common;
mod policy_decide;
mod policy_fleet_rules;
mod policy_hardening;
mod policy_limits;
mod policy_nested_args;
mod policy_properties;
mod postgres_tls;
mod rate_limits;
mod store_contract;
mod store_contract_rules;
mod store_copy;
mod tool_pins;
mod trusted_issuers;
mod upstream_common;
mod upstream_http;
mod upstream_https;
mod upstream_identity;
mod upstream_shares;
mod whatif;
mod workspaces;
