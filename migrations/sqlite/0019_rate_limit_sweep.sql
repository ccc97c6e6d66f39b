-- Slots of subjects that never come back (an address that registered an OAuth client
-- once) were pruned only when that subject asked again, so they stayed forever. Each
-- reservation now drops every slot of its action that left the window; this index makes
-- that a range scan instead of a scan of the table.
CREATE INDEX rate_limit_slots_expiry ON rate_limit_slots (action, at_ms);
