-- Console users and login throttling.
CREATE TABLE console_users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'reviewer', 'viewer')),
    password_hash TEXT NOT NULL,
    disabled      INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

-- Failed logins, kept in the database (not process memory) so every replica sees them.
CREATE TABLE login_failures (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    user_name TEXT NOT NULL,
    address   TEXT NOT NULL,
    at        TEXT NOT NULL
);
CREATE INDEX login_failures_user_at ON login_failures (user_name, at);
CREATE INDEX login_failures_address_at ON login_failures (address, at);
