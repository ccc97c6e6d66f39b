-- One row per audited governance session, maintained by the audit writer inside the same
-- transaction that appends the session's events (core/src/store/audit.rs), so that the
-- compliance sessions list filters and counts 50,000 sessions without scanning events.
-- `roles` and `tools` hold the distinct learned roles and called tools as ' a b c ':
-- a space before and after every name, so `instr(tools, ' x ')` tests membership.
CREATE TABLE audit_session_summaries (
    session_id   TEXT PRIMARY KEY,
    first_seq    INTEGER NOT NULL,
    last_seq     INTEGER NOT NULL,
    started_at   TEXT NOT NULL,
    last_at      TEXT NOT NULL,
    actor        TEXT,
    scope        TEXT,
    task_summary TEXT,
    events       INTEGER NOT NULL DEFAULT 0,
    learns       INTEGER NOT NULL DEFAULT 0,
    calls        INTEGER NOT NULL DEFAULT 0,
    denials      INTEGER NOT NULL DEFAULT 0,
    violations   INTEGER NOT NULL DEFAULT 0,
    errors       INTEGER NOT NULL DEFAULT 0,
    roles        TEXT NOT NULL DEFAULT ' ',
    tools        TEXT NOT NULL DEFAULT ' '
);
CREATE UNIQUE INDEX audit_session_summaries_first_seq ON audit_session_summaries (first_seq);
CREATE INDEX audit_session_summaries_started ON audit_session_summaries (started_at);
CREATE INDEX audit_session_summaries_actor ON audit_session_summaries (actor, first_seq);

-- Backfill from events appended before this migration.
INSERT INTO audit_session_summaries
    (session_id, first_seq, last_seq, started_at, last_at, actor, scope, task_summary,
     events, learns, calls, denials, violations, errors)
SELECT session_id, MIN(seq), MAX(seq), MIN(at), MAX(at), MIN(actor),
       MAX(CASE WHEN kind = 'session_started' THEN json_extract(payload, '$.scope') END),
       MAX(CASE WHEN kind = 'session_started' THEN json_extract(payload, '$.task_summary') END),
       COUNT(*),
       SUM(kind = 'learn_granted'),
       SUM(kind = 'call_allowed'),
       SUM(kind = 'learn_denied'
           OR (kind = 'call_denied' AND json_extract(payload, '$.code') IS NOT 'GOVERNANCE_VIOLATION')),
       SUM(kind = 'call_denied' AND json_extract(payload, '$.code') = 'GOVERNANCE_VIOLATION'),
       SUM(kind = 'call_result' AND json_extract(payload, '$.status') = 'error')
FROM audit_events
WHERE session_id IS NOT NULL
GROUP BY session_id;

UPDATE audit_session_summaries SET
    roles = ' ' || COALESCE((SELECT group_concat(role, ' ') FROM (
        SELECT DISTINCT json_extract(payload, '$.role') AS role FROM audit_events e
        WHERE e.session_id = audit_session_summaries.session_id AND e.kind = 'learn_granted')), '') || ' ',
    tools = ' ' || COALESCE((SELECT group_concat(tool, ' ') FROM (
        SELECT DISTINCT json_extract(payload, '$.tool') AS tool FROM audit_events e
        WHERE e.session_id = audit_session_summaries.session_id
          AND e.kind IN ('call_allowed', 'call_denied'))), '') || ' ';
UPDATE audit_session_summaries SET roles = ' ' WHERE roles = '  ';
UPDATE audit_session_summaries SET tools = ' ' WHERE tools = '  ';

-- Console-editable compliance settings (the audit retention period).
CREATE TABLE compliance_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
