-- Access tokens of the company's identity provider at /mcp (issue #52). PostgreSQL
-- translation of migrations/sqlite/0027_external_subjects.sql: here the CHECK is replaced
-- in place (its name is PostgreSQL's for the column check 0017 added).
ALTER TABLE agent_keys DROP CONSTRAINT agent_keys_kind_check;
ALTER TABLE agent_keys ADD CONSTRAINT agent_keys_kind_check
    CHECK (kind IN ('key', 'oauth', 'external'));

CREATE TABLE external_subjects (
    key_id     BIGINT PRIMARY KEY REFERENCES agent_keys (id),
    issuer     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (issuer, subject)
);
