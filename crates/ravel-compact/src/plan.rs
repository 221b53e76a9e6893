//! What a compaction reads: the version's objects grouped into chains (one run of one load
//! or compaction: objects in key order that do not overlap), and which of them overlap.

use std::cmp::Ordering;

use ravel_log::{ChainOrigin, LiveManifest};
use ravel_manifest::{ObjectEntry, compare_keys};
use serde_json::Value;

/// An object of the version a compaction may read.
#[derive(Debug, Clone)]
pub struct InputObject {
    pub entry: ObjectEntry,
    /// Its rank among equal sort keys (see `ravel_log::TAG_ORDER`).
    pub order: u64,
}

/// Objects of one run, in key order: a sorted sequence a merge reads from start to end.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Store path of the manifest listing the objects.
    pub manifest: String,
    pub run: u64,
    pub order: u64,
    pub objects: Vec<InputObject>,
    /// Sorted under the current layout's key; otherwise its rows must be sorted again.
    pub sorted: bool,
}

impl Chain {
    pub fn rows(&self) -> u64 {
        self.objects.iter().map(|o| o.entry.rows).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.entry.bytes).sum()
    }
}

/// One merge and its commit: chains whose objects overlap each other (a connected set), in
/// rank order. Steps do not overlap each other or an untouched object.
#[derive(Debug, Clone, Default)]
pub struct Step {
    pub chains: Vec<Chain>,
    /// The key range merged; the inputs' rows outside it are written back (see
    /// [`crate::window`]). Unbounded: every row of the inputs.
    pub window: Window,
}

/// A half-open key range `[lo, hi)`; `None` is unbounded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    pub lo: Option<Vec<Value>>,
    pub hi: Option<Vec<Value>>,
}

impl Window {
    pub fn is_bounded(&self) -> bool {
        self.lo.is_some() || self.hi.is_some()
    }
}

impl Step {
    pub fn input_bytes(&self) -> u64 {
        self.input_objects().map(|o| o.entry.bytes).sum()
    }

    pub fn input_objects(&self) -> impl Iterator<Item = &InputObject> {
        self.chains.iter().flat_map(|c| c.objects.iter())
    }
}

/// What a compaction of the version merges and what it leaves.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The merges, in key order.
    pub steps: Vec<Step>,
    /// Objects of the current layout that overlap no other object: not rewritten.
    pub untouched: Vec<ObjectEntry>,
    /// Deepest overlap among the version's objects of the current layout (in chains).
    pub depth_before: usize,
}

impl Plan {
    pub fn input_objects(&self) -> impl Iterator<Item = &InputObject> {
        self.steps.iter().flat_map(|s| s.input_objects())
    }

    pub fn chains(&self) -> usize {
        self.steps.iter().map(|s| s.chains.len()).sum()
    }

