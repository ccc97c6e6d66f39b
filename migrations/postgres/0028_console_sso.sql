-- People sign in to the console through the company's OpenID provider (issue #52;
-- docs/operations.md, "People with the company's identity provider").

-- Which provider account a console user is. A user made by a first sign-in has no password
-- (its password_hash is '!', never a valid hash) and is found by issuer and subject, never
-- by name: a provider account named `admin` is not the local `admin`.
CREATE TABLE console_user_identities (
    user_id    BIGINT PRIMARY KEY REFERENCES console_users (id) ON DELETE CASCADE,
    issuer     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (issuer, subject)
);

-- Sign-ins sent to the provider and not yet back. In the database, not the console session:
-- the session cookie is SameSite=Strict and does not come back with the provider's redirect,
-- and the callback may reach another replica. Keyed by the SHA-256 of `state`; the browser
-- that started holds a cookie whose SHA-256 is `browser_hash`. Taken once: a replayed
-- callback finds nothing.
CREATE TABLE console_sso_logins (
    state_hash   TEXT PRIMARY KEY,
    browser_hash TEXT NOT NULL,
    nonce        TEXT NOT NULL,
    verifier     TEXT NOT NULL,
    next_path    TEXT NOT NULL,
    expires_at   TEXT NOT NULL
);
CREATE INDEX console_sso_logins_expires ON console_sso_logins (expires_at);
