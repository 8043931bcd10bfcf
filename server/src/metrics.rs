//! Prometheus metrics: webhook deliveries, fulfilment attempts, outgoing Stripe requests,
//! reconcile runs, alerts, and claims by state, in the Prometheus text format.
//!
//! Each `Application` owns its registry (no global recorder), so several instances in one
//! process (the tests) never mix their figures. The hot paths, a delivery and a fulfilment
//! attempt, touch only counter handles resolved up front and an atomic histogram. Claims by
//! state and open alerts are the database's, read at scrape time: true whichever instance is
//! scraped.

mod histogram;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use claimcheck_core::alert::{AlertChannel, AlertCondition, MessageKind};
use claimcheck_core::alert_check::Queued;
use claimcheck_core::observe::{Observer, StripeAnswer};
use claimcheck_core::report::{Attempt, ReconcileReport};
use claimcheck_core::webhook::DeliveryOutcome;
use claimcheck_core::{ClaimCounts, ClaimState, LeasedClaim, now_ms};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::alerts::{SendReport, SendResult};
use histogram::Histogram;

/// Upper bounds of the acknowledgement latency buckets, in seconds.
const ACK_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Upper bounds of the receipt-to-credits buckets, in seconds: a claim is usually fulfilled
/// within milliseconds, one retried after backoffs of seconds up to an hour.
const FULFILMENT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// What a fulfilment attempt came to, as labelled in `claimcheck_fulfilment_attempts_total`.
const ATTEMPT_RESULTS: [&str; 5] = ["processed", "failed", "gave_up", "lease_lost", "deferred"];

