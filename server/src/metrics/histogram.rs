//! A latency histogram of atomics: two relaxed increments per observation, no lock, and its
//! buckets readable in the process (the overview's acknowledgement percentiles read them).
//! prometheus-client encodes it like its own histogram.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

#[derive(Debug, Clone)]
pub(crate) struct Histogram(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// Upper bounds in seconds, ascending; `+Inf` is implied.
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative), the `+Inf` one last.
    buckets: Box<[AtomicU64]>,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub(crate) fn new(bounds: &'static [f64]) -> Histogram {
        debug_assert!(bounds.windows(2).all(|pair| pair[0] < pair[1]));
        Histogram(Arc::new(Inner {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }))
    }

    pub(crate) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = self.0.bounds.partition_point(|bound| *bound < seconds);
        self.0.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.0.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Each bucket's upper bound and its own count (`+Inf` last).
    fn buckets(&self) -> Vec<(f64, u64)> {
        self.0
            .bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.0.buckets.iter())
            .map(|(bound, count)| (bound, count.load(Ordering::Relaxed)))
            .collect()
    }

    /// The upper bound (in seconds) of the bucket holding quantile `q`, and how many
    /// observations there were; `None` before the first.
    pub(crate) fn quantile(&self, q: f64) -> Option<(f64, u64)> {
        let buckets = self.buckets();
        let count: u64 = buckets.iter().map(|(_, n)| n).sum();
        if count == 0 {
            return None;
        }
        let wanted = (q * count as f64).ceil() as u64;
        let mut seen = 0;
        let bound = buckets
            .iter()
            .find(|(_, n)| {
                seen += n;
                seen >= wanted
            })
            .map_or(f64::INFINITY, |(bound, _)| *bound);
        Some((bound, count))
    }
}

impl EncodeMetric for Histogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets = self.buckets();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.0.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: &[f64] = &[0.001, 0.01, 0.1];

    #[test]
    fn an_observation_lands_in_the_first_bucket_that_holds_it() {
        let histogram = Histogram::new(BOUNDS);
        histogram.observe(Duration::from_micros(1000));
        histogram.observe(Duration::from_millis(5));
        histogram.observe(Duration::from_secs(3));
        let counts: Vec<u64> = histogram.buckets().iter().map(|(_, n)| *n).collect();
        assert_eq!(counts, [1, 1, 0, 1]);
    }

    #[test]
    fn quantiles_name_the_bucket_bound() {
        let histogram = Histogram::new(BOUNDS);
        assert_eq!(histogram.quantile(0.5), None);
        for _ in 0..9 {
            histogram.observe(Duration::from_micros(500));
        }
        histogram.observe(Duration::from_millis(50));
        assert_eq!(histogram.quantile(0.5), Some((0.001, 10)));
        assert_eq!(histogram.quantile(0.99), Some((0.1, 10)));
    }
}
