//! `ravel-bench compare`: one row per step and figure, one column per result, the change from
//! the first result in percent, flagged when it is outside the noise band.
//!
//! The noise band of a figure is estimated from repeated measurements of one build: the runs of
//! a file (`--repeat`), pooled with those of other files of the same build, flags and machine.
//! It is the largest spread (max − min, over the median) seen among such repeats; builds
//! labelled `-dirty` or `unknown` are not pooled across files. `--noise`
//! replaces the estimate; without either, nothing is flagged, and the table says so.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::result::{BenchResult, higher_is_better, median};

type Key = (String, String);

/// The noise band in percent of each (step, figure) that some build measured at least twice.
pub fn estimate_noise(results: &[BenchResult]) -> BTreeMap<Key, f64> {
    let mut groups: BTreeMap<String, BTreeMap<Key, Vec<f64>>> = BTreeMap::new();
    for (i, r) in results.iter().enumerate() {
        // A build named by a clean commit is the same code wherever it appears; a dirty or
        // unknown one may not be, so its runs count only among themselves.
        let commit = &r.build.commit;
        let same_code = commit != "unknown" && !commit.ends_with("-dirty");
        let group = format!(
            "{}|{}|{}|{}",
            if same_code {
                String::new()
            } else {
                i.to_string()
            },
            r.build.commit,
            serde_json::to_string(&r.flags).unwrap_or_default(),
            r.machine.hostname
        );
        let g = groups.entry(group).or_default();
        for (k, v) in r.samples() {
            g.entry(k).or_default().extend(v);
        }
    }
    let mut noise: BTreeMap<Key, f64> = BTreeMap::new();
    for g in groups.values() {
        for (k, v) in g {
            if v.len() < 2 {
                continue;
            }
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                    (lo.min(x), hi.max(x))
                });
            let m = median(v).abs();
            let spread = if m > 0.0 {
                (hi - lo) / m * 100.0
            } else if hi == lo {
                0.0
            } else {
                f64::INFINITY
            };
            let e = noise.entry(k.clone()).or_insert(spread);
            *e = e.max(spread);
        }
    }
    noise
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The comparison table of `results` (labelled), the first being the base.
pub fn table(results: &[(String, BenchResult)], noise_flag: Option<f64>) -> String {
    let mut out = String::new();
    for (i, (label, r)) in results.iter().enumerate() {
        let _ = writeln!(
            out,
            "[{i}] {label}: {} · {} rows, seed {} · {} run(s) · {} · {}",
            r.build.version,
            r.flags.rows,
            r.flags.seed,
            r.runs.len(),
            r.machine.hostname,
            r.started
        );
    }
    let plain: Vec<BenchResult> = results.iter().map(|(_, r)| r.clone()).collect();
    let estimated = estimate_noise(&plain);
    match noise_flag {
        Some(p) => {
            let _ = writeln!(out, "noise band: {p}% (--noise)");
        }
        None if estimated.is_empty() => {
            let _ = writeln!(
                out,
                "noise band: unknown (no figure was measured twice by one build; run with \
                 --repeat or pass --noise): nothing is flagged"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "noise band: per figure, the largest spread among repeated runs of one build"
            );
        }
    }
    let _ = writeln!(
        out,
        "* = change outside the noise band (better/worse by the figure's direction)"
    );

    // Rows in order of first appearance.
    let mut keys: Vec<Key> = Vec::new();
    let medians: Vec<BTreeMap<Key, f64>> = results
        .iter()
        .map(|(_, r)| {
            r.samples()
                .into_iter()
                .map(|(k, v)| {
                    if !keys.contains(&k) {
                        keys.push(k.clone());
                    }
                    (k, median(&v))
                })
                .collect()
        })
        .collect();
    let mut header = format!("{:<18} {:<16}", "step", "figure");
    for i in 0..results.len() {
        let _ = write!(header, " {:>24}", format!("[{i}]"));
    }
    let _ = write!(header, " {:>8}", "noise");
    let _ = writeln!(out, "{header}");
    for k in &keys {
        let band = noise_flag.or_else(|| estimated.get(k).copied());
        let _ = write!(out, "{:<18} {:<16}", k.0, k.1);
        let base = medians[0].get(k).copied();
        for (i, m) in medians.iter().enumerate() {
            let cell = match (m.get(k), base) {
                (None, _) => "-".to_string(),
                (Some(&v), _) if i == 0 => fmt_value(v),
                (Some(&v), Some(b)) if b != 0.0 => {
                    let pct = (v - b) / b.abs() * 100.0;
                    let flag = match band {
                        Some(n) if pct.abs() > n => {
                            let better = (pct > 0.0) == higher_is_better(&k.1);
                            if better { " *better" } else { " *worse" }
                        }
                        _ => "",
                    };
                    format!("{} {pct:+.1}%{flag}", fmt_value(v))
                }
                (Some(&v), _) if v == 0.0 => fmt_value(v),
                // From zero (e.g. failed statements): no percent, but a change all the same.
                (Some(&v), _) => format!("{} (was 0) *changed", fmt_value(v)),
            };
            let _ = write!(out, " {cell:>24}");
        }
        let band = band.map_or("-".to_string(), |n| format!("{n:.1}%"));
        let _ = writeln!(out, " {band:>8}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Build, FORMAT, Flags, Machine, Run, Step};

    fn result(commit: &str, walls: &[f64], bytes: f64) -> BenchResult {
        BenchResult {
            format: FORMAT.into(),
            started: "2026-11-30T00:00:00Z".into(),
            build: Build {
                bin: "ravel-load".into(),
                version: format!("ravel-load 0.1.0 ({commit})"),
                commit: commit.into(),
            },
            machine: Machine {
                cores: 2,
                mem_total_kb: 1,
                cpu_model: "cpu".into(),
                kernel: "k".into(),
                hostname: "h".into(),
            },
            flags: Flags {
                rows: 10,
                seed: 1,
                steps: vec!["load".into()],
                peers: vec![],
                load_args: vec![],
                queries: "q.sql".into(),
            },
            prep: BTreeMap::new(),
            runs: walls
                .iter()
                .map(|&w| Run {
                    steps: vec![Step {
                        name: "load".into(),
                        figures: BTreeMap::from([
                            ("wall_s".into(), w),
                            ("rows_per_s".into(), 100.0 / w),
                            ("stored_bytes".into(), bytes),
                        ]),
                        ..Step::default()
                    }],
                })
                .collect(),
        }
    }

    #[test]
    fn noise_is_the_spread_of_repeated_runs_of_one_build() {
        let a = result("aaa", &[10.0, 11.0, 9.0], 500.0);
        let b = result("bbb", &[10.5], 500.0);
        let n = estimate_noise(&[a, b]);
        let k = |f: &str| ("load".to_string(), f.to_string());
        // (11 − 9) / 10: 20 %; one run of bbb estimates nothing; bytes never varied.
        assert!((n[&k("wall_s")] - 20.0).abs() < 1e-9);
        assert_eq!(n[&k("stored_bytes")], 0.0);
    }

    #[test]
    fn flags_only_changes_outside_the_band() {
        let base = result("aaa", &[10.0, 11.0, 9.0], 500.0);
        // 5 % slower: inside the 20 % band. 10 % more bytes: outside a band of 0.
        let inside = result("bbb", &[10.5], 550.0);
        let t = table(&[("a".into(), base.clone()), ("b".into(), inside)], None);
        let line = |t: &str, f: &str| {
            t.lines()
                .find(|l| l.starts_with("load") && l.contains(f))
                .unwrap()
                .to_string()
        };
        assert!(line(&t, "wall_s").contains("+5.0%"), "{t}");
        assert!(!line(&t, "wall_s").contains('*'), "{t}");
        assert!(line(&t, "stored_bytes").contains("+10.0% *worse"), "{t}");

        // 50 % slower is outside; throughput down is worse too; a given --noise replaces it.
        let slow = result("ccc", &[15.0], 500.0);
        let t = table(
            &[("a".into(), base.clone()), ("c".into(), slow.clone())],
            None,
        );
        assert!(line(&t, "wall_s").contains("+50.0% *worse"), "{t}");
        assert!(line(&t, "rows_per_s").contains("*worse"), "{t}");
        let t = table(&[("a".into(), base), ("c".into(), slow)], Some(60.0));
        assert!(!line(&t, "wall_s").contains('*'), "{t}");
    }

    #[test]
    fn without_repeats_or_noise_nothing_is_flagged_and_the_table_says_so() {
        let t = table(
            &[
                ("a".into(), result("aaa", &[10.0], 500.0)),
                ("b".into(), result("bbb", &[20.0], 900.0)),
            ],
            None,
        );
        assert!(t.contains("noise band: unknown"), "{t}");
        assert!(!t.contains("*worse") && !t.contains("*better"), "{t}");
    }
}
