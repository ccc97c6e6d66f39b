-- Pinned tool definitions and quarantine.
--
-- `description`, `input_schema` and the two columns below are the pinned definition: what
-- an admin admitted, what agents read and calls are checked against. For a new tool that no
-- admin has admitted yet they hold what its upstream offers, and `pin` is NULL.
-- PostgreSQL translation of migrations/sqlite/0015_tool_pins.sql.
ALTER TABLE tools ADD COLUMN output_schema TEXT NULL;
ALTER TABLE tools ADD COLUMN annotations TEXT NULL;

-- Lowercase hex SHA-256 of the canonical JSON of the pinned definition (`ToolSpec::pin`).
-- As on SQLite, a row that predates this migration (pin NULL and not quarantined) is
-- hashed by the store right after the migrations run: every tool present on upgrade is
-- pinned as it is. (The canonical JSON is computed in Rust, so the pin is not computed in
-- SQL here even though PostgreSQL has sha256().)
ALTER TABLE tools ADD COLUMN pin TEXT NULL;

-- The definition the upstream offers now (canonical JSON) and its hash, while it is not the
-- pinned one or the tool was never admitted; NULL otherwise.
ALTER TABLE tools ADD COLUMN offered TEXT NULL;
ALTER TABLE tools ADD COLUMN offered_pin TEXT NULL;

-- Since when calls to the tool are refused (TOOL_QUARANTINED); NULL: not quarantined.
ALTER TABLE tools ADD COLUMN quarantined_since TEXT NULL;
