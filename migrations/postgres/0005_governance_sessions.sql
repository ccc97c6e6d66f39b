-- Governance sessions (created by init_skilder) and skill feedback.
-- Session state (learned roles, usage counters, succeeded tools) is one JSON document with
-- a revision number: a writer that loaded revision N may only store N+1, so two replicas
-- deciding on one session at once cannot both reserve usage that only one fits under.
-- PostgreSQL translation of migrations/sqlite/0005_governance_sessions.sql.
CREATE TABLE governance_sessions (
    id           TEXT PRIMARY KEY,
    key_id       BIGINT NOT NULL,
    key_name     TEXT NOT NULL,
    scope        TEXT NOT NULL,
    connection   TEXT NULL,
    task_summary TEXT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    state        TEXT NOT NULL,
    revision     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX governance_sessions_key_connection ON governance_sessions (key_id, connection, created_at);
CREATE INDEX governance_sessions_created ON governance_sessions (created_at);

CREATE TABLE skill_feedback (
    id          TEXT PRIMARY KEY,
    skill       TEXT NOT NULL,
    version     BIGINT NOT NULL,
    rating      BIGINT NOT NULL CHECK (rating BETWEEN 1 AND 5),
    comment     TEXT NULL,
    session_id  TEXT NULL,
    key_id      BIGINT NULL,
    key_name    TEXT NULL,
    at          TEXT NOT NULL
);
CREATE INDEX skill_feedback_skill_at ON skill_feedback (skill, at);

-- SQLite orders rows of equal timestamps by their implicit `rowid`; PostgreSQL has none, so
-- these tables get a real one, numbered in insertion order, under the same name.
ALTER TABLE governance_sessions ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
ALTER TABLE skill_feedback ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY;
