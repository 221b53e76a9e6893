//! How well a set of objects is clustered, in the figures Snowflake's
//! `SYSTEM$CLUSTERING_INFORMATION` gives for micro-partitions, computed exactly from the
//! objects' first and last keys.
//!
//! **Covering.** An object whose first key is `f` and last key `l` *covers* key `p` when
//! `f ≤ p < l`, or when `f = l = p` (a one-key object). The last key of an object of more
//! than one key is left out so that touching ends count once: where one object's last key is
//! the next one's first (a sequence cut between two equal keys, as a merge may leave it), the
//! depth is 1, not 2. Keys compare by [`compare_keys`]. Objects without a key range, or whose
//! first key sorts after their last, are not measured.
//!
//! **Depth** at key `p`: the number of objects covering `p`. Two objects *overlap* when some
//! key is covered by both. An object's depth is the largest depth at a key it covers (at least
//! 1: it covers its first key).
//!
//! **Figures** (Snowflake's names in brackets): the objects measured
//! (`total_partition_count`); the largest depth at any key, 1 when the objects follow each
//! other in one sequence; the mean over objects of the object's depth (`average_depth`, "the
//! average overlap depth of each micro-partition"); the mean number of other objects each
//! object overlaps (`average_overlaps`); and how many objects have each depth
//! (`partition_depth_histogram`, here one entry per depth that occurs rather than Snowflake's
//! power-of-two buckets past 16). An object's depth is at most 1 + its overlaps, and usually
//! less: objects it overlaps at different keys do not all meet at one key.
//!
//! **Computation.** O(n log n): the first keys, last keys and one-key objects' keys are sorted
//! once; the depth at a key and an object's overlaps are counts of keys before a bound
//! (binary searches); the depth only rises at first keys, so an object's depth is the largest
//! depth at the first keys it covers, a range maximum over the sorted distinct first keys.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::{ObjectEntry, compare_keys};

/// Clustering figures of a set of objects (see the module documentation for the definitions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusteringInfo {
    /// Objects measured: those with a key range whose first key does not sort after the last.
    pub total_objects: usize,
    /// The largest depth at any key: 1 when the objects form one sequence, 0 when none is
    /// measured.
    pub max_depth: usize,
    /// Mean over the objects of each one's depth (the largest depth at a key it covers).
    pub average_depth: f64,
    /// Mean over the objects of the number of other objects each overlaps.
    pub average_overlaps: f64,
    /// Depth → number of objects of that depth.
    pub depth_histogram: BTreeMap<usize, usize>,
}

/// The clustering figures of `objects`; `None` when no object has a first and a last key.
pub fn clustering_info(objects: &[&ObjectEntry]) -> Option<ClusteringInfo> {
    if !objects
        .iter()
        .any(|o| o.first_key.is_some() && o.last_key.is_some())
    {
        return None;
    }
    let spans: Vec<Span> = objects.iter().filter_map(|o| Span::of(o)).collect();
    let index = Index::new(&spans);
    let depths: Vec<usize> = spans.iter().map(|s| index.object_depth(s)).collect();
    let overlaps: u64 = spans.iter().map(|s| index.overlaps(s) as u64).sum();
    Some(summarize(&depths, overlaps))
}

/// The figures from each measured object's depth and the sum of their overlap counts.
fn summarize(depths: &[usize], overlaps: u64) -> ClusteringInfo {
    let mut depth_histogram = BTreeMap::new();
    for &d in depths {
        *depth_histogram.entry(d).or_insert(0) += 1;
    }
    let mean = |total: f64| {
        if depths.is_empty() {
            0.0
        } else {
            total / depths.len() as f64
        }
    };
    ClusteringInfo {
        total_objects: depths.len(),
        max_depth: depths.iter().copied().max().unwrap_or(0),
        average_depth: mean(depths.iter().sum::<usize>() as f64),
        average_overlaps: mean(overlaps as f64),
        depth_histogram,
    }
}

/// A measured object's key range.
struct Span<'a> {
    first: &'a [Value],
    last: &'a [Value],
}

impl<'a> Span<'a> {
    /// The object's range, if it has one and its first key does not sort after its last.
    fn of(o: &'a ObjectEntry) -> Option<Span<'a>> {
        let (first, last) = (o.first_key.as_deref()?, o.last_key.as_deref()?);
        (compare_keys(first, last) != Ordering::Greater).then_some(Span { first, last })
    }

    /// A one-key object: it covers its key alone.
    fn is_point(&self) -> bool {
        compare_keys(self.first, self.last) == Ordering::Equal
    }
}

/// The measured objects' keys, sorted for counting.
struct Index<'a> {
    /// First keys of the objects of more than one key, ascending.
    starts: Vec<&'a [Value]>,
    /// Last keys of the same objects, ascending.
    ends: Vec<&'a [Value]>,
    /// Keys of the one-key objects, ascending.
    points: Vec<&'a [Value]>,
    /// Every distinct first key, ascending.
    keys: Vec<&'a [Value]>,
    /// The depth at each of `keys`.
    depths: RangeMax,
}

