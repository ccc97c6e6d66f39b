-- Workspaces (issue #55): each team's catalog, keys, sessions and audit live in a schema of
-- their own in this database (docs/architecture.md, "Workspaces"). This schema is the
-- platform's and the `default` workspace's: an existing deployment is the default
-- workspace as it stands, nothing moved.
-- PostgreSQL translation of migrations/sqlite/0025_workspaces.sql.
CREATE TABLE workspaces (
    slug        TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    archived_at TEXT NULL
);

CREATE TABLE this_workspace (
    id   BIGINT PRIMARY KEY CHECK (id = 1),
    slug TEXT NOT NULL
);
