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
    /// The same chain with no objects.
    fn without_objects(&self) -> Chain {
        Chain {
            manifest: self.manifest.clone(),
            run: self.run,
            order: self.order,
            objects: Vec::new(),
            sorted: self.sorted,
        }
    }

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

/// The chains split into steps: objects that share a key belong to one step (directly or
/// through others; neighbours of one chain that share a boundary key too, so that no step's
/// output overlaps an object left out), each step's chains keeping their rank order; steps in
/// key order.
fn steps(chains: Vec<Chain>) -> Vec<Step> {
    let objects: Vec<Ranged> = chains
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.objects.iter().map(move |o| (i, &o.entry)))
        .collect();
    let group = groups(&objects);
    let mut out = vec![Step::default(); group.iter().max().map_or(0, |g| g + 1)];
    let mut group = group.into_iter();
    for c in &chains {
        // This chain's objects of each step, in the chain's order.
        let mut parts: std::collections::BTreeMap<usize, Chain> = Default::default();
        for o in &c.objects {
            let g = group.next().expect("a group per object");
            parts
                .entry(g)
                .or_insert_with(|| c.without_objects())
                .objects
                .push(o.clone());
        }
        for (g, chain) in parts {
            out[g].chains.push(chain);
        }
    }
    out
}

/// Each object's group: objects whose closed key ranges share a key, directly or through
/// others, are in one group. One sweep in order of first keys (each object joins the group
/// before it unless it starts past everything that group reaches), so groups are numbered in
/// key order and no two share a key. An object without a range shares a key with every other.
fn groups(objects: &[Ranged<'_>]) -> Vec<usize> {
    let ranges: Option<Vec<(&Vec<Value>, &Vec<Value>)>> =
        objects.iter().map(|(_, o)| range(o)).collect();
    let Some(ranges) = ranges else {
        return vec![0; objects.len()];
    };
    let mut order: Vec<usize> = (0..objects.len()).collect();
    order.sort_by(|&a, &b| compare_keys(ranges[a].0, ranges[b].0));
    let mut group = vec![0; objects.len()];
    let (mut current, mut reach) = (0, None::<&Vec<Value>>);
    for i in order {
        let (first, last) = ranges[i];
        match reach {
            Some(r) if compare_keys(first, r) != Ordering::Greater => {
                if compare_keys(last, r) == Ordering::Greater {
                    reach = Some(last);
                }
            }
            Some(_) => {
                current += 1;
                reach = Some(last);
            }
            None => reach = Some(last),
        }
        group[i] = current;
    }
    group
}

/// An object with the chain it belongs to: objects of one chain are in order already and do
/// not count as overlapping each other (neighbours may share a boundary key).
pub type Ranged<'a> = (usize, &'a ObjectEntry);

pub(crate) fn range(o: &ObjectEntry) -> Option<(&Vec<Value>, &Vec<Value>)> {
    Some((o.first_key.as_ref()?, o.last_key.as_ref()?))
}

