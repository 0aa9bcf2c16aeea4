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

/// p50/p99/max in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShortPercentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn empty_histogram_reports_zero() {
        let h = DurationHistogram::new();
        assert_eq!(h.full(), FullPercentiles::default());
    }
}
