-- Guardrails: limits a scope declares that bind every call of its sessions, under every
-- role (JSON array of limits, the same tagged form as roles.limits).
ALTER TABLE scopes ADD COLUMN guardrails TEXT NOT NULL DEFAULT '[]';
