-- Skillgate as an OAuth 2.1 authorization server for its own /mcp (issue 17).
--
-- A consent is a credential like an agent key: it gets an `agent_keys` row of kind
-- 'oauth' (its `key_hash` is the hash of a random secret nobody is shown, so it cannot be
-- presented as a key). Sessions, holds, rate limits and the audit already key their owner
-- by that id, and revoking the row ends every token of the grant on the next request.
-- PostgreSQL translation of migrations/sqlite/0017_oauth.sql.
ALTER TABLE agent_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'key' CHECK (kind IN ('key', 'oauth'));

-- The scopes an admin allows a console user to consent to (one per token).
CREATE TABLE console_user_scopes (
    user_id BIGINT NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
    scope   TEXT NOT NULL,
    PRIMARY KEY (user_id, scope)
);

-- Clients: registered dynamically (RFC 7591; `client_id` is `sgc_…`) or known by a Client
-- ID Metadata Document (`client_id` is the document's https URL; the row is its last
-- fetch). `secret_hash` only for confidential clients of dynamic registration.
CREATE TABLE oauth_clients (
    client_id     TEXT PRIMARY KEY,
    registration  TEXT NOT NULL CHECK (registration IN ('dynamic', 'metadata_document')),
    name          TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    auth_method   TEXT NOT NULL CHECK (auth_method IN ('none', 'client_secret_post', 'client_secret_basic')),
    secret_hash   TEXT NULL,
    metadata      TEXT NOT NULL,
    created_at    TEXT NOT NULL
);

-- Authorization requests checked and waiting for the person's sign-in and consent.
CREATE TABLE oauth_requests (
    id              TEXT PRIMARY KEY,
    client_id       TEXT NOT NULL,
    redirect_uri    TEXT NOT NULL,
    state           TEXT NULL,
    code_challenge  TEXT NOT NULL,
    resource        TEXT NOT NULL,
    requested_scope TEXT NULL,
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL
);
CREATE INDEX oauth_requests_expires ON oauth_requests (expires_at);

-- A person's consent for a client: the agent_keys row it authenticates as.
-- `key_id` is that row's id, always supplied by the store: a plain BIGINT primary key (the
-- SQLite INTEGER PRIMARY KEY is a rowid alias only by syntax), not an identity column.
CREATE TABLE oauth_grants (
    key_id      BIGINT PRIMARY KEY REFERENCES agent_keys (id),
    user_id     BIGINT NOT NULL,
    user_name   TEXT NOT NULL,
    client_id   TEXT NOT NULL,
    client_name TEXT NOT NULL,
    resource    TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_id, created_at);

-- Authorization codes (single use; a second use revokes the grant) and tokens. Only
-- SHA-256 digests are stored. A refresh token is rotated: exchanging it marks it
-- `used_at`, and presenting it again revokes the grant (a stolen token was replayed).
CREATE TABLE oauth_codes (
    code_hash      TEXT PRIMARY KEY,
    key_id         BIGINT NOT NULL,
    client_id      TEXT NOT NULL,
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    used_at        TEXT NULL
);

CREATE TABLE oauth_tokens (
    token_hash TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    key_id     BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at    TEXT NULL,
    revoked_at TEXT NULL
);
CREATE INDEX oauth_tokens_key ON oauth_tokens (key_id, kind);
