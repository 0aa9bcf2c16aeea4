//! Histograms and the percentile records every output shares (docs/metrics.md).
//!
//! Everything is recorded in microseconds in an HdrHistogram, so memory does not grow with the
//! length of a run, and histograms of several processes can be pooled exactly by adding them.

pub mod exact;

use anyhow::{Context, Result};
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The largest value a histogram holds: one hour in microseconds (larger values saturate).
const MAX_US: u64 = 3_600_000_000;

/// A histogram of durations in microseconds.
#[derive(Debug, Clone)]
pub struct DurationHistogram {
    hist: Histogram<u64>,
}

impl Default for DurationHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl DurationHistogram {
    pub fn new() -> Self {
        // Three significant digits: 1 µs resolution up to 1 ms, 0.1 % above.
        let hist = Histogram::new_with_bounds(1, MAX_US, 3).unwrap_or_else(|_| {
            // The bounds above are constants that hdrhistogram accepts; this is unreachable.
            Histogram::new(3).unwrap_or_else(|_| unreachable!("hdrhistogram rejects sigfig 3"))
        });
        DurationHistogram { hist }
    }

    /// Records a duration given in microseconds (negative values count as zero).
    pub fn record_us(&mut self, us: i64) {
        let us = us.clamp(0, MAX_US as i64) as u64;
        self.hist.saturating_record(us);
    }

    /// Records a duration given in seconds.
    pub fn record_s(&mut self, seconds: f64) {
        self.record_us((seconds * 1e6).round() as i64);
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn max_us(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }

    /// The value at quantile `q` (0..=1) in milliseconds; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        round3(self.hist.value_at_quantile(q) as f64 / 1000.0)
    }

    pub fn max_ms(&self) -> f64 {
        round3(self.max_us() as f64 / 1000.0)
    }

    /// Adds every value of `other` (pooling across sessions and processes).
    pub fn add(&mut self, other: &DurationHistogram) {
        // Both histograms share the same bounds, so this cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    pub fn full(&self) -> FullPercentiles {
        FullPercentiles {
            p50: self.quantile_ms(0.50),
            p90: self.quantile_ms(0.90),
            p99: self.quantile_ms(0.99),
            p999: self.quantile_ms(0.999),
            max: self.max_ms(),
        }
    }

    pub fn short(&self) -> ShortPercentiles {
        ShortPercentiles {
            p50: self.quantile_ms(0.50),
            p99: self.quantile_ms(0.99),
            max: self.max_ms(),
        }
    }

    /// HdrHistogram V2 encoding in base64, the form histograms take in result files.
    pub fn to_base64(&self) -> Result<String> {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&self.hist, &mut bytes)
            .map_err(|e| anyhow::anyhow!("cannot encode histogram: {e:?}"))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn from_base64(text: &str) -> Result<Self> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .context("histogram is not valid base64")?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| anyhow::anyhow!("cannot decode histogram: {e:?}"))?;
        let mut hist = DurationHistogram::new();
        hist.hist
            .add(&decoded)
            .map_err(|e| anyhow::anyhow!("histogram out of range: {e:?}"))?;
        Ok(hist)
    }
}

/// A histogram of durations that may be negative (Fun-ASR's response lag is, by a chunk, when
/// the server keeps up): the magnitudes below zero in a histogram of their own, so both sides
/// keep the relative resolution a single offset histogram would lose. The second histogram is
/// made with the first value below zero: figures that cannot be negative do not carry it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SignedHistogram {
    pub at_or_above_zero: DurationHistogram,
    /// |value| of the values below zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_zero: Option<DurationHistogram>,
}

impl SignedHistogram {
    /// Records a value given in microseconds.
    pub fn record_us(&mut self, us: i64) {
        if us < 0 {
            self.below_zero
                .get_or_insert_with(DurationHistogram::new)
                .record_us(us.saturating_neg());
        } else {
            self.at_or_above_zero.record_us(us);
        }
    }

    /// Records a value given in seconds.
    pub fn record_s(&mut self, seconds: f64) {
        self.record_us((seconds * 1e6).round() as i64);
    }

    /// A histogram of non-negative values, as a signed one.
    pub fn of(h: &DurationHistogram) -> SignedHistogram {
        SignedHistogram {
            at_or_above_zero: h.clone(),
            below_zero: None,
        }
    }

