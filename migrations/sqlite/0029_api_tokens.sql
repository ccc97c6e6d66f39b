-- Bearer tokens of console users for the HTTP API (`/api/v1/holds`, issue #56; docs/
-- operations.md, "Deciding holds"). A token acts as its user with the user's role at each
-- request, so disabling the user or lowering the role takes effect at once. Only the
-- SHA-256 of a token is stored; `prefix` is its first characters, to recognise it by.
CREATE TABLE console_api_tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      INTEGER NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    expires_at   TEXT,
    revoked_at   TEXT,
    last_used_at TEXT,
    UNIQUE (user_id, name)
);