impl<'a> Index<'a> {
    fn new(spans: &[Span<'a>]) -> Index<'a> {
        let (points, ranges): (Vec<&Span>, Vec<&Span>) = spans.iter().partition(|s| s.is_point());
        let sorted = |keys: Vec<&'a [Value]>| {
            let mut keys = keys;
            keys.sort_by(|a, b| compare_keys(a, b));
            keys
        };
        let mut index = Index {
            starts: sorted(ranges.iter().map(|s| s.first).collect()),
            ends: sorted(ranges.iter().map(|s| s.last).collect()),
            points: sorted(points.iter().map(|s| s.first).collect()),
            keys: sorted(spans.iter().map(|s| s.first).collect()),
            depths: RangeMax::new(Vec::new()),
        };
        index
            .keys
            .dedup_by(|a, b| compare_keys(a, b) == Ordering::Equal);
        index.depths = RangeMax::new(index.keys.iter().map(|k| index.depth_at(k)).collect());
        index
    }

    /// Objects covering `k`: those of more than one key starting at or before it and ending
    /// after it, and the one-key objects at it.
    fn depth_at(&self, k: &[Value]) -> usize {
        // An object ending at or before `k` starts before it: the subtraction is of a subset.
        count(&self.starts, k, Bound::Through) - count(&self.ends, k, Bound::Through)
            + self.points_from(k, k, Bound::Through)
    }

    /// One-key objects at keys from `lo` up to `hi` (`Bound::Through`: `hi` included).
    fn points_from(&self, lo: &[Value], hi: &[Value], bound: Bound) -> usize {
        count(&self.points, hi, bound) - count(&self.points, lo, Bound::Before)
    }

    /// Other objects sharing a covered key with `s`.
    fn overlaps(&self, s: &Span) -> usize {
        if s.is_point() {
            return self.depth_at(s.first) - 1;
        }
        // Objects of more than one key starting before `s` ends and ending after it starts
        // (one ending at or before its first key starts before its last), itself excluded;
        // one-key objects within it.
        count(&self.starts, s.last, Bound::Before) - count(&self.ends, s.first, Bound::Through) - 1
            + self.points_from(s.first, s.last, Bound::Before)
    }

    /// The largest depth at a key `s` covers: the depth rises only at first keys, so it is
    /// the largest at the first keys from `s.first` up to (for more than one key) `s.last`.
    fn object_depth(&self, s: &Span) -> usize {
        let from = count(&self.keys, s.first, Bound::Before);
        let to = if s.is_point() {
            from + 1
        } else {
            count(&self.keys, s.last, Bound::Before)
        };
        self.depths.max(from, to)
    }
}

/// Whether a count of keys stops before the bound key or takes it in.
#[derive(Clone, Copy)]
enum Bound {
    Before,
    Through,
}

/// How many of `sorted` sort before `k` (`Bound::Through`: or equal it).
fn count(sorted: &[&[Value]], k: &[Value], bound: Bound) -> usize {
    sorted.partition_point(|x| match compare_keys(x, k) {
        Ordering::Less => true,
        Ordering::Equal => matches!(bound, Bound::Through),
        Ordering::Greater => false,
    })
}

/// The largest value of a sequence over an index range, in O(1) after O(n log n) preparation
/// (a sparse table: level j holds the largest value of each window of 2^j values).
struct RangeMax {
    levels: Vec<Vec<usize>>,
}

impl RangeMax {
    fn new(values: Vec<usize>) -> RangeMax {
        let mut levels = vec![values];
        let mut width = 1;
        while width * 2 <= levels[0].len() {
            let below = levels.last().expect("level 0 exists");
            let next = (0..below.len() - width)
                .map(|i| below[i].max(below[i + width]))
                .collect();
            levels.push(next);
            width *= 2;
        }
        RangeMax { levels }
    }