    fn below_count(&self) -> u64 {
        self.below_zero.as_ref().map_or(0, DurationHistogram::count)
    }

    pub fn count(&self) -> u64 {
        self.at_or_above_zero.count() + self.below_count()
    }

    /// The value at quantile `q` (0..=1) in milliseconds; 0 when empty. The values below zero
    /// come first, largest magnitude first.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let below = self.below_count();
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        // The rank HdrHistogram would take over all the values, then on the side it falls on.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        match &self.below_zero {
            Some(below_zero) if rank <= below => {
                // Half a rank below the one wanted, so rounding cannot tip it to the next.
                let q_below = ((below - rank) as f64 + 0.5) / below as f64;
                -below_zero.quantile_ms(q_below)
            }
            _ => {
                let above = self.at_or_above_zero.count();
                self.at_or_above_zero
                    .quantile_ms(((rank - below) as f64 - 0.5) / above as f64)
            }
        }
    }

    /// The `q` quantile as numpy's default (and sglang-omni's `distribution()`) takes it: the
    /// values of ranks ⌊(n − 1) q⌋ and ⌈(n − 1) q⌉, linearly interpolated, each as the
    /// histogram holds it. A median between two clusters of values (MiniCPM-o's unit lags, 40 ms
    /// apart) falls between them, not on one (the QA pass of 2026-12-07: 73 ms against their 92).
    pub fn interpolated_ms(&self, q: f64) -> f64 {
        let n = self.count();
        if n == 0 {
            return 0.0;
        }
        let at = q.clamp(0.0, 1.0) * (n - 1) as f64;
        let (lo, hi) = (at.floor() as u64, at.ceil() as u64);
        // The value of 0-based rank k: the quantile whose rank HdrHistogram rounds up to k + 1.
        let value = |k: u64| self.quantile_ms((k as f64 + 0.5) / n as f64);
        let low = value(lo);
        if hi == lo {
            return low;
        }
        round3(low + (value(hi) - low) * (at - lo as f64))
    }

    /// The largest value in milliseconds (negative when all are); 0 when empty.
    pub fn max_ms(&self) -> f64 {
        match &self.below_zero {
            _ if self.at_or_above_zero.count() > 0 => self.at_or_above_zero.max_ms(),
            Some(below_zero) => -below_zero.quantile_ms(0.0),
            None => 0.0,
        }
    }

    pub fn add(&mut self, other: &SignedHistogram) {
        self.at_or_above_zero.add(&other.at_or_above_zero);
        if let Some(theirs) = &other.below_zero {
            self.below_zero
                .get_or_insert_with(DurationHistogram::new)
                .add(theirs);
        }
    }
}

/// Serde support: a histogram travels as its base64 V2 encoding.
impl Serialize for DurationHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let text = self.to_base64().map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for DurationHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        DurationHistogram::from_base64(&text).map_err(serde::de::Error::custom)
    }
}

fn round3(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// p50/p90/p99/p99.9/max in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FullPercentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl FullPercentiles {
    /// The same with `max_ms`, the exact maximum, in place of the top of its histogram bucket:
    /// a percentile reads the top of its bucket too, which lies above the exact maximum when
    /// the largest values share its bucket (p99.9 200.319 beside a max of 200.212), so each is
    /// capped at the maximum — no value lies above it.
    pub fn with_exact_max(self, max_ms: f64) -> FullPercentiles {
        FullPercentiles {
            p50: self.p50.min(max_ms),
            p90: self.p90.min(max_ms),
            p99: self.p99.min(max_ms),
            p999: self.p999.min(max_ms),
            max: max_ms,
        }
    }
}

