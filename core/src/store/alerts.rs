//! Alerts and their outbox: what the checks read, the compare-and-sets that let one
//! instance of several open, remind and resolve an alert (queueing its messages in the same
//! transaction), the operators' acknowledgements, snoozes and resolutions (audited in the
//! same transaction), and the lease each message is sent under.

use std::str::FromStr;

use serde::Serialize;

use super::Alerts;
use super::query::{Tx, sql};
use crate::ClaimState;
use crate::alert::{
    AlertChannel, AlertCondition, AlertDetail, DeliveryStatus, Handling, MessageKind,
};
use crate::alert_check::{AlertThresholds, Finding, LOOKBACK, Message, Observations, Tally};
use crate::audit::AuditRecord;
use crate::error::StoreError;

/// A finding and what to call it, as an alert row keeps them.
#[derive(Debug, Clone, Copy)]
pub struct Noted<'a> {
    pub finding: &'a Finding,
    /// The finding in the checking instance's words.
    pub summary: &'a str,
}

impl Noted<'_> {
    fn detail_json(&self) -> Result<String, StoreError> {
        serde_json::to_string(&self.finding.detail).map_err(|e| StoreError::Encode {
            what: "an alert's detail",
            message: e.to_string(),
        })
    }
}

/// How many ids an alert names.
const SAMPLES: i64 = 5;

/// An alert, open or resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AlertView {
    pub id: i64,
    pub condition: AlertCondition,
    pub opened_at: i64,
    pub since: Option<i64>,
    pub count: i64,
    /// In the words of the instance that last checked it.
    pub summary: String,
    /// What it is about, as data: for each reader's own words. `None` for alerts opened
    /// before details were kept.
    pub detail: Option<AlertDetail>,
    pub samples: Vec<String>,
    pub last_notified_at: i64,
    pub notifications: i64,
    pub checked_at: i64,
    pub resolved_at: Option<i64>,
    /// What operators did with it while it was open.
    pub handling: Handling,
    /// What they wrote with their last acknowledgement or snooze.
    pub handling_note: Option<String>,
    /// How many times operators changed its handling: what their forms compare against.
    pub handling_version: i64,
    /// The admin who resolved it by hand; `None` when the condition cleared.
    pub resolved_by: Option<String>,
    pub resolution_note: Option<String>,
}

#[derive(sqlx::FromRow)]
struct AlertRow {
    id: i64,
    condition: String,
    opened_at: i64,
    since: Option<i64>,
    count: i64,
    summary: String,
    detail: Option<String>,
    samples: String,
    last_notified_at: i64,
    notifications: i64,
    checked_at: i64,
    resolved_at: Option<i64>,
    handling: Option<String>,
    handled_by: Option<String>,
    handled_at: Option<i64>,
    snoozed_until: Option<i64>,
    handling_note: Option<String>,
    handling_version: i64,
    resolved_by: Option<String>,
    resolution_note: Option<String>,
}

impl AlertRow {
    fn handling(&self) -> Result<Handling, StoreError> {
        let by = || self.handled_by.clone();
        match (
            self.handling.as_deref(),
            by(),
            self.handled_at,
            self.snoozed_until,
        ) {
            (None, ..) => Ok(Handling::Open),
            (Some(ACKNOWLEDGED), Some(by), Some(at), _) => Ok(Handling::Acknowledged { by, at }),
            (Some(SNOOZED), Some(by), Some(at), Some(until)) => {
                Ok(Handling::Snoozed { by, at, until })
            }
            (Some(other), ..) => Err(StoreError::UnknownValue(format!(
                "alert {}: handling '{other}' without its operator, time or end",
                self.id
            ))),
        }
    }
}

const ACKNOWLEDGED: &str = "acknowledged";
const SNOOZED: &str = "snoozed";

impl TryFrom<AlertRow> for AlertView {
    type Error = StoreError;

    fn try_from(r: AlertRow) -> Result<Self, Self::Error> {
        Ok(AlertView {
            handling: r.handling()?,
            handling_note: r.handling_note,
            handling_version: r.handling_version,
            resolved_by: r.resolved_by,
            resolution_note: r.resolution_note,
            id: r.id,
            condition: AlertCondition::from_str(&r.condition).map_err(StoreError::UnknownValue)?,
            opened_at: r.opened_at,
            since: r.since,
            count: r.count,
            summary: r.summary,
            detail: r
                .detail
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(|e| StoreError::BadStoredJson {
                    what: "an alert's detail",
                    message: format!("alert {}: {e}", r.id),
                })?,
            samples: r
                .samples
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
            last_notified_at: r.last_notified_at,
            notifications: r.notifications,
            checked_at: r.checked_at,
            resolved_at: r.resolved_at,
        })
    }
}