fn attempt_result(attempt: &Attempt) -> usize {
    match attempt {
        Attempt::Processed { .. } => 0,
        Attempt::Failed { gave_up: false, .. } => 1,
        Attempt::Failed { gave_up: true, .. } => 2,
        Attempt::LeaseLost { .. } => 3,
        Attempt::Deferred { .. } => 4,
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StripeLabels {
    operation: &'static str,
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabel {
    condition: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertChangeLabels {
    condition: &'static str,
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CreditLabels {
    operation: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertMessageLabels {
    channel: &'static str,
    result: &'static str,
}

/// What an alert check can change (a test message is not a change).
const ALERT_CHANGES: [MessageKind; 3] = [
    MessageKind::Opened,
    MessageKind::Reminder,
    MessageKind::Resolved,
];

/// What the database holds at the moment of a scrape; each part `None` when it could not be
/// read (left out of the scrape rather than shown stale).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub claims: Option<ClaimCounts>,
    /// The conditions with an open alert.
    pub open_alerts: Option<Vec<AlertCondition>>,
    /// Whether this process's last writes went through (`false`: refused, the disk full).
    pub writable: bool,
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    deliveries: [Counter; DeliveryOutcome::ALL.len()],
    ack: Histogram,
    /// Signature failures since the last delivery that was accepted: a run of them with no
    /// success means the signing secret does not match Stripe's.
    bad_signatures_in_a_row: AtomicU64,
    attempts: [Counter; ATTEMPT_RESULTS.len()],
    to_credits: Histogram,
    stripe_requests: Family<StripeLabels, Counter>,
    reconcile_runs: Counter,
    reconcile_failures: Counter,
    reconcile_listed: Counter,
    reconcile_recovered: Counter,
    alert_changes: Family<AlertChangeLabels, Counter>,
    alert_messages: Family<AlertMessageLabels, Counter>,
    database_reads: Counter,
    credit_requests: Family<CreditLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        // Counters are registered without `_total`: the encoder adds it.
        let mut registry = Registry::with_prefix("claimcheck");

        let deliveries = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "webhook_deliveries",
            "Webhook deliveries by outcome",
            deliveries.clone(),
        );
        let ack = Histogram::new(ACK_BUCKETS);
        registry.register(
            "webhook_ack_seconds",
            "Time from receiving a delivery to answering it (claim made durable)",
            ack.clone(),
        );
        let attempts = Family::<ResultLabel, Counter>::default();
        registry.register(
            "fulfilment_attempts",
            "Fulfilment attempts by this process's workers, by result",
            attempts.clone(),
        );
        let to_credits = Histogram::new(FULFILMENT_BUCKETS);
        registry.register(
            "fulfilment_seconds",
            "Time from receiving a claim to its fulfilment committed, for claims processed by this process",
            to_credits.clone(),
        );
        let stripe_requests = Family::<StripeLabels, Counter>::default();
        registry.register(
            "stripe_requests",
            "HTTP requests sent to Stripe, by operation and answer (HTTP status, timeout or error)",
            stripe_requests.clone(),
        );
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let counter = Counter::default();
            registry.register(name, help, counter.clone());
            counter
        };
        let reconcile_runs = counter(
            &mut registry,
            "reconcile_runs",
            "Reconcile runs made by this process",
        );
        let reconcile_failures = counter(
            &mut registry,
            "reconcile_failures",
            "Reconcile runs that failed (the cursor stayed)",
        );
        let reconcile_listed = counter(
            &mut registry,
            "reconcile_events_listed",
            "Acting events listed from Stripe's API by reconcile runs",
        );
        let reconcile_recovered = counter(
            &mut registry,
            "reconcile_events_recovered",
            "Events never delivered that reconcile runs claimed",
        );
        let database_reads = counter(
            &mut registry,
            "metrics_database_reads",
            "Times /metrics read the claims and alerts from the database (at most once per interval, however many scrape)",
        );

        let credit_requests = Family::<CreditLabels, Counter>::default();
        registry.register(
            "credit_requests",
            "Requests of the spend API and the CLI and dashboard adjustments, by operation \
             (spend, hold, capture, release, adjust) and result (done, a refusal's reason, \
             replayed, key_reused, key_in_use)",
            credit_requests.clone(),
        );
        let alert_changes = Family::<AlertChangeLabels, Counter>::default();
        registry.register(
            "alert_changes",
            "Alerts this process's checks opened, reminded of and resolved, by condition",
            alert_changes.clone(),
        );
        let alert_messages = Family::<AlertMessageLabels, Counter>::default();
        registry.register(
            "alert_messages",
            "Attempts to send an alert message, by channel and result (sent, failed and \
             retried later, gave_up after the last attempt)",
            alert_messages.clone(),
        );
        // Every series is there from the start, at 0.
        for condition in AlertCondition::ALL {
            for kind in ALERT_CHANGES {
                let _ = alert_changes.get_or_create(&AlertChangeLabels {
                    condition: condition.as_str(),
                    kind: kind.as_str(),
                });
            }
        }
        for channel in AlertChannel::ALL {
            for result in SendResult::ALL {
                let _ = alert_messages.get_or_create(&AlertMessageLabels {
                    channel: channel.as_str(),
                    result: result.as_str(),
                });
            }
        }

        // Every label value is there from the start (at 0), and the hot paths never look one
        // up again.
        let deliveries = DeliveryOutcome::ALL.map(|outcome| {
            deliveries
                .get_or_create(&OutcomeLabel {
                    outcome: outcome.as_str(),
                })
                .clone()
        });
        let attempts =
            ATTEMPT_RESULTS.map(|result| attempts.get_or_create(&ResultLabel { result }).clone());
        Metrics {
            registry,
            deliveries,
            ack,
            bad_signatures_in_a_row: AtomicU64::new(0),
            attempts,
            to_credits,
            stripe_requests,
            reconcile_runs,
            reconcile_failures,
            reconcile_listed,
            reconcile_recovered,
            alert_changes,
            alert_messages,
            database_reads,
            credit_requests,
        }
    }

    /// A request that changes credits came to `result`.
    pub fn credit_request(&self, operation: &'static str, result: &'static str) {
        self.credit_requests
            .get_or_create(&CreditLabels { operation, result })
            .inc();
    }

    /// Counts one answered delivery and how long it took to answer.
    pub fn observe(&self, outcome: DeliveryOutcome, elapsed: Duration) {
        if let Some(i) = DeliveryOutcome::ALL.iter().position(|o| *o == outcome) {
            self.deliveries[i].inc();
        }
        match outcome {
            DeliveryOutcome::BadSignature => {
                self.bad_signatures_in_a_row.fetch_add(1, Ordering::Relaxed);
            }
            DeliveryOutcome::Claimed
            | DeliveryOutcome::DuplicateEvent
            | DeliveryOutcome::DuplicateAction
            | DeliveryOutcome::Ignored => self.bad_signatures_in_a_row.store(0, Ordering::Relaxed),
            _ => {}
        }
        self.ack.observe(elapsed);
    }

    /// The upper bound (in ms) of the bucket holding quantile `q` of the ack latencies seen
    /// by this process, and how many there were; `None` before the first delivery.
    pub fn ack_quantile(&self, q: f64) -> Option<(f64, u64)> {
        self.ack
            .quantile(q)
            .map(|(seconds, count)| (seconds * 1000.0, count))
    }

    /// Signature failures since the last accepted delivery (in this process).
    pub fn bad_signatures_in_a_row(&self) -> u64 {
        self.bad_signatures_in_a_row.load(Ordering::Relaxed)
    }

    /// Deliveries refused for their signature since this process started (the alert checker
    /// adds them to the database's count, which all instances share).
    pub fn bad_signatures_total(&self) -> u64 {
        DeliveryOutcome::ALL
            .iter()
            .position(|o| *o == DeliveryOutcome::BadSignature)
            .map_or(0, |i| self.deliveries[i].get())
    }

    /// Counts what one alert check changed.
    pub fn observe_alert_changes(&self, changes: &[Queued]) {
        for change in changes {
            self.alert_changes
                .get_or_create(&AlertChangeLabels {
                    condition: change.condition.as_str(),
                    kind: change.kind.as_str(),
                })
                .inc();
        }
    }

    /// Counts the messages one round of sending tried.
    pub fn observe_alert_messages(&self, report: &SendReport) {
        for (channel, result) in &report.attempts {
            self.alert_messages
                .get_or_create(&AlertMessageLabels {
                    channel: channel.as_str(),
                    result: result.as_str(),
                })
                .inc();
        }
    }

    /// The exposition: this process's families, then what the database holds, each part
    /// that could be read.
    pub fn render(&self, database: &Snapshot) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        let mut registry = Registry::with_prefix("claimcheck");
        if let Some(counts) = &database.claims {
            let claims = Family::<StateLabel, Gauge>::default();
            registry.register(
                "claims",
                "Claims in the database by state (pending, running, stale, processed, failed)",
                claims.clone(),
            );
            for state in ClaimState::ALL {
                claims
                    .get_or_create(&StateLabel {
                        state: state.as_str(),
                    })
                    .set(counts.get(state));
            }
        }
        let writable = Gauge::<i64>::default();
        registry.register(
            "database_writable",
            "1 while this process's writes go through, 0 while the database refuses them for lack of space",
            writable.clone(),
        );
        writable.set(i64::from(database.writable));
        if let Some(open_alerts) = &database.open_alerts {
            let open = Family::<ConditionLabel, Gauge>::default();
            registry.register(
                "alerts_open",
                "1 while the condition has an open alert (across instances), else 0",
                open.clone(),
            );
            for condition in AlertCondition::ALL {
                open.get_or_create(&ConditionLabel {
                    condition: condition.as_str(),
                })
                .set(i64::from(open_alerts.contains(&condition)));
            }
        }
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
        out
    }
}

impl Metrics {
    /// One read of the database's figures for `/metrics`.
    pub fn database_read(&self) {
        self.database_reads.inc();
    }
}

impl Observer for Metrics {
    fn attempt_ended(&self, claim: &LeasedClaim, attempt: &Attempt) {
        self.attempts[attempt_result(attempt)].inc();
        if let Attempt::Processed { .. } = attempt {
            let waited = u64::try_from(now_ms().saturating_sub(claim.received_at)).unwrap_or(0);
            self.to_credits.observe(Duration::from_millis(waited));
        }
    }

    fn stripe_answered(&self, operation: &'static str, answer: StripeAnswer) {
        // Off the hot paths (a network round trip each): the label lookup is fine here.
        self.stripe_requests
            .get_or_create(&StripeLabels {
                operation,
                status: answer.to_string(),
            })
            .inc();
    }

    fn reconcile_ended(&self, outcome: Result<&ReconcileReport, &dyn std::error::Error>) {
        self.reconcile_runs.inc();
        match outcome {
            Ok(report) => {
                self.reconcile_listed.inc_by(report.listed);
                self.reconcile_recovered.inc_by(report.claimed);
            }
            Err(_) => {
                self.reconcile_failures.inc();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_and_cumulative_buckets() {
        let metrics = Metrics::default();
        metrics.observe(DeliveryOutcome::Claimed, Duration::from_micros(800));
        metrics.observe(DeliveryOutcome::BadSignature, Duration::from_millis(30));
        let text = metrics.render(&Snapshot::default());
        assert!(text.contains("claimcheck_webhook_deliveries_total{outcome=\"claimed\"} 1\n"));
        assert!(
            text.contains("claimcheck_webhook_deliveries_total{outcome=\"bad_signature\"} 1\n")
        );
        assert!(text.contains("claimcheck_webhook_deliveries_total{outcome=\"ignored\"} 0\n"));
        assert!(text.contains("claimcheck_webhook_ack_seconds_bucket{le=\"0.001\"} 1\n"));
        assert!(text.contains("claimcheck_webhook_ack_seconds_bucket{le=\"0.05\"} 2\n"));
        assert!(text.contains("claimcheck_webhook_ack_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("claimcheck_webhook_ack_seconds_count 2\n"));
        assert!(text.contains("# TYPE claimcheck_webhook_ack_seconds histogram\n"));
        assert!(!text.contains("claimcheck_claims{"), "{text}");
    }

    #[test]
    fn claims_by_state_are_rendered_when_known() {
        let metrics = Metrics::default();
        let database = Snapshot {
            claims: Some(ClaimCounts {
                pending: 2,
                processed: 5,
                ..ClaimCounts::default()
            }),
            open_alerts: Some(vec![AlertCondition::StaleClaims]),
            writable: false,
        };
        let text = metrics.render(&database);
        assert!(text.contains("claimcheck_database_writable 0\n"), "{text}");
        assert!(text.contains("# TYPE claimcheck_claims gauge\n"), "{text}");
        assert!(text.contains("claimcheck_claims{state=\"pending\"} 2\n"));
        assert!(text.contains("claimcheck_claims{state=\"processed\"} 5\n"));
        assert!(text.contains("claimcheck_claims{state=\"stale\"} 0\n"));
        assert!(
            text.contains("# TYPE claimcheck_alerts_open gauge\n"),
            "{text}"
        );
        assert!(text.contains("claimcheck_alerts_open{condition=\"stale_claims\"} 1\n"));
        assert!(text.contains("claimcheck_alerts_open{condition=\"failed_claims\"} 0\n"));
        // A part that could not be read is left out; the other stays.
        let text = metrics.render(&Snapshot {
            open_alerts: None,
            ..database
        });
        assert!(
            text.contains("claimcheck_claims{state=\"pending\"} 2\n"),
            "{text}"
        );
        assert!(!text.contains("claimcheck_alerts_open"), "{text}");
    }

    #[test]
    fn alert_changes_and_messages_are_counted() {
        let metrics = Metrics::default();
        metrics.observe_alert_changes(&[
            Queued {
                condition: AlertCondition::FailedClaims,
                kind: MessageKind::Opened,
            },
            Queued {
                condition: AlertCondition::FailedClaims,
                kind: MessageKind::Resolved,
            },
        ]);
        metrics.observe_alert_messages(&SendReport {
            attempts: vec![
                (AlertChannel::Email, SendResult::Failed),
                (AlertChannel::Webhook, SendResult::Sent),
                (AlertChannel::Email, SendResult::GaveUp),
            ],
        });
        let text = metrics.render(&Snapshot::default());
        for line in [
            "claimcheck_alert_changes_total{condition=\"failed_claims\",kind=\"opened\"} 1\n",
            "claimcheck_alert_changes_total{condition=\"failed_claims\",kind=\"resolved\"} 1\n",
            "claimcheck_alert_changes_total{condition=\"stale_claims\",kind=\"opened\"} 0\n",
            "claimcheck_alert_messages_total{channel=\"email\",result=\"failed\"} 1\n",
            "claimcheck_alert_messages_total{channel=\"email\",result=\"gave_up\"} 1\n",
            "claimcheck_alert_messages_total{channel=\"webhook\",result=\"sent\"} 1\n",
            "claimcheck_alert_messages_total{channel=\"webhook\",result=\"failed\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // Open alerts are the database's: not without it.
        assert!(!text.contains("claimcheck_alerts_open"), "{text}");
    }

    #[test]
    fn a_processed_claim_is_timed_from_its_receipt() {
        let metrics = Metrics::default();
        let event_id: claimcheck_core::EventId = "evt_1".parse().unwrap();
        let claim = LeasedClaim {
            event_id: event_id.clone(),
            event_type: "checkout.session.completed".into(),
            payload: String::new(),
            attempts: 1,
            received_at: now_ms() - 2_000,
        };
        metrics.attempt_ended(
            &claim,
            &Attempt::LeaseLost {
                event_id: event_id.clone(),
            },
        );
        metrics.attempt_ended(&claim, &Attempt::Processed { event_id });
        let text = metrics.render(&Snapshot::default());
        assert!(
            text.contains("claimcheck_fulfilment_seconds_count 1\n"),
            "{text}"
        );
        assert!(
            text.contains("claimcheck_fulfilment_seconds_bucket{le=\"1\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("claimcheck_fulfilment_seconds_bucket{le=\"2.5\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn the_overview_reads_the_same_buckets() {
        let metrics = Metrics::default();
        assert_eq!(metrics.ack_quantile(0.5), None);
        metrics.observe(DeliveryOutcome::Claimed, Duration::from_micros(1500));
        assert_eq!(metrics.ack_quantile(0.5), Some((2.0, 1)));
    }
}