/// p50/p99/max in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShortPercentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// A level's figure over its repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// Min, median (the middle one, or the mean of the two middle ones) and max; `None`
    /// without values.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            min: v[0],
            median,
            max: v[n - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interpolated_percentile_falls_between_ranks_as_numpys() {
        // MiniCPM-o's unit lags: two clusters 40 ms apart, half in each.
        let mut h = SignedHistogram::default();
        for k in 0..40 {
            h.record_us(if k % 2 == 0 { 73_000 } else { 113_000 });
        }
        // (Within the histogram's precision: 3 significant digits.)
        let median = h.interpolated_ms(0.5);
        assert!((median - 93.0).abs() < 0.1, "{median}");
        assert!((h.quantile_ms(0.5) - 73.0).abs() < 0.1, "the nearest rank");
        // numpy.percentile([1, 2, 3, 4], q): 2.5 at 50, 3.25 at 75, 4 at 100, 1 at 0.
        let mut h = SignedHistogram::default();
        for ms in [4, 1, 3, 2] {
            h.record_us(ms * 1000);
        }
        let near = |q: f64, want: f64| {
            let got = h.interpolated_ms(q);
            assert!((got - want).abs() <= 0.002, "at {q}: {got} for {want}");
        };
        near(0.5, 2.5);
        near(0.75, 3.25);
        near(1.0, 4.0);
        near(0.0, 1.0);
        // Across zero: -2, -1, 1, 2 ms.
        let mut h = SignedHistogram::default();
        for us in [-2000, -1000, 1000, 2000] {
            h.record_us(us);
        }
        assert_eq!(h.interpolated_ms(0.5), 0.0);
        assert_eq!(h.interpolated_ms(0.0), -2.0);
        assert_eq!(SignedHistogram::default().interpolated_ms(0.5), 0.0);
    }

    #[test]
    fn no_percentile_lies_above_the_exact_maximum() {
        // 200,212 µs falls in a bucket 128 µs wide whose top is 200,319: the histogram's
        // p99.9 (and max) read 200.319 where the largest value recorded was 200.212.
        let mut h = DurationHistogram::new();
        for us in [1_000, 2_000, 200_150, 200_212] {
            h.record_us(us);
        }
        let raw = h.full();
        assert!(raw.p999 > 200.212, "{raw:?}");
        let p = raw.with_exact_max(200.212);
        assert_eq!((p.p999, p.max), (200.212, 200.212));
        assert_eq!(p.p50, raw.p50, "percentiles below the maximum are kept");
    }

    #[test]
    fn percentiles_are_in_milliseconds() {
        let mut h = DurationHistogram::new();
        for ms in 1..=100 {
            h.record_s(ms as f64 / 1000.0);
        }
        let p = h.full();
        assert!((p.p50 - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.max - 100.0).abs() < 0.1, "{p:?}");
    }

    #[test]
    fn histograms_survive_base64_and_pool_exactly() {
        let mut a = DurationHistogram::new();
        a.record_us(1_000);
        let mut b = DurationHistogram::new();
        b.record_us(150_000);
        let mut pooled = DurationHistogram::from_base64(&a.to_base64().unwrap()).unwrap();
        pooled.add(&b);
        assert_eq!(pooled.count(), 2);
        assert!((pooled.max_ms() - 150.0).abs() < 0.2);
    }

    #[test]
    fn a_signed_histogram_orders_values_below_zero_first_issue_11() {
        let mut h = SignedHistogram::default();
        for ms in -50..=49 {
            h.record_us(ms * 1000);
        }
        assert_eq!(h.count(), 100);
        assert!(
            (h.quantile_ms(0.0) + 50.0).abs() < 0.1,
            "{}",
            h.quantile_ms(0.0)
        );
        assert!(
            (h.quantile_ms(0.25) + 26.0).abs() < 0.1,
            "{}",
            h.quantile_ms(0.25)
        );
        assert!(
            (h.quantile_ms(0.5) + 1.0).abs() < 0.1,
            "{}",
            h.quantile_ms(0.5)
        );
        assert!(
            (h.quantile_ms(0.95) - 44.0).abs() < 0.1,
            "{}",
            h.quantile_ms(0.95)
        );
        assert!((h.max_ms() - 49.0).abs() < 0.1);
        let mut negative = SignedHistogram::default();
        negative.record_us(-20_000);
        negative.record_us(-10_000);
        assert!((negative.max_ms() + 10.0).abs() < 0.1);
        assert!((negative.quantile_ms(0.5) + 20.0).abs() < 0.1);
        assert_eq!(SignedHistogram::default().quantile_ms(0.5), 0.0);
    }

    #[test]
    fn empty_histogram_reports_zero() {
        let h = DurationHistogram::new();
        assert_eq!(h.full(), FullPercentiles::default());
    }
}