/// The largest number of chains whose objects share one key (exact: the deepest point is some
/// object's first key). 1 when the objects form one sequence in key order. One sweep over the
/// first keys in order, counting the objects of each chain that reach the key.
pub fn max_depth(objects: &[Ranged<'_>]) -> usize {
    let ranges: Vec<(usize, &Vec<Value>, &Vec<Value>)> = objects
        .iter()
        .filter_map(|(c, o)| range(o).map(|(f, l)| (*c, f, l)))
        .filter(|(_, f, l)| compare_keys(f, l) != Ordering::Greater)
        .collect();
    let mut starts: Vec<usize> = (0..ranges.len()).collect();
    starts.sort_by(|&a, &b| compare_keys(ranges[a].1, ranges[b].1));
    let mut ends = starts.clone();
    ends.sort_by(|&a, &b| compare_keys(ranges[a].2, ranges[b].2));
    // Per chain, its objects whose range holds the key swept to.
    let mut reaching: std::collections::HashMap<usize, usize> = Default::default();
    let (mut s, mut e, mut deepest) = (0, 0, 0);
    while s < starts.len() {
        let key = ranges[starts[s]].1;
        while s < starts.len() && compare_keys(ranges[starts[s]].1, key) == Ordering::Equal {
            *reaching.entry(ranges[starts[s]].0).or_default() += 1;
            s += 1;
        }
        while e < ends.len() && compare_keys(ranges[ends[e]].2, key) == Ordering::Less {
            let chain = ranges[ends[e]].0;
            let left = reaching
                .get_mut(&chain)
                .expect("an object ends after it starts");
            *left -= 1;
            if *left == 0 {
                reaching.remove(&chain);
            }
            e += 1;
        }
        deepest = deepest.max(reaching.len());
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn entry(i: usize, range: Option<(i64, i64)>) -> ObjectEntry {
        ObjectEntry {
            key: format!("o{i}"),
            rows: 1,
            bytes: 1,
            run: 0,
            first_key: range.map(|(f, _)| vec![json!(f)]),
            last_key: range.map(|(_, l)| vec![json!(l)]),
            ranges: Default::default(),
            delta_stats: None,
        }
    }

    /// Objects of up to four chains, with ranges on a small key space so that they overlap
    /// often; now and then one without a range.
    fn objects() -> impl Strategy<Value = Vec<(usize, Option<(i64, i64)>)>> {
        let range = (0i64..40, 0i64..8).prop_map(|(f, w)| (f, f + w));
        let object = (0usize..4, prop::option::weighted(0.97, range));
        prop::collection::vec(object, 0..60)
    }

    /// Whether two closed key ranges share a key.
    fn intersect(a: &ObjectEntry, b: &ObjectEntry) -> bool {
        match (range(a), range(b)) {
            (Some((af, al)), Some((bf, bl))) => {
                compare_keys(af, bl) != Ordering::Greater
                    && compare_keys(bf, al) != Ordering::Greater
            }
            _ => true,
        }
    }

    /// Every pair compared: objects sharing a key are joined (union-find).
    fn groups_pairwise(objects: &[Ranged<'_>]) -> Vec<Vec<usize>> {
        let mut parent: Vec<usize> = (0..objects.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
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
        partition(&roots)
    }

    /// Objects by group, each group's objects in index order, groups by their first object.
    fn partition(group: &[usize]) -> Vec<Vec<usize>> {
        let mut by: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for (i, g) in group.iter().enumerate() {
            by.entry(*g).or_default().push(i);
        }
        let mut out: Vec<Vec<usize>> = by.into_values().collect();
        out.sort();
        out
    }

    /// Every object's first key tried: the chains whose objects hold it, counted.
    fn max_depth_pairwise(objects: &[Ranged<'_>]) -> usize {
        let ranges: Vec<(usize, &Vec<Value>, &Vec<Value>)> = objects
            .iter()
            .filter_map(|(c, o)| range(o).map(|(f, l)| (*c, f, l)))
            .collect();
        let holds = |f: &Vec<Value>, p: &Vec<Value>, l: &Vec<Value>| {
            compare_keys(f, p) != Ordering::Greater && compare_keys(p, l) != Ordering::Greater
        };
        let depth_at = |p: &Vec<Value>| {
            let mut chains: Vec<usize> = ranges
                .iter()
                .filter(|(_, f, l)| holds(f, p, l))
                .map(|(c, _, _)| *c)
                .collect();
            chains.sort_unstable();
            chains.dedup();
            chains.len()
        };
        ranges
            .iter()
            .map(|(_, p, _)| depth_at(p))
            .max()
            .unwrap_or(0)
    }

    proptest! {
        #[test]
        fn the_sweeps_agree_with_comparing_every_pair(spec in objects()) {
            let entries: Vec<ObjectEntry> =
                spec.iter().enumerate().map(|(i, (_, r))| entry(i, *r)).collect();
            let objects: Vec<Ranged> =
                spec.iter().zip(&entries).map(|((c, _), e)| (*c, e)).collect();
            let group = groups(&objects);
            prop_assert_eq!(partition(&group), groups_pairwise(&objects));
            prop_assert_eq!(max_depth(&objects), max_depth_pairwise(&objects));
            // Groups are numbered in key order: a later group starts past an earlier one.
            if objects.iter().all(|(_, o)| range(o).is_some()) {
                for a in 0..objects.len() {
                    for b in 0..objects.len() {
                        if group[a] < group[b] {
                            let (_, la) = range(objects[a].1).unwrap();
                            let (fb, _) = range(objects[b].1).unwrap();
                            prop_assert_eq!(compare_keys(la, fb), Ordering::Less);
                        }
                    }
                }
            }
        }
    }
}