/// One message on one channel and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AlertDeliveryView {
    pub id: i64,
    /// `None` for a test message.
    pub alert_id: Option<i64>,
    pub kind: MessageKind,
    pub channel: AlertChannel,
    pub subject: String,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub sent_at: Option<i64>,
}

/// A message due to be sent, with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueDelivery {
    pub id: i64,
    pub channel: AlertChannel,
    pub message: Message,
    /// Attempts before this one.
    pub attempts: i64,
}

#[derive(sqlx::FromRow)]
struct OutboxRow {
    id: i64,
    alert_id: Option<i64>,
    kind: String,
    channel: String,
    subject: String,
    body: String,
    status: String,
    attempts: i64,
    next_attempt_at: i64,
    last_error: Option<String>,
    created_at: i64,
    sent_at: Option<i64>,
}

impl OutboxRow {
    fn channel(&self) -> Result<AlertChannel, StoreError> {
        AlertChannel::from_str(&self.channel).map_err(StoreError::UnknownValue)
    }

    fn view(self) -> Result<AlertDeliveryView, StoreError> {
        Ok(AlertDeliveryView {
            channel: self.channel()?,
            kind: MessageKind::from_str(&self.kind).map_err(StoreError::UnknownValue)?,
            status: DeliveryStatus::from_str(&self.status).map_err(StoreError::UnknownValue)?,
            id: self.id,
            alert_id: self.alert_id,
            subject: self.subject,
            attempts: self.attempts,
            next_attempt_at: self.next_attempt_at,
            last_error: self.last_error,
            created_at: self.created_at,
            sent_at: self.sent_at,
        })
    }
}

const ALERT_COLUMNS: &str = "id, condition, opened_at, since, count, summary, detail, samples, \
    last_notified_at, notifications, checked_at, resolved_at, handling, handled_by, handled_at, \
    snoozed_until, handling_note, handling_version, resolved_by, resolution_note";

const DELIVERY_COLUMNS: &str = "id, alert_id, kind, channel, subject, body, status, attempts, \
    next_attempt_at, last_error, created_at, sent_at";

/// The partial unique index (one open alert per condition) makes a second instance's INSERT
/// a no-op: only the instance that gets an id back queues the message.
const OPEN: &str = "\
    INSERT INTO alerts (condition, opened_at, since, count, summary, detail, samples, \
                        last_notified_at, notifications, checked_at) \
    VALUES ($1, $2, $3, $4, $5, $7, $6, $2, 1, $2) \
    ON CONFLICT DO NOTHING \
    RETURNING id";

/// A compare-and-set on the last message's time: of two instances due to remind, one moves
/// it and sends. On the handling too: a reminder decided before an operator acknowledged
/// or snoozed the alert is not sent after it.
const REMIND: &str = "\
    UPDATE alerts SET last_notified_at = $3, notifications = notifications + 1, \
        count = $4, since = $5, summary = $6, samples = $7, detail = $8, checked_at = $3 \
    WHERE id = $1 AND resolved_at IS NULL AND last_notified_at = $2 AND handling_version = $9";

const REFRESH: &str = "\
    UPDATE alerts SET count = $2, since = $3, summary = $4, samples = $5, checked_at = $6, \
        detail = $7 \
    WHERE id = $1 AND resolved_at IS NULL";

/// The condition cleared: on the handling the check decided on (announced or not), so an
/// operator's snooze in between is kept by the next check.
const RESOLVE: &str = "\
    UPDATE alerts SET resolved_at = $2, checked_at = $2 \
    WHERE id = $1 AND resolved_at IS NULL AND handling_version = $3";

/// An operator's acknowledgement or snooze: lands only on the handling their page showed.
const HANDLE: &str = "\
    UPDATE alerts SET handling = $3, handled_by = $4, handled_at = $5, snoozed_until = $6, \
        handling_note = $7, handling_version = handling_version + 1 \
    WHERE id = $1 AND resolved_at IS NULL AND handling_version = $2";