    /// Nothing overlaps and nothing is under an older layout: a compaction writes nothing.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

/// Plans the compaction of the version whose manifests are `live` under the sort key
/// `sort_key` (the current layout's names): every object under another key is sorted again;
/// of the others, every object that overlaps another is merged. When objects must be sorted
/// again, every object is merged (their rows may land anywhere in the key space).
pub fn plan(live: &[LiveManifest], sort_key: &[String]) -> Plan {
    // Keyed by rank: the map's order is the chains' order. Objects a compaction wrote back
    // join the run they came from (see `ravel_log::ChainOrigin`).
    let mut by_rank: std::collections::BTreeMap<(u64, ChainOrigin), Chain> = Default::default();
    for m in live {
        let sorted = !sort_key.is_empty() && m.manifest.sort_key == sort_key;
        for (l, o) in m.objects() {
            let origin = l.chain.clone().unwrap_or_else(|| ChainOrigin {
                manifest: m.key.clone(),
                run: o.run,
            });
            let chain = by_rank
                .entry((l.order, origin.clone()))
                .or_insert_with(|| Chain {
                    manifest: origin.manifest,
                    run: origin.run,
                    order: l.order,
                    objects: Vec::new(),
                    sorted,
                });
            chain.sorted &= sorted;
            chain.objects.push(InputObject {
                entry: o.clone(),
                order: l.order,
            });
        }
    }
    for chain in by_rank.values_mut() {
        // Written-back objects come from other manifests; their keys never tie a neighbour's.
        chain
            .objects
            .sort_by(|a, b| match (range(&a.entry), range(&b.entry)) {
                (Some((x, _)), Some((y, _))) => compare_keys(x, y),
                _ => Ordering::Equal,
            });
    }
    let chains: Vec<Chain> = by_rank.into_values().collect();
    let sorted: Vec<Ranged> = chains
        .iter()
        .enumerate()
        .filter(|(_, c)| c.sorted)
        .flat_map(|(i, c)| c.objects.iter().map(move |o| (i, &o.entry)))
        .collect();
    let depth_before = max_depth(&sorted);
    if sort_key.is_empty() {
        return Plan::default();
    }
    if chains.iter().any(|c| !c.sorted) {
        return Plan {
            steps: vec![Step {
                chains,
                window: Window::default(),
            }],
            untouched: Vec::new(),
            depth_before,
        };
    }
    Plan {
        steps: steps(chains),
        untouched: Vec::new(),
        depth_before,
    }
    .split_untouched()
}

impl Plan {
    /// Moves out of the steps every step whose objects all belong to one chain: they are in
    /// order already (neighbours of one run may share a boundary key), nothing to merge.
    fn split_untouched(mut self) -> Plan {
        let (merge, alone): (Vec<Step>, Vec<Step>) =
            self.steps.into_iter().partition(|s| s.chains.len() > 1);
        self.untouched = alone
            .iter()
            .flat_map(|s| s.input_objects().map(|o| o.entry.clone()))
            .collect();
        self.steps = merge;
        self
    }
}

/// The chains split into steps: objects that share a key belong to one step (union-find over
/// the pairs; neighbours of one chain that share a boundary key too, so that no step's output
/// overlaps an object left out), each step's chains keeping their rank order; steps in key
/// order.
fn steps(chains: Vec<Chain>) -> Vec<Step> {
    let objects: Vec<Ranged> = chains
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.objects.iter().map(move |o| (i, &o.entry)))
        .collect();
    let mut parent: Vec<usize> = (0..objects.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for a in 0..objects.len() {
        for b in a + 1..objects.len() {
            if intersect(objects[a].1, objects[b].1) {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[ra] = rb;
            }
        }
    }
    let roots: Vec<usize> = (0..objects.len()).map(|i| root(&mut parent, i)).collect();
    let mut groups: Vec<usize> = roots.clone();
    groups.sort_unstable();
    groups.dedup();
    let mut out: Vec<(Vec<Value>, Step)> = Vec::new();
    for g in groups {
        let mut step = Step::default();
        let mut first: Option<Vec<Value>> = None;
        let mut at = 0;
        for c in &chains {
            let mut chain = Chain {
                objects: Vec::new(),
                ..c.clone()
            };
            for o in &c.objects {
                if roots[at] == g {
                    if let Some((f, _)) = range(&o.entry)
                        && first
                            .as_ref()
                            .is_none_or(|x| compare_keys(f, x) == Ordering::Less)
                    {
                        first = Some(f.clone());
                    }
                    chain.objects.push(o.clone());
                }
                at += 1;
            }
            if !chain.objects.is_empty() {
                step.chains.push(chain);
            }
        }
        out.push((first.unwrap_or_default(), step));
    }
    out.sort_by(|a, b| compare_keys(&a.0, &b.0));
    out.into_iter().map(|(_, s)| s).collect()
}

/// An object with the chain it belongs to: objects of one chain are in order already and do
/// not count as overlapping each other (neighbours may share a boundary key).
pub type Ranged<'a> = (usize, &'a ObjectEntry);

pub(crate) fn range(o: &ObjectEntry) -> Option<(&Vec<Value>, &Vec<Value>)> {
    Some((o.first_key.as_ref()?, o.last_key.as_ref()?))
}

/// Whether two closed key ranges share a key.
fn intersect(a: &ObjectEntry, b: &ObjectEntry) -> bool {
    match (range(a), range(b)) {
        (Some((af, al)), Some((bf, bl))) => {
            compare_keys(af, bl) != Ordering::Greater && compare_keys(bf, al) != Ordering::Greater
        }
        _ => true,
    }
}

/// The largest number of chains whose objects share one key (exact: the deepest point is some
/// object's first key). 1 when the objects form one sequence in key order.
pub fn max_depth(objects: &[Ranged<'_>]) -> usize {
    let ranges: Vec<(usize, &Vec<Value>, &Vec<Value>)> = objects
        .iter()
        .filter_map(|(c, o)| range(o).map(|(f, l)| (*c, f, l)))
        .collect();
    ranges
        .iter()
        .map(|(_, p, _)| {
            let mut chains: Vec<usize> = ranges
                .iter()
                .filter(|(_, f, l)| {
                    compare_keys(f, p) != Ordering::Greater
                        && compare_keys(p, l) != Ordering::Greater
                })
                .map(|(c, _, _)| *c)
                .collect();
            chains.sort_unstable();
            chains.dedup();
            chains.len()
        })
        .max()
        .unwrap_or(0)
}
