-- The overview's backlog over time: how many claims were failed and stale, sampled by each
-- instance's alert check once an hour (the hour's start, unix ms; the first sample of an
-- hour stands). Only a new table: a previous version neither reads nor writes it.
CREATE TABLE backlog_samples (
    hour    BIGINT  PRIMARY KEY NOT NULL,
    failed  BIGINT  NOT NULL,
    stale   BIGINT  NOT NULL
);
