-- What operators on call did with an alert: acknowledged it (no reminders while it stays
-- open), snoozed it (no message at all until the snooze ends), or an admin resolved it with
-- a note. Only new nullable or defaulted columns: a previous version keeps opening,
-- reminding and resolving alerts as it did, without reading them.

-- 'acknowledged' or 'snoozed'; NULL while nobody has acted on the alert.
ALTER TABLE alerts ADD COLUMN handling TEXT CHECK (handling IN ('acknowledged', 'snoozed'));
-- The operator who acknowledged or snoozed it last, and when (unix ms).
ALTER TABLE alerts ADD COLUMN handled_by TEXT;
ALTER TABLE alerts ADD COLUMN handled_at BIGINT;
-- With handling = 'snoozed': no message about the alert before this moment (unix ms).
ALTER TABLE alerts ADD COLUMN snoozed_until BIGINT;
-- What the operator wrote when acknowledging or snoozing it, if anything.
ALTER TABLE alerts ADD COLUMN handling_note TEXT;
-- Counts the operators' changes. A form carries the count its page showed and lands only
-- if nobody acted since (two operators at once: one acts, the other is told what happened);
-- a check's reminder or resolution lands only on the handling it was decided on.
ALTER TABLE alerts ADD COLUMN handling_version BIGINT NOT NULL DEFAULT 0;
-- The admin who resolved it by hand, and their note; NULL when the condition cleared.
ALTER TABLE alerts ADD COLUMN resolved_by TEXT;
ALTER TABLE alerts ADD COLUMN resolution_note TEXT;
