//! The maintenance policy's decision: which runs to merge next, as a pure function of the
//! compaction plan (the version's overlapping groups of chains) and the table's policy. The
//! compaction executes it (see [`crate::maintain`]), as delta-rs's `optimize` separates its
//! merge plan from the merge.
//!
//! **Runs.** Within a group of overlapping objects, a *run* is every chain of one rank: a
//! load's runs, or a merge's output. Runs are kept in rank order (load order); a merge always
//! takes consecutive runs, so that rows of equal keys keep their load order (the output ranks
//! with the newest of its inputs).
//!
//! **Tiers.** `size_ratio` (T) consecutive runs whose bytes lie within a factor T of each other
//! (largest < T × smallest) are one tier's worth: they merge into one run, T times larger, one
//! tier up. The newest such window merges first.
//!
//! **Depth bound.** When more than `max_depth` (M) chains overlap after that, the consecutive
//! runs that cost the fewest bytes to merge are merged until M remain.
//!
//! **Trade-off.** Loads of b bytes into a table of B bytes: a byte is rewritten once per tier
//! it climbs, so the merge bytes written per byte loaded stay near `⌈log_T(B / b)⌉` while the
//! depth bound leaves tiers alone, and the overlap depth after maintenance is at most
//! `min(M, 1 + (T − 1) × ⌈log_T(B / b)⌉)` chains. A larger T writes less and reads more
//! objects per statement; a smaller M reads fewer and writes more.

use ravel_layout::{Maintenance, MaintenanceMode};

use crate::plan::{Chain, Plan, Step, Window};

/// What maintenance does next.
#[derive(Debug, Clone)]
pub struct Decision {
    /// The merge to run; `None`: nothing to do (`reason` says why).
    pub step: Option<Step>,
    /// Why nothing is to be done, or why the step was chosen.
    pub reason: String,
    /// The step leaves the table one sequence (its since-full totals start over).
    pub full: bool,
}

impl Decision {
    fn nothing(reason: impl Into<String>) -> Decision {
        Decision {
            step: None,
            reason: reason.into(),
            full: false,
        }
    }
}

/// The deepest overlap the policy allows after maintenance, in chains; `None`: no bound.
pub fn depth_bound(policy: &Maintenance) -> Option<usize> {
    match policy.policy {
        MaintenanceMode::Tiered => Some(policy.max_depth as usize),
        MaintenanceMode::Full => Some(1),
        MaintenanceMode::None => None,
    }
}

/// The next merge `policy` asks for on the version `plan` describes.
pub fn decide(plan: &Plan, policy: &Maintenance) -> Decision {
    let older = plan.steps.iter().flat_map(|s| &s.chains).any(|c| !c.sorted);
    if older && policy.policy == MaintenanceMode::Tiered {
        return Decision::nothing(
            "objects under an older layout: the depth bound holds again once `compact` sorts them into the current clustering order",
        );
    }
    match policy.policy {
        MaintenanceMode::None => Decision::nothing("the table's maintenance policy is none"),
        MaintenanceMode::Full => match plan.steps.first() {
            Some(s) => Decision {
                step: Some(s.clone()),
                reason: "the full policy merges every overlapping object".into(),
                full: plan.steps.len() == 1,
            },
            None => Decision::nothing("no two objects overlap"),
        },
        MaintenanceMode::Tiered => tiered(plan, policy),
    }
}

fn tiered(plan: &Plan, policy: &Maintenance) -> Decision {
    let ratio = policy.size_ratio as usize;
    let bound = policy.max_depth as usize;
    for group in &plan.steps {
        let runs = runs(group);
        let (window, reason) = match tier_window(&runs, ratio) {
            Some(w) => {
                let why = format!("{} runs of one tier (size ratio {ratio})", w.len());
                (w, why)
            }
            None => match bound_window(&runs, bound) {
                Some(w) => (w, format!("more than {bound} runs overlap (max depth)")),
                None => continue,
            },
        };
        let whole = window.len() == runs.len();
        return Decision {
            step: Some(Step {
                chains: runs[window].iter().flat_map(|r| r.chains.clone()).collect(),
                window: Window::default(),
            }),
            reason,
            full: whole && plan.steps.len() == 1,
        };
    }
    let depth = plan.depth_before;
    Decision::nothing(format!(
        "depth {depth}: no tier is full and no more than {bound} runs overlap"
    ))
}

