-- Holds announced by email too (issue #56): an `email` notifier's `target` is its
-- recipients (comma-separated), `settings` its SMTP server as JSON (host, port, tls:
-- starttls|tls|none, username, from), and `secret` the SMTP password ('' for none).
ALTER TABLE hold_notifiers ADD COLUMN settings TEXT NULL;
