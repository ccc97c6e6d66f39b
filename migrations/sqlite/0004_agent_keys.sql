-- Agent keys: bearer credentials of the MCP endpoint, each mapped to one scope.
-- Only the SHA-256 of a key is kept (hex, looked up on every MCP request); `prefix` is its
-- first 12 characters, enough to tell keys apart in a listing and useless to an attacker.
-- `scope` is not a foreign key: deleting a scope leaves its keys valid but with no roles,
-- and key rows outlive catalog edits for the audit trail.
CREATE TABLE agent_keys (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL UNIQUE,
    scope        TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    created_by   TEXT,
    expires_at   TEXT,
    revoked_at   TEXT,
    last_used_at TEXT
);
