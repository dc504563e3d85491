//! Latency samples and their percentiles.

use std::time::Duration;

/// Latency samples, kept in nanoseconds and reported in microseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<u64>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_nanos() as u64);
    }

    /// Adds samples given in nanoseconds.
    pub fn extend_ns(&mut self, other: impl IntoIterator<Item = u64>) {
        self.0.extend(other);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The mean in microseconds; 0 when empty.
    pub fn mean_us(&self) -> f64 {
        match self.0.len() {
            0 => 0.0,
            n => self.0.iter().map(|&ns| ns as f64).sum::<f64>() / n as f64 / 1000.0,
        }
    }

    /// The `p`th percentile (0–100) in microseconds, nearest rank; 0 when empty.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
    }
}

/// `part / whole`, or 0 when `whole` is 0.
pub fn ratio(part: f64, whole: f64) -> f64 {
    if whole == 0.0 { 0.0 } else { part / whole }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut s = Samples::default();
        s.extend_ns((1..=100).map(|us| us * 1000));
        assert_eq!(s.percentile(50.0), 50.0);
        assert_eq!(s.percentile(99.0), 99.0);
        assert_eq!(Samples::default().percentile(50.0), 0.0);
        assert_eq!(s.mean_us(), 50.5);
        assert_eq!(Samples::default().mean_us(), 0.0);
    }
}