    /// The largest of the values at `from..to` (`from < to`).
    fn max(&self, from: usize, to: usize) -> usize {
        let level = (usize::BITS - 1 - (to - from).leading_zeros()) as usize;
        let row = &self.levels[level];
        row[from].max(row[to - (1 << level)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Largest key the property draws.
    const KEYS: i64 = 12;

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

    fn info(ranges: &[(i64, i64)]) -> ClusteringInfo {
        let entries: Vec<ObjectEntry> = ranges
            .iter()
            .enumerate()
            .map(|(i, r)| entry(i, Some(*r)))
            .collect();
        clustering_info(&entries.iter().collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn touching_ends_count_once() {
        let got = info(&[(5, 9), (0, 5), (9, 12)]);
        assert_eq!(got.max_depth, 1, "{got:?}");
        assert_eq!((got.average_depth, got.average_overlaps), (1.0, 0.0));
        assert_eq!(got.depth_histogram, BTreeMap::from([(1, 3)]));
        assert_eq!(got.total_objects, 3);
    }

    #[test]
    fn a_one_key_object_inside_another_gives_depth_two() {
        for inner in [(4, 4), (0, 0)] {
            let got = info(&[(0, 10), inner]);
            assert_eq!(got.max_depth, 2, "{inner:?}: {got:?}");
            assert_eq!(got.average_overlaps, 1.0);
            assert_eq!(got.depth_histogram, BTreeMap::from([(2, 2)]));
        }
        // At the other's last key it touches an end: counted once.
        assert_eq!(info(&[(0, 10), (10, 10)]).max_depth, 1);
        // Two one-key objects at one key overlap.
        assert_eq!(info(&[(3, 3), (3, 3), (4, 4)]).max_depth, 2);
    }

    #[test]
    fn disjoint_objects_give_depth_one() {
        let got = info(&[(0, 3), (5, 8), (10, 10)]);
        assert_eq!(got.max_depth, 1);
        assert_eq!(got.average_overlaps, 0.0);
    }

    #[test]
    fn an_object_depth_is_its_deepest_key_not_its_overlaps() {
        // The long object overlaps both others, which never meet: its depth is 2, not 3.
        let got = info(&[(0, 10), (1, 3), (6, 8)]);
        assert_eq!(got.max_depth, 2);
        assert_eq!(got.depth_histogram, BTreeMap::from([(2, 3)]));
        assert_eq!(got.average_overlaps, 4.0 / 3.0);
    }

    #[test]
    fn without_measurable_ranges() {
        assert_eq!(clustering_info(&[&entry(0, None)]), None);
        assert_eq!(clustering_info(&[]), None);
        let inverted = clustering_info(&[&entry(0, Some((5, 2))), &entry(1, None)]).unwrap();
        assert_eq!((inverted.total_objects, inverted.max_depth), (0, 0));
        assert!(inverted.depth_histogram.is_empty());
        assert_eq!(inverted.average_depth, 0.0);
    }

    #[test]
    fn the_histogram_is_json_by_depth() {
        let got = serde_json::to_value(info(&[(0, 4), (2, 6)])).unwrap();
        assert_eq!(got["depth_histogram"], json!({"2": 2}));
        assert_eq!(got["max_depth"], 2);
    }

    /// Whether the object `(first, last)` covers key `p`, by the definition.
    fn covers((first, last): (i64, i64), p: i64) -> bool {
        (first <= p && p < last) || (first == last && last == p)
    }

    /// Every key of the key space tried, every pair of objects compared.
    fn brute_force(spec: &[Option<(i64, i64)>]) -> Option<ClusteringInfo> {
        if spec.iter().all(Option::is_none) {
            return None;
        }
        let spans: Vec<(i64, i64)> = spec
            .iter()
            .flatten()
            .copied()
            .filter(|(f, l)| f <= l)
            .collect();
        let depth = |p: i64| spans.iter().filter(|s| covers(**s, p)).count();
        let depths: Vec<usize> = spans
            .iter()
            .map(|s| {
                (0..=KEYS)
                    .filter(|p| covers(*s, *p))
                    .map(depth)
                    .max()
                    .unwrap()
            })
            .collect();
        let meet = |a: (i64, i64), b: (i64, i64)| (0..=KEYS).any(|p| covers(a, p) && covers(b, p));
        let overlaps = (0..spans.len())
            .flat_map(|a| (0..spans.len()).map(move |b| (a, b)))
            .filter(|&(a, b)| a != b && meet(spans[a], spans[b]))
            .count();
        Some(summarize(&depths, overlaps as u64))
    }

    /// Objects on a small key space, so that they overlap, touch and nest often; some of one
    /// key, some without a range, a few whose first key sorts after their last.
    fn objects() -> impl Strategy<Value = Vec<Option<(i64, i64)>>> {
        let range = (0..=KEYS, -1i64..6).prop_map(|(f, w)| (f, (f + w).min(KEYS)));
        prop::collection::vec(prop::option::weighted(0.95, range), 0..40)
    }

    proptest! {
        #[test]
        fn the_sweep_agrees_with_trying_every_key(spec in objects()) {
            let entries: Vec<ObjectEntry> =
                spec.iter().enumerate().map(|(i, r)| entry(i, *r)).collect();
            let got = clustering_info(&entries.iter().collect::<Vec<_>>());
            prop_assert_eq!(got, brute_force(&spec));
        }
    }
}
