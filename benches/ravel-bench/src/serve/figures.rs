//! The figures of a run, derived from its series: each file's landing-to-visible latency, the
//! write amplification, the depth against its bound, the processes' memory and CPU.

use super::record::{Figures, FileRecord, ProcessRecord, Sample};

/// Sets each file's visible time and latency from the polled row counts.
///
/// The service loads pending files oldest first and every file holds `file_rows` rows, so
/// file k (0-based, in arrival order) counts as visible at the first poll at or after its
/// landing where the table holds at least `base_rows + (k + 1) × file_rows` rows. This is an
/// approximation: it is exact when batches are cut oldest first (the service's order) and is
/// late by at most the time between two polls (plus the status's own refresh, which follows
/// each load); a file loaded while the status could not be read (a killed service) counts at
/// the next poll that answered.
pub fn visibility(files: &mut [FileRecord], samples: &[Sample], base_rows: u64, file_rows: u64) {
    for f in files.iter_mut() {
        let needed = base_rows + (u64::from(f.index) + 1) * file_rows;
        let seen = samples
            .iter()
            .find(|s| s.t_s >= f.landed_s && s.rows >= needed);
        f.visible_s = seen.map(|s| s.t_s);
        f.latency_s = seen.map(|s| s.t_s - f.landed_s);
    }
}

/// The nearest-rank `q` quantile of `sorted` (ascending).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The polls right after a merge, those among them over the bound, and every poll over it.
struct DepthChecks {
    after_merge: usize,
    after_merge_over: usize,
    over: usize,
}

fn over_bound(s: &Sample) -> bool {
    s.depth_bound.is_some_and(|b| s.depth > b)
}

fn depth_checks(samples: &[Sample]) -> DepthChecks {
    let mut c = DepthChecks {
        after_merge: 0,
        after_merge_over: 0,
        over: samples.iter().filter(|s| over_bound(s)).count(),
    };
    for w in samples.windows(2) {
        // A restarted process counts its merges from 0 again.
        if w[0].process == w[1].process && w[1].merges > w[0].merges {
            c.after_merge += 1;
            c.after_merge_over += usize::from(over_bound(&w[1]));
        }
    }
    c
}

/// The figures of `files` (latencies set), `samples` and `processes`; `settle_s` as measured.
pub fn figures(
    files: &[FileRecord],
    samples: &[Sample],
    processes: &[ProcessRecord],
    settle_s: f64,
) -> Figures {
    let mut latencies: Vec<f64> = files.iter().filter_map(|f| f.latency_s).collect();
    latencies.sort_by(f64::total_cmp);
    let arrived_bytes = files.iter().map(|f| f.bytes).sum::<u64>();
    let merge_written_bytes = processes.iter().map(|p| p.merge_written_bytes).sum::<u64>();
    let latency_count = processes.iter().map(|p| p.latency_count).sum::<u64>();
    let latency_sum = processes.iter().map(|p| p.latency_sum_s).sum::<f64>();
    let depth = depth_checks(samples);
    Figures {
        arrived_bytes,
        merge_written_bytes,
        write_amplification: merge_written_bytes as f64 / arrived_bytes.max(1) as f64,
        files_loaded: processes.iter().map(|p| p.files_loaded).sum(),
        latency_p50_s: quantile(&latencies, 0.5),
        latency_p99_s: quantile(&latencies, 0.99),
        latency_max_s: latencies.last().copied(),
        service_latency_mean_s: (latency_count > 0).then(|| latency_sum / latency_count as f64),
        max_depth: samples.iter().map(|s| s.depth).max().unwrap_or(0),
        polls_after_merge: depth.after_merge,
        polls_after_merge_over_bound: depth.after_merge_over,
        polls_over_bound: depth.over,
        peak_rss_mb: processes.iter().map(|p| p.peak_rss_mb).fold(0.0, f64::max),
        cpu_s: processes.iter().map(|p| p.cpu_s).sum(),
        settle_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, process: usize, rows: u64, depth: u64, merges: u64) -> Sample {
        Sample {
            t_s,
            process,
            rows,
            objects: 1,
            depth,
            depth_bound: Some(4),
            pending_files: 0,
            loads: 0,
            merges,
            failures: 0,
            next_action: "nothing".into(),
        }
    }

    fn file(index: u32, landed_s: f64) -> FileRecord {
        FileRecord {
            index,
            bytes: 100,
            landed_s,
            visible_s: None,
            latency_s: None,
        }
    }

    #[test]
    fn latencies_from_row_counts_and_depth_after_merges() {
        let samples = vec![
            sample(0.5, 0, 1000, 1, 0),
            sample(3.0, 0, 1010, 5, 0),
            sample(3.5, 0, 1010, 2, 1),
            sample(6.0, 1, 1020, 5, 0),
            sample(6.5, 1, 1030, 5, 1),
        ];
        let mut files = vec![file(0, 1.0), file(1, 2.0), file(2, 2.5)];
        visibility(&mut files, &samples, 1000, 10);
        let lat: Vec<Option<f64>> = files.iter().map(|f| f.latency_s).collect();
        assert_eq!(lat, [Some(2.0), Some(4.0), Some(4.0)]);
        let c = depth_checks(&samples);
        assert_eq!((c.after_merge, c.after_merge_over, c.over), (2, 1, 3));
        let f = figures(&files, &samples, &[], 1.0);
        assert_eq!((f.latency_p50_s, f.latency_max_s), (Some(4.0), Some(4.0)));
        assert_eq!(f.arrived_bytes, 300);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[3.0], 0.99), Some(3.0));
    }
}
