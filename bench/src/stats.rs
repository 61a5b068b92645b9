//! Medians, percentiles and the Markdown the harness prints.

use std::time::Duration;

/// Durations of repeated runs of one thing.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn push(&mut self, sample: Duration) {
        self.0.push(sample);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The sample below which `fraction` of the samples lie (nearest rank).
    pub fn percentile(&self, fraction: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    pub fn median(&self) -> Duration {
        self.percentile(0.5)
    }
}

impl IntoIterator for Samples {
    type Item = Duration;
    type IntoIter = std::vec::IntoIter<Duration>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl Extend<Duration> for Samples {
    fn extend<I: IntoIterator<Item = Duration>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

pub fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

pub fn micros(duration: Duration) -> String {
    format!("{:.0} µs", duration.as_secs_f64() * 1e6)
}

pub fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub fn ratio(value: f64, baseline: f64) -> String {
    if baseline == 0.0 {
        return "n/a".into();
    }
    format!("{:.2}×", value / baseline)
}

/// A Markdown table: a header row and rows of cells.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out =
        format!("| {} |\n|{}|\n", header.join(" | "), header.iter().map(|_| "---").collect::<Vec<_>>().join("|"));
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut samples = Samples::default();
        samples.extend((1..=100).map(Duration::from_millis));
        assert_eq!(samples.median(), Duration::from_millis(50));
        assert_eq!(samples.percentile(0.99), Duration::from_millis(99));
        assert_eq!(samples.percentile(1.0), Duration::from_millis(100));
        assert_eq!(Samples::default().median(), Duration::ZERO);
    }

    #[test]
    fn ratios_guard_against_a_zero_baseline() {
        assert_eq!(ratio(3.0, 2.0), "1.50×");
        assert_eq!(ratio(1.0, 0.0), "n/a");
    }
}
