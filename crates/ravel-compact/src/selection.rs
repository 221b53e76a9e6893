//! Which merge a run makes next: `compact`'s (every overlapping set, or key ranges of it
//! within `max_input_bytes`) or the maintenance policy's, and the depth a version has.

use std::collections::HashSet;

use ravel_layout::{Layout, Maintenance};
use ravel_log::{LiveManifest, TableLog};
use ravel_manifest::ObjectEntry;

use crate::CompactError;
use crate::plan::{Plan, Step, max_depth, plan};

/// Which merges a run makes: `compact`'s (every overlapping set, or key ranges of it within
/// `max_input_bytes`), or the maintenance policy's.
#[derive(Debug, Clone)]
pub(crate) struct Selector {
    pub(crate) policy: Option<Maintenance>,
    pub(crate) max_input_bytes: Option<u64>,
}

/// A step chosen, whether it leaves the table one sequence, and why it was chosen.
pub(crate) struct Chosen {
    pub(crate) step: Step,
    pub(crate) full: bool,
    pub(crate) reason: String,
}

/// What the selector finds on a plan.
pub(crate) enum Selection {
    Merge(Chosen),
    /// Nothing to merge, and why.
    Nothing(String),
}

impl Selection {
    pub(crate) fn reason(&self) -> &str {
        match self {
            Selection::Merge(c) => &c.reason,
            Selection::Nothing(why) => why,
        }
    }
}

impl Selector {
    /// The next step on the version `plan` describes.
    pub(crate) fn next(&self, plan: &Plan, fan_in: usize) -> Selection {
        if let Some(policy) = &self.policy {
            let d = crate::maintenance::decide(plan, policy);
            tracing::debug!(
                depth = plan.depth_before,
                merge = d.step.is_some(),
                reason = %d.reason,
                "maintenance decision"
            );
            return match d.step {
                Some(step) => Selection::Merge(Chosen {
                    step,
                    full: d.full,
                    reason: d.reason,
                }),
                None => Selection::Nothing(d.reason),
            };
        }
        let step = match self.max_input_bytes {
            None => plan.steps.first().cloned(),
            Some(max) => bounded_step(plan, max, fan_in),
        };
        match step {
            Some(step) => Selection::Merge(Chosen {
                full: plan.steps.len() == 1 && !step.window.is_bounded(),
                reason: "compact merges every overlapping object".into(),
                step,
            }),
            None => Selection::Nothing("no two objects overlap".into()),
        }
    }

    /// The plan a report shows: all of `first` for `compact`, the chosen step for the policy.
    pub(crate) fn shown(&self, first: &Plan, selection: &Selection) -> Plan {
        if self.policy.is_none() {
            return first.clone();
        }
        Plan {
            steps: match selection {
                Selection::Merge(c) => vec![c.step.clone()],
                Selection::Nothing(_) => Vec::new(),
            },
            ..first.clone()
        }
    }
}

/// The deepest step of the plan, bounded by the largest input allowed (a range that would
/// merge more chains than one pass takes is merged whole, in passes).
fn bounded_step(plan: &Plan, max: u64, fan_in: usize) -> Option<Step> {
    let deepest = plan.steps.iter().max_by_key(|s| step_depth(s))?;
    let bounded = crate::window::bounded(deepest, max);
    if bounded.window.is_bounded() && bounded.chains.len() > fan_in {
        return Some(deepest.clone());
    }
    Some(bounded)
}

pub(crate) fn plan_of(live: Vec<LiveManifest>, layout: &Layout) -> Plan {
    plan(&live, &layout.sort_key_names())
}

/// The deepest overlap among a step's objects, in chains.
fn step_depth(step: &Step) -> usize {
    let objects: Vec<crate::Ranged> = step
        .chains
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.objects.iter().map(move |o| (i, &o.entry)))
        .collect();
    max_depth(&objects)
}

/// `live` reduced to the objects named in `allowed`.
pub(crate) fn only(live: Vec<LiveManifest>, allowed: &HashSet<String>) -> Vec<LiveManifest> {
    live.into_iter()
        .filter_map(|mut m| {
            m.live
                .retain(|l| allowed.contains(&m.manifest.objects[l.position].key));
            (!m.live.is_empty()).then_some(m)
        })
        .collect()
}

/// The depth of the newest version as `verify` reports it (the most objects that hold one key,
/// touching ends counted once), over the objects of the current layout.
pub(crate) async fn depth_now(log: &TableLog, layout: &Layout) -> Result<usize, CompactError> {
    let live = log.manifests(&log.latest().await?).await?;
    Ok(depth_of(&live, layout))
}

pub(crate) fn depth_of(live: &[LiveManifest], layout: &Layout) -> usize {
    let objects: Vec<&ObjectEntry> = live
        .iter()
        .filter(|m| m.manifest.sort_key == layout.sort_key_names())
        .flat_map(|m| m.objects().map(|(_, o)| o))
        .collect();
    ravel_manifest::clustering::clustering_info(&objects).map_or(0, |c| c.max_depth)
}
