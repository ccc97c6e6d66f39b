-- An announcement whose hold was decided, expired or withdrawn before it went out is not
-- sent: its delivery ends 'skipped' (issue #56), not 'failed'.
ALTER TABLE hold_notifications DROP CONSTRAINT hold_notifications_state_check;
ALTER TABLE hold_notifications ADD CONSTRAINT hold_notifications_state_check
    CHECK (state IN ('pending', 'delivered', 'failed', 'skipped'));
