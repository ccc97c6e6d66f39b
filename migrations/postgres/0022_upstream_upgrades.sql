-- An upstream's upgrade (issue #50): a new `serverInfo.version` with the same certificate
-- key and server name no longer quarantines. The pin takes the new version, and the row
-- keeps the version it replaced and when, so the console shows the upgrade beside the pin
-- (the `upstream.identity_version` audit event has both identities).
-- PostgreSQL translation of migrations/sqlite/0022_upstream_upgrades.sql.
ALTER TABLE upstream_identity ADD COLUMN previous_version TEXT;
ALTER TABLE upstream_identity ADD COLUMN version_changed_at TEXT;