/// The chains of one rank in a group.
#[derive(Debug, Clone)]
struct Run {
    order: u64,
    chains: Vec<Chain>,
    bytes: u64,
}

/// A group's chains as runs, in rank order.
fn runs(group: &Step) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for c in &group.chains {
        match out.last_mut() {
            Some(run) if run.order == c.order => {
                run.bytes += c.bytes();
                run.chains.push(c.clone());
            }
            _ => out.push(Run {
                order: c.order,
                chains: vec![c.clone()],
                bytes: c.bytes(),
            }),
        }
    }
    out
}

/// The newest window of at least `ratio` consecutive runs whose sizes lie within a factor
/// `ratio` of each other.
fn tier_window(runs: &[Run], ratio: usize) -> Option<std::ops::Range<usize>> {
    let ratio = ratio as u64;
    for end in (ratio as usize..=runs.len()).rev() {
        let (mut lo, mut hi) = (runs[end - 1].bytes.max(1), runs[end - 1].bytes.max(1));
        let mut start = end - 1;
        while start > 0 {
            let b = runs[start - 1].bytes.max(1);
            if hi.max(b) >= ratio.saturating_mul(lo.min(b)) {
                break;
            }
            (lo, hi, start) = (lo.min(b), hi.max(b), start - 1);
        }
        if end - start >= ratio as usize {
            return Some(start..end);
        }
    }
    None
}

