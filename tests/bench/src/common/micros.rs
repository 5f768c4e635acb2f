//! Percentiles of timings in microseconds, as every latency benchmark prints them.

/// The `p`th percentile (nearest rank) of `sorted`, which is sorted and not empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The p50 and p99 of `micros` (not empty).
pub fn summary(mut micros: Vec<f64>) -> (f64, f64) {
    micros.sort_by(f64::total_cmp);
    (percentile(&micros, 50.0), percentile(&micros, 99.0))
}