/// An admin closes it with a note, whatever its handling: whoever resolves first wins.
const RESOLVE_BY_HAND: &str = "\
    UPDATE alerts SET resolved_at = $2, checked_at = $2, resolved_by = $3, resolution_note = $4 \
    WHERE id = $1 AND resolved_at IS NULL";

/// A newer message about the alert replaces one still waiting (a reminder after an opening
/// that never got out, a resolution after either), unless it is being sent right now.
const SUPERSEDE: &str = "\
    UPDATE alert_deliveries SET status = 'superseded' \
    WHERE alert_id = $1 AND status = 'pending' AND (lease_until IS NULL OR lease_until <= $2)";

const QUEUE: &str = "\
    INSERT INTO alert_deliveries (alert_id, kind, channel, subject, body, status, attempts, \
                                  next_attempt_at, created_at) \
    VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6)";

/// Queues one message of `kind` per channel about alert `alert_id`, in `tx`.
async fn queue(
    tx: &mut Tx,
    alert_id: i64,
    kind: MessageKind,
    messages: &[(AlertChannel, Message)],
    now: i64,
) -> Result<(), sqlx::Error> {
    for (channel, message) in messages {
        tx.on()
            .execute(
                sql(QUEUE)
                    .bind(alert_id)
                    .bind(kind.as_str())
                    .bind(channel.as_str())
                    .bind(&message.subject)
                    .bind(&message.text)
                    .bind(now),
            )
            .await?;
    }
    Ok(())
}

/// Queues the messages of a change that makes the alert's waiting ones old news: those not
/// being sent are superseded first.
async fn replace_waiting(
    tx: &mut Tx,
    alert_id: i64,
    kind: MessageKind,
    messages: &[(AlertChannel, Message)],
    now: i64,
) -> Result<(), sqlx::Error> {
    tx.on()
        .execute(sql(SUPERSEDE).bind(alert_id).bind(now))
        .await?;
    queue(tx, alert_id, kind, messages, now).await
}

const TAKE: &str = "\
    UPDATE alert_deliveries SET lease_until = $2 + $3, attempts = attempts + 1 \
    WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $2 \
      AND (lease_until IS NULL OR lease_until <= $2)";

const RECORD_SIGNATURE_FAILURES: &str = "\
    INSERT INTO webhook_signature_failures (minute, failures, last_at) VALUES ($1, $2, $3) \
    ON CONFLICT (minute) DO UPDATE SET \
        failures = webhook_signature_failures.failures + excluded.failures, \
        last_at = CASE WHEN excluded.last_at > webhook_signature_failures.last_at \
                       THEN excluded.last_at ELSE webhook_signature_failures.last_at END";

fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

