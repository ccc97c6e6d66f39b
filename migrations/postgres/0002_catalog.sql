-- The governance catalog: upstreams, tools, versioned skills, roles with limits, scopes.
-- Lists and limits are JSON in TEXT columns; the store validates references on save.
-- `revision` counts saves, for optimistic concurrency in the console.
-- PostgreSQL translation of migrations/sqlite/0002_catalog.sql.

CREATE TABLE upstreams (
    name       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('stdio', 'http')),
    config     TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE tools (
    name           TEXT PRIMARY KEY,
    upstream       TEXT NOT NULL REFERENCES upstreams (name) ON DELETE CASCADE,
    description    TEXT NOT NULL,
    input_schema   TEXT NOT NULL,
    sensitive_args TEXT NOT NULL DEFAULT '[]',
    updated_at     TEXT NOT NULL
);
CREATE INDEX tools_upstream ON tools (upstream);

CREATE TABLE skills (
    slug            TEXT PRIMARY KEY,
    current_version BIGINT NOT NULL,
    revision        BIGINT NOT NULL,
    updated_at      TEXT NOT NULL
);

CREATE TABLE skill_versions (
    skill        TEXT NOT NULL REFERENCES skills (slug) ON DELETE CASCADE,
    version      BIGINT NOT NULL,
    description  TEXT NOT NULL,
    instructions TEXT NOT NULL,
    tools        TEXT NOT NULL,
    resources    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (skill, version)
);

CREATE TABLE roles (
    slug         TEXT PRIMARY KEY,
    title        TEXT NOT NULL,
    description  TEXT NOT NULL,
    instructions TEXT NOT NULL,
    skills       TEXT NOT NULL,
    limits       TEXT NOT NULL,
    revision     BIGINT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE scopes (
    slug        TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    roles       TEXT NOT NULL,
    revision    BIGINT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
