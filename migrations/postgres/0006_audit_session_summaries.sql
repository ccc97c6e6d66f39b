-- One row per audited governance session, maintained by the audit writer inside the same
-- transaction that appends the session's events (core/src/store/audit.rs), so that the
-- compliance sessions list filters and counts 50,000 sessions without scanning events.
-- `roles` and `tools` hold the distinct learned roles and called tools as ' a b c ':
-- a space before and after every name, so `instr(tools, ' x ')` tests membership.
-- PostgreSQL translation of migrations/sqlite/0006_audit_session_summaries.sql.
CREATE TABLE audit_session_summaries (
    session_id   TEXT PRIMARY KEY,
    first_seq    BIGINT NOT NULL,
    last_seq     BIGINT NOT NULL,
    started_at   TEXT NOT NULL,
    last_at      TEXT NOT NULL,
    actor        TEXT,
    scope        TEXT,
    task_summary TEXT,
    events       BIGINT NOT NULL DEFAULT 0,
    learns       BIGINT NOT NULL DEFAULT 0,
    calls        BIGINT NOT NULL DEFAULT 0,
    denials      BIGINT NOT NULL DEFAULT 0,
    violations   BIGINT NOT NULL DEFAULT 0,
    errors       BIGINT NOT NULL DEFAULT 0,
    roles        TEXT NOT NULL DEFAULT ' ',
    tools        TEXT NOT NULL DEFAULT ' '
);
CREATE UNIQUE INDEX audit_session_summaries_first_seq ON audit_session_summaries (first_seq);
CREATE INDEX audit_session_summaries_started ON audit_session_summaries (started_at);
CREATE INDEX audit_session_summaries_actor ON audit_session_summaries (actor, first_seq);

-- Backfill from events appended before this migration.
-- SQLite's json_extract(payload, '$.x') is (payload::json ->> 'x'), its SUM(<boolean>) is
-- COUNT(*) FILTER (WHERE <boolean>), `IS NOT` is IS DISTINCT FROM, and group_concat is
-- string_agg.
INSERT INTO audit_session_summaries
    (session_id, first_seq, last_seq, started_at, last_at, actor, scope, task_summary,
     events, learns, calls, denials, violations, errors)
SELECT session_id, MIN(seq), MAX(seq), MIN(at), MAX(at), MIN(actor),
       MAX(CASE WHEN kind = 'session_started' THEN payload::json ->> 'scope' END),
       MAX(CASE WHEN kind = 'session_started' THEN payload::json ->> 'task_summary' END),
       COUNT(*),
       COUNT(*) FILTER (WHERE kind = 'learn_granted'),
       COUNT(*) FILTER (WHERE kind = 'call_allowed'),
       COUNT(*) FILTER (WHERE kind = 'learn_denied'
           OR (kind = 'call_denied' AND (payload::json ->> 'code') IS DISTINCT FROM 'GOVERNANCE_VIOLATION')),
       COUNT(*) FILTER (WHERE kind = 'call_denied' AND (payload::json ->> 'code') = 'GOVERNANCE_VIOLATION'),
       COUNT(*) FILTER (WHERE kind = 'call_result' AND (payload::json ->> 'status') = 'error')
FROM audit_events
WHERE session_id IS NOT NULL
GROUP BY session_id;

UPDATE audit_session_summaries SET
    roles = ' ' || COALESCE((SELECT string_agg(role, ' ') FROM (
        SELECT DISTINCT e.payload::json ->> 'role' AS role FROM audit_events e
        WHERE e.session_id = audit_session_summaries.session_id AND e.kind = 'learn_granted') AS r), '') || ' ',
    tools = ' ' || COALESCE((SELECT string_agg(tool, ' ') FROM (
        SELECT DISTINCT e.payload::json ->> 'tool' AS tool FROM audit_events e
        WHERE e.session_id = audit_session_summaries.session_id
          AND e.kind IN ('call_allowed', 'call_denied')) AS t), '') || ' ';
UPDATE audit_session_summaries SET roles = ' ' WHERE roles = '  ';
UPDATE audit_session_summaries SET tools = ' ' WHERE tools = '  ';

-- Console-editable compliance settings (the audit retention period).
CREATE TABLE compliance_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
