//! Bounded steps: a step over more input than `--max-input-bytes` merges one key range of it,
//! the most overlapping first.
//!
//! A range `[lo, hi)` takes every object that holds a key in it, so that nothing left in the
//! table overlaps the merged rows. An object that reaches past an end (it *straddles* it) is
//! read whole: its rows outside the range are written back as an object of their own that
//! continues the object's run (`ravel_log::ChainOrigin`), keeping its place among equal keys.
//! Written-back rows must not tie the run's neighbouring object, so an end is placed only where
//! each straddler is strictly apart from its neighbour; the range grows until that holds (at
//! worst to the whole step).

use std::cmp::Ordering;

use ravel_manifest::{ObjectEntry, compare_keys};
use serde_json::Value;

use crate::plan::{Chain, Step, Window, range};

/// The part of `step` to merge next within `max_bytes` of input: the step itself when it
/// fits, else the key range around its deepest point, grown while it fits and until its ends
/// are valid. At least two chains' objects whenever the step has two chains.
pub fn bounded(step: &Step, max_bytes: u64) -> Step {
    let ranged = step
        .input_objects()
        .all(|o| o.entry.first_key.is_some() && o.entry.last_key.is_some());
    if step.input_bytes() <= max_bytes || !ranged || step.window.is_bounded() {
        return step.clone();
    }
    let points = first_keys(step);
    let seed = deepest(step, &points);
    let mut w = Span {
        a: seed,
        b: seed + 1,
    };
    loop {
        let grown = [w.left(), w.right(points.len())]
            .into_iter()
            .flatten()
            .map(|s| (take(step, &s.window(&points)).input_bytes(), s))
            .filter(|(bytes, _)| *bytes <= max_bytes)
            .min_by_key(|(bytes, _)| *bytes);
        match grown {
            Some((_, s)) => w = s,
            None => break,
        }
    }
    while let Some(grown) = w.until_valid(step, &points) {
        w = grown;
    }
    take(step, &w.window(&points))
}

/// A range between two of the step's first keys: `[points[a], points[b])`, unbounded above
/// when `b` is past the last.
#[derive(Debug, Clone, Copy)]
struct Span {
    a: usize,
    b: usize,
}

impl Span {
    fn left(self) -> Option<Span> {
        (self.a > 0).then(|| Span {
            a: self.a - 1,
            ..self
        })
    }

    fn right(self, points: usize) -> Option<Span> {
        (self.b < points).then(|| Span {
            b: self.b + 1,
            ..self
        })
    }

    fn window(self, points: &[Vec<Value>]) -> Window {
        Window {
            // Nothing lies below the first point: no lower end.
            lo: (self.a > 0).then(|| points[self.a].clone()),
            hi: points.get(self.b).cloned(),
        }
    }

    /// The span grown past an end where a straddler would tie its run's neighbour; `None`
    /// when both ends are valid.
    fn until_valid(self, step: &Step, points: &[Vec<Value>]) -> Option<Span> {
        let w = self.window(points);
        if !valid_lo(step, w.lo.as_deref()) {
            return self.left();
        }
        if !valid_hi(step, w.hi.as_deref()) {
            return self.right(points.len());
        }
        None
    }
}

fn first_keys(step: &Step) -> Vec<Vec<Value>> {
    let mut points: Vec<Vec<Value>> = step
        .input_objects()
        .filter_map(|o| range(&o.entry).map(|(f, _)| f.clone()))
        .collect();
    points.sort_by(|a, b| compare_keys(a, b));
    points.dedup_by(|a, b| compare_keys(a, b) == Ordering::Equal);
    points
}

/// The index of the first point held by the most chains.
fn deepest(step: &Step, points: &[Vec<Value>]) -> usize {
    let depth = |p: &Vec<Value>| {
        step.chains
            .iter()
            .filter(|c| c.objects.iter().any(|o| holds(&o.entry, p)))
            .count()
    };
    let mut best = (0, 0);
    for (i, p) in points.iter().enumerate() {
        let d = depth(p);
        if d > best.1 {
            best = (i, d);
        }
    }
    best.0
}

fn holds(o: &ObjectEntry, key: &[Value]) -> bool {
    range(o).is_some_and(|(f, l)| {
        compare_keys(f, key) != Ordering::Greater && compare_keys(key, l) != Ordering::Greater
    })
}

/// Whether an object has a key in `w`.
pub(crate) fn within(o: &ObjectEntry, w: &Window) -> bool {
    let Some((f, l)) = range(o) else { return true };
    let above_lo =
        w.lo.as_ref()
            .is_none_or(|lo| compare_keys(l, lo) != Ordering::Less);
    let below_hi =
        w.hi.as_ref()
            .is_none_or(|hi| compare_keys(f, hi) == Ordering::Less);
    above_lo && below_hi
}

