-- Upstream credentials and vanished tools.
-- `credentials` holds a stdio upstream's environment and an HTTP upstream's bearer token as
-- JSON. They are secrets the gateway must present, so they are stored readable by the
-- server (protect the database file); the console and the audit only ever see which
-- environment keys exist and whether a token is set.
ALTER TABLE upstreams ADD COLUMN credentials TEXT NULL;

-- When a sync last found a tool missing from its upstream's tools/list (NULL: listed).
-- The tool is kept, so roles that grant it stay valid, and flagged in the console.
ALTER TABLE tools ADD COLUMN missing_since TEXT NULL;
