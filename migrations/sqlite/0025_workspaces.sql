-- Workspaces (issue #55): each team's catalog, keys, sessions and audit live in a database
-- of their own, beside this one (docs/architecture.md, "Workspaces"). This database is the
-- platform's and the `default` workspace's: an existing deployment is the default
-- workspace as it stands, nothing moved.
--
-- `workspaces` is the registry, kept in the platform database only: the workspaces besides
-- `default`, which is implicit and cannot be removed. `this_workspace` is kept in every
-- database: the workspace a database was created for (no row: the platform database), so
-- a database file or schema mixed up with another workspace's is refused when opened.
CREATE TABLE workspaces (
    slug        TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    archived_at TEXT NULL
);

CREATE TABLE this_workspace (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    slug TEXT NOT NULL
);
