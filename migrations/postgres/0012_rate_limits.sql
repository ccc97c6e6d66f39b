-- Per-key rate limits of feedback_skill and skill proposals, exact across replicas.
-- A sliding window: one row per reserved slot, pruned once it falls out of the window, so
-- a subject (an agent key) holds at most `max` rows per action. A single INSERT … SELECT
-- counts the window and takes the slot, so two replicas can never both take the last one.
-- PostgreSQL translation of migrations/sqlite/0012_rate_limits.sql.
CREATE TABLE rate_limit_slots (
    subject TEXT NOT NULL,
    action  TEXT NOT NULL,
    at_ms   BIGINT NOT NULL
);
CREATE INDEX rate_limit_slots_window ON rate_limit_slots (subject, action, at_ms);
