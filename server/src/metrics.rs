//! Prometheus metrics for webhook ingestion, rendered in the text exposition format.
//!
//! Hand-rolled rather than a global recorder: each `Application` owns its own counters, so
//! several instances in one process (the tests) never mix their figures, and the whole thing
//! is a few atomics.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use claimcheck_core::webhook::DeliveryOutcome;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Debug, Default)]
pub struct Metrics {
    deliveries: [AtomicU64; DeliveryOutcome::ALL.len()],
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_micros: AtomicU64,
    /// Signature failures since the last delivery that was accepted: a run of them with no
    /// success means the signing secret does not match Stripe's.
    bad_signatures_in_a_row: AtomicU64,
    reconcile_runs: AtomicU64,
    reconcile_failures: AtomicU64,
    reconcile_listed: AtomicU64,
    reconcile_recovered: AtomicU64,
}

impl Metrics {
    /// Counts one answered delivery and how long it took to answer.
    pub fn observe(&self, outcome: DeliveryOutcome, elapsed: Duration) {
        if let Some(i) = DeliveryOutcome::ALL.iter().position(|o| *o == outcome) {
            self.deliveries[i].fetch_add(1, Ordering::Relaxed);
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
        let seconds = elapsed.as_secs_f64();
        for (bucket, bound) in self.latency_buckets.iter().zip(BUCKETS) {
            if seconds <= bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.latency_sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// The upper bound (in ms) of the bucket holding quantile `q` of the ack latencies seen
    /// by this process, and how many there were; `None` before the first delivery.
    pub fn ack_quantile(&self, q: f64) -> Option<(f64, u64)> {
        let count = self.latency_count.load(Ordering::Relaxed);
        if count == 0 {
            return None;
        }
        let wanted = (q * count as f64).ceil() as u64;
        let bound = BUCKETS
            .iter()
            .zip(&self.latency_buckets)
            .find(|(_, bucket)| bucket.load(Ordering::Relaxed) >= wanted)
            .map(|(bound, _)| *bound)
            .unwrap_or(f64::INFINITY);
        Some((bound * 1000.0, count))
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
            .map_or(0, |i| self.deliveries[i].load(Ordering::Relaxed))
    }

    /// Counts one reconcile run: `Some((listed, recovered))` if it succeeded.
    pub fn observe_reconcile(&self, outcome: Option<(u64, u64)>) {
        self.reconcile_runs.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Some((listed, recovered)) => {
                self.reconcile_listed.fetch_add(listed, Ordering::Relaxed);
                self.reconcile_recovered
                    .fetch_add(recovered, Ordering::Relaxed);
            }
            None => {
                self.reconcile_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, help, value) in [
            (
                "claimcheck_reconcile_runs_total",
                "Reconcile runs made by this process.",
                &self.reconcile_runs,
            ),
            (
                "claimcheck_reconcile_failures_total",
                "Reconcile runs that failed (the cursor stayed).",
                &self.reconcile_failures,
            ),
            (
                "claimcheck_reconcile_events_listed_total",
                "Acting events listed from Stripe's API by reconcile runs.",
                &self.reconcile_listed,
            ),
            (
                "claimcheck_reconcile_events_recovered_total",
                "Events never delivered that reconcile runs claimed.",
                &self.reconcile_recovered,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        out.push_str("# HELP claimcheck_webhook_deliveries_total Webhook deliveries by outcome.\n");
        out.push_str("# TYPE claimcheck_webhook_deliveries_total counter\n");
        for (outcome, count) in DeliveryOutcome::ALL.iter().zip(&self.deliveries) {
            let _ = writeln!(
                out,
                "claimcheck_webhook_deliveries_total{{outcome=\"{outcome}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        out.push_str(
            "# HELP claimcheck_webhook_ack_seconds Time from receiving a delivery to answering it (claim made durable).\n",
        );
        out.push_str("# TYPE claimcheck_webhook_ack_seconds histogram\n");
        for (bound, bucket) in BUCKETS.iter().zip(&self.latency_buckets) {
            let _ = writeln!(
                out,
                "claimcheck_webhook_ack_seconds_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "claimcheck_webhook_ack_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let sum = self.latency_sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "claimcheck_webhook_ack_seconds_sum {sum}");
        let _ = writeln!(out, "claimcheck_webhook_ack_seconds_count {count}");
        out
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
        let text = metrics.render();
        assert!(text.contains("claimcheck_webhook_deliveries_total{outcome=\"claimed\"} 1\n"));
        assert!(
            text.contains("claimcheck_webhook_deliveries_total{outcome=\"bad_signature\"} 1\n")
        );
        assert!(text.contains("claimcheck_webhook_ack_seconds_bucket{le=\"0.001\"} 1\n"));
        assert!(text.contains("claimcheck_webhook_ack_seconds_bucket{le=\"0.05\"} 2\n"));
        assert!(text.contains("claimcheck_webhook_ack_seconds_count 2\n"));
    }
}
