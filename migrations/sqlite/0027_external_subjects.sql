-- Access tokens of the company's identity provider at /mcp (issue #52; docs/architecture.md,
-- "Tokens from the company's identity provider"). Each subject of a trusted issuer that
-- presents a token gets a credential row of kind 'external' in the workspace its claims map
-- to, as a consent gets one of kind 'oauth': sessions, holds, rate limits and the audit's
-- actor see it as a key, and revoking the row refuses the subject's tokens.
--
-- SQLite cannot change a CHECK constraint in place. A column's own CHECK does not stop the
-- column being dropped, so `kind` is replaced by a column with the wider CHECK, the values
-- copied; renaming it rewrites the CHECK to name `kind`.
ALTER TABLE agent_keys ADD COLUMN kind_new TEXT NOT NULL DEFAULT 'key'
    CHECK (kind_new IN ('key', 'oauth', 'external'));
UPDATE agent_keys SET kind_new = kind;
ALTER TABLE agent_keys DROP COLUMN kind;
ALTER TABLE agent_keys RENAME COLUMN kind_new TO kind;

-- Which issuer and subject a credential row of kind 'external' is.
CREATE TABLE external_subjects (
    key_id     INTEGER PRIMARY KEY REFERENCES agent_keys (id),
    issuer     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (issuer, subject)
);