impl Alerts<'_> {
    /// Reads what the checks need at `now`; a condition that is off is not read.
    pub async fn observe(
        self,
        thresholds: &AlertThresholds,
        now: i64,
    ) -> Result<Observations, StoreError> {
        let mut obs = Observations {
            now,
            ..Observations::default()
        };
        if thresholds.failed_claims > 0 {
            // Resolved claims are failed ones an admin set aside: they alert no more.
            let failed = super::claim_state::in_state(ClaimState::Failed, "$1");
            obs.failed_claims = self
                .tally(
                    &format!(
                        "SELECT COUNT(*), MIN(received_at) FROM processed_stripe_events \
                         WHERE {failed} AND received_at <= $1"
                    ),
                    &format!(
                        "SELECT event_id FROM processed_stripe_events WHERE {failed} \
                         AND received_at <= $1 ORDER BY received_at, event_id LIMIT $2"
                    ),
                    now,
                )
                .await?;
        }
        if let Some(after) = thresholds.stale_after {
            // Stale for longer than `after`: stale at `now - after`.
            let stale = super::claim_state::in_state(ClaimState::Stale, "$1");
            obs.stale_claims = self
                .tally(
                    &format!(
                        "SELECT COUNT(*), MIN(lease_expires_at) FROM processed_stripe_events \
                         WHERE {stale}"
                    ),
                    &format!(
                        "SELECT event_id FROM processed_stripe_events WHERE {stale} \
                         ORDER BY lease_expires_at, event_id LIMIT $2"
                    ),
                    now - ms(after),
                )
                .await?;
        }
        if let Some(after) = thresholds.newer_version_after {
            // Received longer ago than `after` ($1), never leased by a version that fulfils it
            // (pending) or given up by one that stopped (stale at $2).
            let waiting = concat!(
                "FROM processed_stripe_events WHERE status = 'processing' \
                 AND (lease_expires_at IS NULL OR lease_expires_at <= $2) AND received_at <= $1",
                super::claim_state::unknown_types!()
            );
            let (count, oldest): (i64, Option<i64>) = self
                .pool
                .on()
                .one(
                    sql(format!("SELECT COUNT(*), MIN(received_at) {waiting}"))
                        .bind(now - ms(after))
                        .bind(now),
                )
                .await?;
            if count > 0 {
                let first: Vec<(String, String)> = self
                    .pool
                    .on()
                    .all(
                        sql(format!(
                            "SELECT event_id, event_type {waiting} \
                             ORDER BY received_at, event_id LIMIT $3"
                        ))
                        .bind(now - ms(after))
                        .bind(now)
                        .bind(SAMPLES),
                    )
                    .await?;
                obs.newer_version_type = first.first().map(|(_, kind)| kind.clone());
                obs.newer_version_claims = Tally {
                    count,
                    oldest,
                    samples: first.into_iter().map(|(id, _)| id).collect(),
                };
            }
        }
        if let Some(after) = thresholds.past_due_after {
            // Stripe's seconds: failed at or before $1, and not ended since (the unpaid
            // invoice of a canceled subscription, or of a first payment never completed, is
            // Stripe's to write off: nothing to chase).
            const PAST_DUE: &str = "FROM subscriptions WHERE unpaid_since IS NOT NULL \
                                    AND unpaid_since <= $1 \
                                    AND (status IS NULL \
                                         OR status NOT IN ('canceled', 'incomplete_expired'))";
            let before = (now - ms(after)).div_euclid(1000);
            let (count, oldest): (i64, Option<i64>) = self
                .pool
                .on()
                .one(sql(format!("SELECT COUNT(*), MIN(unpaid_since) {PAST_DUE}")).bind(before))
                .await?;
            if count > 0 {
                let first: Vec<(String, Option<String>)> = self
                    .pool
                    .on()
                    .all(
                        sql(format!(
                            "SELECT subscription_id, customer_email {PAST_DUE} \
                             ORDER BY unpaid_since, subscription_id LIMIT $2"
                        ))
                        .bind(before)
                        .bind(SAMPLES),
                    )
                    .await?;
                obs.past_due_customer = first.first().and_then(|(_, email)| email.clone());
                obs.past_due_subscriptions = Tally {
                    count,
                    oldest: oldest.map(|at| at.saturating_mul(1000)),
                    samples: first.into_iter().map(|(id, _)| id).collect(),
                };
            }
        }
        // Any delivery recorded passed the signature check: Stripe reaches us with the
        // right secret, whatever became of the event.
        obs.last_delivery_at = self
            .pool
            .on()
            .optional_value(sql(
                "SELECT received_at FROM webhook_deliveries WHERE source = 'webhook' \
                 ORDER BY received_at DESC LIMIT 1",
            ))
            .await?;
        let after_delivery = obs
            .last_delivery_at
            .unwrap_or(i64::MIN)
            .max(now - ms(LOOKBACK));
        if thresholds.quiet_after.is_some() {
            obs.orders_since_delivery = self
                .tally(
                    "SELECT COUNT(*), MIN(created_at) FROM stripe_requests \
                     WHERE operation = 'checkout_session' AND created_at > $1",
                    "SELECT order_id FROM stripe_requests \
                     WHERE operation = 'checkout_session' AND created_at > $1 \
                     ORDER BY created_at, order_id LIMIT $2",
                    after_delivery,
                )
                .await?;
        }
        if thresholds.signature_window.is_some() {
            let (count, first): (i64, Option<i64>) = self
                .pool
                .on()
                .one(
                    sql(
                        "SELECT CAST(COALESCE(SUM(failures), 0) AS BIGINT), MIN(minute) \
                     FROM webhook_signature_failures WHERE last_at > $1",
                    )
                    .bind(after_delivery),
                )
                .await?;
            obs.signature_failures = Tally {
                count,
                oldest: first.map(|m| m.max(after_delivery)),
                samples: Vec::new(),
            };
        }
        if let Some(after) = thresholds.indeterminate_after {
            obs.indeterminate_requests = self
                .tally(
                    "SELECT COUNT(*), MIN(updated_at) FROM stripe_requests \
                     WHERE status = 'indeterminate' AND updated_at <= $1",
                    "SELECT idempotency_key FROM stripe_requests \
                     WHERE status = 'indeterminate' AND updated_at <= $1 \
                     ORDER BY updated_at, idempotency_key LIMIT $2",
                    now - ms(after),
                )
                .await?;
        }
        if thresholds.reconcile_window.is_some() {
            obs.last_reconcile = self
                .pool
                .on()
                .optional(sql(format!(
                    "SELECT {} FROM reconcile_runs WHERE dry_run = FALSE \
                     ORDER BY started_at DESC, id DESC LIMIT 1",
                    super::reconcile::RUN_COLUMNS
                )))
                .await?;
        }
        if thresholds.expired_holds > 0 {
            let since = now - ms(thresholds.expired_holds_window);
            // Released by the upkeep, or past their expiry and about to be.
            const RAN_OUT: &str = "FROM credit_holds WHERE status IN ('active', 'expired') \
                                   AND expires_at <= $1 AND expires_at > $2";
            let (count, oldest): (i64, Option<i64>) = self
                .pool
                .on()
                .one(
                    sql(format!("SELECT COUNT(*), MIN(expires_at) {RAN_OUT}"))
                        .bind(now)
                        .bind(since),
                )
                .await?;
            if count > 0 {
                let latest: Vec<(String, String)> = self
                    .pool
                    .on()
                    .all(
                        sql(format!(
                            "SELECT hold_id, customer_email {RAN_OUT} \
                             ORDER BY expires_at DESC, hold_id LIMIT $3"
                        ))
                        .bind(now)
                        .bind(since)
                        .bind(SAMPLES),
                    )
                    .await?;
                obs.expired_holds_customer = latest.first().map(|(_, email)| email.clone());
                obs.expired_holds = Tally {
                    count,
                    oldest,
                    samples: latest.into_iter().map(|(hold, _)| hold).collect(),
                };
            }
        }
        if thresholds.credits_owed > 0 {
            // Only a refund or a dispute takes a balance below zero (spends and adjustments
            // never do): the customers with a revoke are the only ones to sum.
            let owing: Vec<(String, i64, i64)> = self
                .pool
                .on()
                .all(
                    sql("SELECT email, balance, first_revoke FROM ( \
                           SELECT r.email AS email, r.first_revoke AS first_revoke, CAST( \
                             (SELECT COALESCE(SUM(l.delta), 0) FROM credit_ledger l \
                              JOIN orders o ON o.order_id = l.order_id \
                              WHERE o.customer_email = r.email) \
                             + (SELECT COALESCE(SUM(m.delta), 0) FROM credit_movements m \
                                WHERE m.customer_email = r.email) AS BIGINT) AS balance \
                           FROM (SELECT o.customer_email AS email, \
                                        MIN(l.created_at) AS first_revoke \
                                 FROM credit_ledger l JOIN orders o ON o.order_id = l.order_id \
                                 WHERE l.kind = 'revoke' AND o.customer_email IS NOT NULL \
                                 GROUP BY o.customer_email) r \
                         ) t WHERE balance <= $1 ORDER BY balance, email")
                    .bind(-i64::try_from(thresholds.credits_owed).unwrap_or(i64::MAX)),
                )
                .await?;
            obs.credits_owed = owing.iter().map(|(_, balance, _)| -balance).sum();
            obs.owing_customers = Tally {
                count: i64::try_from(owing.len()).unwrap_or(i64::MAX),
                oldest: owing.iter().map(|(_, _, at)| *at).min(),
                samples: owing
                    .into_iter()
                    .take(usize::try_from(SAMPLES).unwrap_or(0))
                    .map(|(email, _, _)| email)
                    .collect(),
            };
        }
        Ok(obs)
    }

    /// A count with its oldest time (`count_sql`, bound to `$1`), and a few ids (`ids_sql`,
    /// `$1` and the limit `$2`).
    async fn tally(self, count_sql: &str, ids_sql: &str, bound: i64) -> Result<Tally, StoreError> {
        let (count, oldest): (i64, Option<i64>) =
            self.pool.on().one(sql(count_sql).bind(bound)).await?;
        let samples = if count > 0 {
            self.pool
                .on()
                .column(sql(ids_sql).bind(bound).bind(SAMPLES))
                .await?
        } else {
            Vec::new()
        };
        Ok(Tally {
            count,
            oldest,
            samples,
        })
    }

    /// Adds `failures` signature failures seen by this instance, as of `now`, to the minute's
    /// count; forgets the minutes past the lookback.
    pub async fn record_signature_failures(
        self,
        failures: u64,
        now: i64,
    ) -> Result<(), StoreError> {
        let minute = now - now.rem_euclid(60_000);
        let failures = i64::try_from(failures).unwrap_or(i64::MAX);
        {
            self.pool
                .on()
                .execute(
                    sql(RECORD_SIGNATURE_FAILURES)
                        .bind(minute)
                        .bind(failures)
                        .bind(now),
                )
                .await?;
            self.pool
                .on()
                .execute(
                    sql("DELETE FROM webhook_signature_failures WHERE minute < $1")
                        .bind(now - ms(LOOKBACK)),
                )
                .await
                .map(|_| ())
        }?;
        Ok(())
    }

    /// The open alerts, oldest first.
    pub async fn open(self) -> Result<Vec<AlertView>, StoreError> {
        let statement = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE resolved_at IS NULL \
             ORDER BY opened_at, id LIMIT $1"
        );
        // One per condition at most.
        self.alerts(&statement, 100).await
    }

    /// Open alerts first, then the most recently opened, at most `limit`.
    pub async fn recent(self, limit: i64) -> Result<Vec<AlertView>, StoreError> {
        let statement = format!(
            "SELECT {ALERT_COLUMNS} FROM alerts \
             ORDER BY CASE WHEN resolved_at IS NULL THEN 0 ELSE 1 END, opened_at DESC, id DESC \
             LIMIT $1"
        );
        self.alerts(&statement, limit).await
    }

    async fn alerts(self, statement: &str, limit: i64) -> Result<Vec<AlertView>, StoreError> {
        let rows: Vec<AlertRow> = self.pool.on().all(sql(statement).bind(limit)).await?;
        // A condition a newer version checks (its instances run beside this one during a
        // rolling deploy) is that version's to show and resolve: skipped here, not an error.
        rows.into_iter()
            .filter(|row| AlertCondition::from_str(&row.condition).is_ok())
            .map(AlertView::try_from)
            .collect()
    }

    /// Opens an alert for `finding` and queues its messages, in one transaction; `false`
    /// when one is open already (another instance got there first).
    pub async fn open_alert(
        self,
        noted: &Noted<'_>,
        now: i64,
        messages: &[(AlertChannel, Message)],
    ) -> Result<bool, StoreError> {
        let finding = noted.finding;
        let samples = finding.samples.join("\n");
        let detail = noted.detail_json()?;
        let opened = {
            let mut tx = self.pool.begin().await?;
            let id: Option<i64> = tx
                .on()
                .optional_value(
                    sql(OPEN)
                        .bind(finding.condition.as_str())
                        .bind(now)
                        .bind(finding.since)
                        .bind(finding.count)
                        .bind(noted.summary)
                        .bind(&samples)
                        .bind(&detail),
                )
                .await?;
            if let Some(id) = id {
                queue(&mut tx, id, MessageKind::Opened, messages, now).await?;
            }
            tx.commit().await?;
            id.is_some()
        };
        Ok(opened)
    }

    /// Sends a reminder about `alert` unless another instance did since it was read.
    pub async fn remind(
        self,
        alert: &AlertView,
        noted: &Noted<'_>,
        now: i64,
        messages: &[(AlertChannel, Message)],
    ) -> Result<bool, StoreError> {
        let finding = noted.finding;
        let samples = finding.samples.join("\n");
        let detail = noted.detail_json()?;
        let reminded = {
            let mut tx = self.pool.begin().await?;
            let moved = tx
                .on()
                .execute(
                    sql(REMIND)
                        .bind(alert.id)
                        .bind(alert.last_notified_at)
                        .bind(now)
                        .bind(finding.count)
                        .bind(finding.since)
                        .bind(noted.summary)
                        .bind(&samples)
                        .bind(&detail)
                        .bind(alert.handling_version),
                )
                .await?
                == 1;
            if moved {
                replace_waiting(&mut tx, alert.id, MessageKind::Reminder, messages, now).await?;
            }
            tx.commit().await?;
            moved
        };
        Ok(reminded)
    }

    /// Brings an open alert's figures up to date (no message).
    pub async fn refresh(self, id: i64, noted: &Noted<'_>, now: i64) -> Result<(), StoreError> {
        let finding = noted.finding;
        let samples = finding.samples.join("\n");
        let detail = noted.detail_json()?;
        self.pool
            .on()
            .execute(
                sql(REFRESH)
                    .bind(id)
                    .bind(finding.count)
                    .bind(finding.since)
                    .bind(noted.summary)
                    .bind(&samples)
                    .bind(now)
                    .bind(&detail),
            )
            .await
            .map(|_| ())?;
        Ok(())
    }

    /// Resolves an open alert whose condition cleared and queues its messages (none while
    /// it is snoozed: what waits is superseded all the same); `false` if it was resolved
    /// already, or operators changed its handling since it was read.
    pub async fn resolve(
        self,
        alert: &AlertView,
        now: i64,
        messages: &[(AlertChannel, Message)],
    ) -> Result<bool, StoreError> {
        let resolved = {
            let mut tx = self.pool.begin().await?;
            let moved = tx
                .on()
                .execute(
                    sql(RESOLVE)
                        .bind(alert.id)
                        .bind(now)
                        .bind(alert.handling_version),
                )
                .await?
                == 1;
            if moved {
                replace_waiting(&mut tx, alert.id, MessageKind::Resolved, messages, now).await?;
            }
            tx.commit().await?;
            moved
        };
        Ok(resolved)
    }

    /// One alert, open or resolved.
    pub async fn get(self, id: i64) -> Result<Option<AlertView>, StoreError> {
        let statement = format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE id = $1");
        let row: Option<AlertRow> = self.pool.on().optional(sql(&statement).bind(id)).await?;
        row.map(AlertView::try_from).transpose()
    }

    /// An operator acknowledges or snoozes alert `id` as `handling` at `now`, if it is
    /// still open and its handling still at version `seen`; in the same transaction,
    /// messages still waiting to go out about it are superseded (a reminder queued before is
    /// not news any more) and `audit` is appended. `false` when nothing changed.
    pub async fn handle(
        self,
        id: i64,
        seen: i64,
        handling: &Handling,
        note: Option<&str>,
        now: i64,
        audit: &AuditRecord<'_>,
    ) -> Result<bool, StoreError> {
        // Open again (never asked for yet) clears who and when: there is nothing to show.
        let (state, by, at, until) = match handling {
            Handling::Open => (None, None, None, None),
            Handling::Acknowledged { by, at } => {
                (Some(ACKNOWLEDGED), Some(by.as_str()), Some(*at), None)
            }
            Handling::Snoozed { by, at, until } => {
                (Some(SNOOZED), Some(by.as_str()), Some(*at), Some(*until))
            }
        };
        let mut tx = self.pool.begin().await?;
        let moved = tx
            .on()
            .execute(
                sql(HANDLE)
                    .bind(id)
                    .bind(seen)
                    .bind(state)
                    .bind(by)
                    .bind(at)
                    .bind(until)
                    .bind(note),
            )
            .await?
            == 1;
        if moved {
            tx.on().execute(sql(SUPERSEDE).bind(id).bind(now)).await?;
            super::audit::insert(tx.on(), audit, None, now).await?;
        }
        tx.commit().await?;
        Ok(moved)
    }

    /// An admin resolves alert `id` with `note`, if it is still open: its resolution
    /// messages are queued (replacing what still waits) and `audit` appended, in one
    /// transaction. `false` when it was resolved already.
    pub async fn resolve_by_hand(
        self,
        id: i64,
        by: &str,
        note: &str,
        now: i64,
        messages: &[(AlertChannel, Message)],
        audit: &AuditRecord<'_>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let moved = tx
            .on()
            .execute(sql(RESOLVE_BY_HAND).bind(id).bind(now).bind(by).bind(note))
            .await?
            == 1;
        if moved {
            replace_waiting(&mut tx, id, MessageKind::Resolved, messages, now).await?;
            super::audit::insert(tx.on(), audit, None, now).await?;
        }
        tx.commit().await?;
        Ok(moved)
    }

    /// Messages due at `now` on one of `channels`, oldest first, at most `limit`. The
    /// channels are chosen in SQL, before the limit: messages waiting for a channel this
    /// instance does not have (one removed from its configuration) never crowd out the
    /// others'.
    pub async fn due(
        self,
        channels: &[AlertChannel],
        now: i64,
        limit: i64,
    ) -> Result<Vec<DueDelivery>, StoreError> {
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        // Our own names, never a caller's text: safe to write into the statement.
        let names = channels
            .iter()
            .map(|channel| format!("'{}'", channel.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let statement = format!(
            "SELECT {DELIVERY_COLUMNS} FROM alert_deliveries \
             WHERE status = 'pending' AND next_attempt_at <= $1 \
               AND (lease_until IS NULL OR lease_until <= $1) AND channel IN ({names}) \
             ORDER BY next_attempt_at, id LIMIT $2"
        );
        let rows: Vec<OutboxRow> = self
            .pool
            .on()
            .all(sql(&statement).bind(now).bind(limit))
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(DueDelivery {
                    id: row.id,
                    channel: row.channel()?,
                    attempts: row.attempts,
                    message: Message {
                        subject: row.subject,
                        text: row.body,
                    },
                })
            })
            .collect()
    }

    /// Takes a due message to send it until `now + lease_ms` (counting the attempt); `false`
    /// when another instance took it first.
    pub async fn take(self, id: i64, now: i64, lease_ms: i64) -> Result<bool, StoreError> {
        let taken = self
            .pool
            .on()
            .execute(sql(TAKE).bind(id).bind(now).bind(lease_ms))
            .await
            .map(|n| n == 1)?;
        Ok(taken)
    }

    /// The message went out.
    pub async fn sent(self, id: i64, now: i64) -> Result<(), StoreError> {
        self.pool.on().execute(sql(
                "UPDATE alert_deliveries SET status = 'sent', sent_at = $2, lease_until = NULL, \
                 last_error = NULL WHERE id = $1",
            )
            .bind(id)
            .bind(now)
            ).await
            .map(|_| ())?;
        Ok(())
    }

    /// An attempt failed: try again at `retry_at`, or (`None`) give up.
    pub async fn attempt_failed(
        self,
        id: i64,
        error: &str,
        retry_at: Option<i64>,
    ) -> Result<(), StoreError> {
        let statement = match retry_at {
            Some(_) => {
                "UPDATE alert_deliveries SET next_attempt_at = $3, last_error = $2, \
                 lease_until = NULL WHERE id = $1 AND status = 'pending'"
            }
            None => {
                "UPDATE alert_deliveries SET status = 'failed', last_error = $2, \
                 lease_until = NULL WHERE id = $1 AND status = 'pending'"
            }
        };
        let query = sql(statement).bind(id).bind(error);
        let query = match retry_at {
            Some(at) => query.bind(at),
            None => query,
        };
        self.pool.on().execute(query).await?;
        Ok(())
    }

    /// Records a test message sent on `channel` and its outcome.
    pub async fn record_test(
        self,
        channel: AlertChannel,
        message: &Message,
        now: i64,
        outcome: Result<(), &str>,
    ) -> Result<(), StoreError> {
        let (status, error, sent_at) = match outcome {
            Ok(()) => ("sent", None, Some(now)),
            Err(error) => ("failed", Some(error), None),
        };
        self.pool
            .on()
            .execute(
                sql(
                    "INSERT INTO alert_deliveries (alert_id, kind, channel, subject, body, status, \
                     attempts, next_attempt_at, last_error, created_at, sent_at) \
                 VALUES (NULL, 'test', $1, $2, $3, $4, 1, $5, $6, $5, $7)",
                )
                .bind(channel.as_str())
                .bind(&message.subject)
                .bind(&message.text)
                .bind(status)
                .bind(now)
                .bind(error)
                .bind(sent_at),
            )
            .await
            .map(|_| ())?;
        Ok(())
    }

    /// The latest messages (test messages included), newest first.
    pub async fn deliveries(self, limit: i64) -> Result<Vec<AlertDeliveryView>, StoreError> {
        let statement =
            format!("SELECT {DELIVERY_COLUMNS} FROM alert_deliveries ORDER BY id DESC LIMIT $1");
        let rows: Vec<OutboxRow> = self.pool.on().all(sql(&statement).bind(limit)).await?;
        rows.into_iter().map(OutboxRow::view).collect()
    }
}