/// When the runs hold more than `bound` chains: the consecutive runs of fewest bytes whose
/// merge leaves `bound` (the newest of equal cost).
fn bound_window(runs: &[Run], bound: usize) -> Option<std::ops::Range<usize>> {
    let chains: usize = runs.iter().map(|r| r.chains.len()).sum();
    let excess = chains.checked_sub(bound).filter(|&e| e > 0)?;
    let mut best: Option<(u64, std::ops::Range<usize>)> = None;
    for start in 0..runs.len() {
        let (mut merged, mut bytes) = (0, 0);
        for end in start + 1..=runs.len() {
            merged += runs[end - 1].chains.len();
            bytes += runs[end - 1].bytes;
            // Merging `merged` chains into one removes `merged - 1`.
            if merged >= 2 && merged > excess {
                if best.as_ref().is_none_or(|(b, _)| bytes <= *b) {
                    best = Some((bytes, start..end));
                }
                break;
            }
        }
    }
    best.map(|(_, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::InputObject;
    use ravel_manifest::ObjectEntry;
    use serde_json::json;

    /// A run of one object of `bytes` across the whole key space, ranked `order`.
    fn run(order: u64, bytes: u64) -> Chain {
        Chain {
            manifest: format!("m{order}"),
            run: 0,
            order,
            objects: vec![InputObject {
                entry: ObjectEntry {
                    key: format!("o{order}"),
                    rows: bytes,
                    bytes,
                    run: 0,
                    first_key: Some(vec![json!(0)]),
                    last_key: Some(vec![json!(100)]),
                    ranges: Default::default(),
                    delta_stats: None,
                },
                order,
            }],
            sorted: true,
        }
    }

    fn plan_of(chains: Vec<Chain>) -> Plan {
        Plan {
            depth_before: chains.len(),
            steps: vec![Step {
                chains,
                window: Window::default(),
            }],
            untouched: Vec::new(),
        }
    }

    fn tiered(size_ratio: u32, max_depth: u32) -> Maintenance {
        Maintenance {
            policy: MaintenanceMode::Tiered,
            size_ratio,
            max_depth,
        }
    }

    fn orders(d: &Decision) -> Vec<u64> {
        d.step
            .as_ref()
            .unwrap()
            .chains
            .iter()
            .map(|c| c.order)
            .collect()
    }

    #[test]
    fn the_newest_full_tier_merges_and_larger_runs_stay() {
        let chains = vec![
            run(0, 1000),
            run(1, 40),
            run(2, 10),
            run(3, 10),
            run(4, 10),
            run(5, 12),
        ];
        let d = decide(&plan_of(chains), &tiered(4, 8));
        assert_eq!(orders(&d), [2, 3, 4, 5]);
        assert!(!d.full);
        // Three of a tier do not fill it; the run 4x larger is another tier.
        let chains = vec![run(0, 1000), run(1, 40), run(2, 10), run(3, 10), run(4, 10)];
        assert!(decide(&plan_of(chains), &tiered(4, 8)).step.is_none());
    }

    #[test]
    fn past_the_depth_bound_the_cheapest_consecutive_runs_merge() {
        let chains = vec![run(0, 1000), run(1, 300), run(2, 80), run(3, 20), run(4, 5)];
        let d = decide(&plan_of(chains), &tiered(4, 4));
        assert_eq!(orders(&d), [3, 4]);
        let chains = vec![run(0, 100), run(1, 90)];
        let d = decide(&plan_of(chains), &tiered(2, 2));
        assert_eq!(orders(&d), [0, 1]);
        assert!(d.full, "a merge of every run leaves one sequence");
    }

    #[test]
    fn objects_of_an_older_layout_are_left_to_compact() {
        let mut chains = vec![run(0, 10), run(1, 10), run(2, 10), run(3, 10)];
        chains[1].sorted = false;
        let d = decide(&plan_of(chains), &tiered(2, 2));
        assert!(
            d.step.is_none() && d.reason.contains("compact"),
            "{}",
            d.reason
        );
    }

    /// What [`simulate`] found.
    struct Simulated {
        /// Merge bytes written over bytes loaded.
        amplification: f64,
        /// The most runs after any load's maintenance.
        depth: usize,
    }

    /// Applies the policy after each of `loads` loads of `load` bytes into a table of `base`
    /// bytes.
    fn simulate(policy: &Maintenance, base: u64, load: u64, loads: u64) -> Simulated {
        let mut chains = vec![run(0, base)];
        let (mut written, mut deepest) = (0, 0);
        for order in 1..=loads {
            chains.push(run(order, load));
            while let Some(step) = decide(&plan_of(chains.clone()), policy).step {
                let merged: Vec<u64> = step.chains.iter().map(|c| c.order).collect();
                let bytes: u64 = step.chains.iter().map(Chain::bytes).sum();
                let at = chains.iter().position(|c| c.order == merged[0]).unwrap();
                chains.retain(|c| !merged.contains(&c.order));
                chains.insert(at, run(*merged.last().unwrap(), bytes));
                written += bytes;
            }
            deepest = deepest.max(chains.len());
        }
        Simulated {
            amplification: written as f64 / (load * loads) as f64,
            depth: deepest,
        }
    }

    #[test]
    fn the_default_policy_keeps_write_amplification_and_depth_bounded() {
        let policy = Maintenance::default();
        // 50 loads of 2 % of the table, 20 of 20 %, 200 of 2 %, 10 of 1 %.
        for (base, load, loads, wa) in [
            (10_000, 200, 50, 2.0),
            (10_000, 2_000, 20, 2.0),
            (10_000, 200, 200, 4.0),
            (100_000, 1_000, 10, 1.0),
        ] {
            let Simulated {
                amplification,
                depth,
            } = simulate(&policy, base, load, loads);
            assert!(depth <= 8, "{loads} loads of {load}: depth {depth}");
            assert!(
                amplification <= wa,
                "{loads} loads of {load}: {amplification:.2}"
            );
        }
    }
}