/// The objects of `step` that hold a key in `w`, as a step bounded by `w`.
pub(crate) fn take(step: &Step, w: &Window) -> Step {
    let chains = step
        .chains
        .iter()
        .map(|c| Chain {
            objects: c
                .objects
                .iter()
                .filter(|o| within(&o.entry, w))
                .cloned()
                .collect(),
            ..c.clone()
        })
        .filter(|c| !c.objects.is_empty())
        .collect();
    Step {
        chains,
        window: w.clone(),
    }
}

/// Every object reaching below `lo` from above is strictly apart from the object before it.
fn valid_lo(step: &Step, lo: Option<&[Value]>) -> bool {
    let Some(lo) = lo else { return true };
    step.chains.iter().all(|c| {
        c.objects.windows(2).all(|pair| {
            let (p, s) = (&pair[0].entry, &pair[1].entry);
            let straddles = range(s).is_some_and(|(f, l)| {
                compare_keys(f, lo) == Ordering::Less && compare_keys(l, lo) != Ordering::Less
            });
            !straddles || apart(p, s)
        })
    })
}

/// Every object reaching to `hi` or past it from below is strictly apart from the next.
fn valid_hi(step: &Step, hi: Option<&[Value]>) -> bool {
    let Some(hi) = hi else { return true };
    step.chains.iter().all(|c| {
        c.objects.windows(2).all(|pair| {
            let (s, n) = (&pair[0].entry, &pair[1].entry);
            let straddles = range(s).is_some_and(|(f, l)| {
                compare_keys(f, hi) == Ordering::Less && compare_keys(l, hi) != Ordering::Less
            });
            !straddles || apart(s, n)
        })
    })
}

/// `a`'s last key is below `b`'s first.
fn apart(a: &ObjectEntry, b: &ObjectEntry) -> bool {
    match (range(a), range(b)) {
        (Some((_, l)), Some((f, _))) => compare_keys(l, f) == Ordering::Less,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::InputObject;
    use serde_json::json;

    fn object(name: &str, first: i64, last: i64) -> InputObject {
        InputObject {
            entry: ObjectEntry {
                key: name.into(),
                rows: 10,
                bytes: 100,
                run: 0,
                first_key: Some(vec![json!(first)]),
                last_key: Some(vec![json!(last)]),
                ranges: Default::default(),
                delta_stats: None,
            },
            order: 0,
        }
    }

    fn chain(name: &str, objects: &[(i64, i64)]) -> Chain {
        Chain {
            manifest: name.into(),
            run: 0,
            order: 0,
            objects: objects
                .iter()
                .enumerate()
                .map(|(i, &(f, l))| object(&format!("{name}{i}"), f, l))
                .collect(),
            sorted: true,
        }
    }

    fn names(step: &Step) -> Vec<String> {
        step.input_objects().map(|o| o.entry.key.clone()).collect()
    }

    /// Three chains overlap around 20–29, two around 0–9: the deeper range goes first.
    fn step() -> Step {
        Step {
            chains: vec![
                chain("a", &[(0, 9), (10, 19), (20, 29)]),
                chain("b", &[(0, 9)]),
                chain("c", &[(20, 25)]),
                chain("d", &[(21, 29)]),
            ],
            window: Window::default(),
        }
    }

    #[test]
    fn the_deepest_range_goes_first_within_the_input_bound() {
        let s = bounded(&step(), 300);
        assert_eq!(names(&s), ["a2", "c0", "d0"]);
        assert_eq!(s.window.lo, Some(vec![json!(20)]));
        assert_eq!(s.window.hi, None);
    }

    #[test]
    fn a_step_within_the_bound_is_merged_whole() {
        let s = bounded(&step(), 600);
        assert!(!s.window.is_bounded());
        assert_eq!(s.input_objects().count(), 6);
    }

    #[test]
    fn an_end_is_never_placed_where_written_back_rows_would_tie_a_neighbour() {
        // a0 ends on the key a1 starts with: a1's rows below 22, written back, would tie a0's.
        // The range grows to 20, where only a0 reaches below (its rows under 20 go back).
        let s = Step {
            chains: vec![chain("a", &[(0, 20), (20, 29)]), chain("b", &[(22, 29)])],
            window: Window::default(),
        };
        assert!(!valid_lo(&s, Some(&[json!(22)])));
        let bounded = bounded(&s, 200);
        assert_eq!(
            bounded.window.lo,
            Some(vec![json!(20)]),
            "{:?}",
            bounded.window
        );
        assert_eq!(names(&bounded), ["a0", "a1", "b0"]);
    }
}
