-- Guardrails: limits a scope declares that bind every call of its sessions, under every
-- role (JSON array of limits, the same tagged form as roles.limits).
-- PostgreSQL translation of migrations/sqlite/0013_scope_guardrails.sql.
ALTER TABLE scopes ADD COLUMN guardrails TEXT NOT NULL DEFAULT '[]';
