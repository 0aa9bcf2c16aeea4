//! Exact statistics over a handful of values, computed as Fun-ASR's `realtime_ws_benchmark.py`
//! computes them (Python's `statistics.median`, its own interpolating percentile, `round`), so
//! that figures reported under the benchmark's names match its to the last digit.

/// The value at `pct` percent: linear interpolation at `(n − 1) × pct / 100` of the sorted
/// values (the benchmark's `percentile`); `None` when there are none.
pub fn percentile(values: &[f64], pct: f64) -> Option<f64> {
    let mut ordered = values.to_vec();
    ordered.sort_by(f64::total_cmp);
    match ordered.len() {
        0 => None,
        1 => Some(ordered[0]),
        n => {
            let index = (n - 1) as f64 * pct / 100.0;
            let lower = index as usize;
            let upper = (lower + 1).min(n - 1);
            let weight = index - lower as f64;
            Some(ordered[lower] * (1.0 - weight) + ordered[upper] * weight)
        }
    }
}

/// The median: the middle value, or the mean of the two middle ones (`statistics.median`).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut ordered = values.to_vec();
    ordered.sort_by(f64::total_cmp);
    let n = ordered.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(ordered[n / 2]),
        _ => Some((ordered[n / 2 - 1] + ordered[n / 2]) / 2.0),
    }
}

/// `round(value, digits)` as Python does it: to the nearest decimal of the exact binary value.
pub fn round_to(value: f64, digits: usize) -> f64 {
    if !value.is_finite() {
        return value;
    }
    // Rust formats the exact decimal expansion, rounded correctly; reading it back gives the
    // nearest double, which is what Python's `round` returns.
    format!("{value:.digits$}").parse().unwrap_or(value)
}

/// A float as Python's `str` shows it in a message (`30.0`, `2.5`).
pub fn python_float(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e16 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_interpolates_at_n_minus_one_times_095_issue_11() {
        // n = 5: index 3.8 → 40 × 0.2 + 50 × 0.8 = 48.
        let v = [50.0, 10.0, 30.0, 20.0, 40.0];
        assert!((percentile(&v, 95.0).unwrap() - 48.0).abs() < 1e-9);
        assert_eq!(percentile(&[7.0], 95.0), Some(7.0));
        assert_eq!(percentile(&[], 95.0), None);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two_issue_11() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    }

    #[test]
    fn rounding_is_pythons_issue_11() {
        assert_eq!(round_to(462.04999, 1), 462.0);
        assert_eq!(round_to(2.675, 2), 2.67, "2.675 is 2.67499… in binary");
        assert_eq!(round_to(-0.06, 1), -0.1);
        assert_eq!(python_float(30.0), "30.0");
        assert_eq!(python_float(2.5), "2.5");
    }
}
