//! `ravel-bench ab`: two builds run interleaved (A B A B …) on the same data; per step and
//! figure, the ratios B/A of each round with their min, median and max. On a shared machine
//! only ratios taken side by side, in one command, are trustworthy.

use std::fmt::Write;

use serde::Serialize;

use crate::result::{Run, median};

#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub step: String,
    pub figure: String,
    pub a_median: f64,
    pub b_median: f64,
    /// B/A of each round.
    pub ratios: Vec<f64>,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// Ratios B/A of round `i` (A's run `i` against B's run `i`), for every (step, figure) both
/// measured in every round with A's value not zero.
pub fn ratios(a: &[Run], b: &[Run]) -> Vec<Ratio> {
    let mut out: Vec<Ratio> = Vec::new();
    let rounds = a.len().min(b.len());
    let Some(first) = a.first() else {
        return out;
    };
    for step in &first.steps {
        for figure in step.figures.keys() {
            let get = |runs: &[Run], i: usize| {
                runs[i]
                    .steps
                    .iter()
                    .find(|s| s.name == step.name)
                    .and_then(|s| s.figures.get(figure).copied())
            };
            let pairs: Option<Vec<(f64, f64)>> = (0..rounds)
                .map(|i| get(a, i).zip(get(b, i)).filter(|(x, _)| *x != 0.0))
                .collect();
            let Some(pairs) = pairs.filter(|p| !p.is_empty()) else {
                continue;
            };
            let rs: Vec<f64> = pairs.iter().map(|(x, y)| y / x).collect();
            let av: Vec<f64> = pairs.iter().map(|p| p.0).collect();
            let bv: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            out.push(Ratio {
                step: step.name.clone(),
                figure: figure.clone(),
                a_median: median(&av),
                b_median: median(&bv),
                min: rs.iter().copied().fold(f64::INFINITY, f64::min),
                max: rs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                median: median(&rs),
                ratios: rs,
            });
        }
    }
    out
}

pub fn table(ratios: &[Ratio], rounds: usize) -> String {
    let mut out = format!(
        "{:<18} {:<16} {:>14} {:>14} {:>8} {:>8} {:>8}   (B/A over {rounds} rounds)\n",
        "step", "figure", "A median", "B median", "min", "median", "max"
    );
    for r in ratios {
        let _ = writeln!(
            out,
            "{:<18} {:<16} {:>14.3} {:>14.3} {:>8.3} {:>8.3} {:>8.3}",
            r.step, r.figure, r.a_median, r.b_median, r.min, r.median, r.max
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Step;
    use std::collections::BTreeMap;

    fn run(wall: f64) -> Run {
        Run {
            steps: vec![Step {
                name: "load".into(),
                figures: BTreeMap::from([("wall_s".into(), wall), ("zero".into(), 0.0)]),
                ..Step::default()
            }],
        }
    }

    #[test]
    fn ratios_pair_rounds_and_skip_zero_bases() {
        let a = [run(10.0), run(20.0), run(10.0)];
        let b = [run(11.0), run(20.0), run(8.0)];
        let r = ratios(&a, &b);
        assert_eq!(r.len(), 1, "{r:?}"); // `zero` has no ratio
        let w = &r[0];
        assert_eq!(w.ratios, vec![1.1, 1.0, 0.8]);
        assert_eq!((w.min, w.median, w.max), (0.8, 1.0, 1.1));
        assert_eq!((w.a_median, w.b_median), (10.0, 11.0));
    }
}
