//! Candidate layouts, generated from what the statements compare and group by:
//! - stream: the columns compared for equality (`=`, `IN`);
//! - key columns: the columns compared by range or equality, and grouped by;
//! - time: the layout's time column (else the time-typed column ranges name most), bucketed by
//!   the time the rows of the statements' ranges cover (measured on the sample), by a day, and
//!   by the whole time the sample covers;
//! - Bloom scope: the string columns compared for equality, but the stream (its ranges find a
//!   value's objects).
//!
//! The current layout and arrival order ("no key") always come first, as baselines.

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::Schema;
use ravel_layout::{
    Bloom, BloomScope, BucketWidth, ClusteringKey, Layout, is_orderable, is_time_type,
};
use ravel_query::prune::Test;
use serde::Serialize;

use crate::statements::Scan;

/// One layout to estimate.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// `current`, `arrival`, or the layout in short (`CounterID / 1d / EventDate,UserID /
    /// bloom none`).
    pub name: String,
    pub layout: Layout,
    pub kind: CandidateKind,
}

/// Where a candidate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateKind {
    /// The table's layout as it is.
    Current,
    /// No clustering key: rows in arrival order.
    Arrival,
    /// Generated from the statements.
    Generated,
}

/// A statement's scan with the statement's weight.
#[derive(Debug, Clone, Copy)]
pub struct Weighted<'a> {
    pub weight: u64,
    pub scan: &'a Scan,
}

/// Time that the rows of one statement's range cover, with the statement's weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    pub seconds: u64,
    pub weight: u64,
}

/// How much the statements lean on each column, by their weights.
#[derive(Debug, Default)]
struct Tally {
    equal: BTreeMap<String, u64>,
    text_equal: BTreeMap<String, u64>,
    range: BTreeMap<String, u64>,
    group: BTreeMap<String, u64>,
}

fn tally(scans: &[Weighted<'_>]) -> Tally {
    let mut t = Tally::default();
    for Weighted { weight: w, scan } in scans {
        for p in &scan.predicates {
            match &p.test {
                Test::Equal { text, .. } => {
                    *t.equal.entry(p.column.clone()).or_default() += w;
                    if *text {
                        *t.text_equal.entry(p.column.clone()).or_default() += w;
                    }
                }
                Test::Range { .. } => *t.range.entry(p.column.clone()).or_default() += w,
            }
        }
        for g in &scan.group_by {
            *t.group.entry(g.clone()).or_default() += w;
        }
    }
    t
}

/// The columns of `counts` ordered by weight (heaviest first, then by name).
fn ranked(counts: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = counts.iter().map(|(c, w)| (c.clone(), *w)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// What the generated candidates are made from.
pub struct Inputs<'a> {
    pub current: &'a Layout,
    pub schema: &'a Schema,
    pub scans: &'a [Weighted<'a>],
    /// Seconds the sample's time column covers (its newest minus its oldest), if any.
    pub time_span: Option<u64>,
    /// Seconds of time the rows of each bounded range cover, with the statement's weight.
    pub range_spans: &'a [Span],
    /// How many generated candidates at most.
    pub max: usize,
}

/// The baselines, then up to `max` generated candidates, most promising first.
pub fn candidates(i: &Inputs<'_>) -> Vec<Candidate> {
    let time = time_column(i.current, i.scans, i.schema);
    let t = tally(i.scans);
    let mut out = vec![
        Candidate {
            name: "current".into(),
            layout: i.current.clone(),
            kind: CandidateKind::Current,
        },
        Candidate {
            name: "arrival".into(),
            layout: Layout {
                clustering_key: None,
                ..i.current.clone()
            },
            kind: CandidateKind::Arrival,
        },
    ];
    let Some(time) = time else {
        return out;
    };
    let scored = generated(i, &t, &time);
    for (layout, _) in scored.into_iter().take(i.max) {
        if out.iter().any(|c| c.layout.same_settings(&layout)) {
            continue;
        }
        out.push(Candidate {
            name: short_name(&layout),
            layout,
            kind: CandidateKind::Generated,
        });
    }
    out
}

/// The current time column, else the time-typed column that ranges name most.
pub fn time_column(current: &Layout, scans: &[Weighted<'_>], schema: &Schema) -> Option<String> {
    if let Some(t) = &current.time {
        return Some(t.clone());
    }
    let mut ranges = BTreeMap::new();
    for Weighted { weight: w, scan: s } in scans {
        for p in &s.predicates {
            if matches!(p.test, Test::Range { .. }) {
                *ranges.entry(p.column.clone()).or_insert(0u64) += w;
            }
        }
    }
    ranked(&ranges)
        .into_iter()
        .map(|(c, _)| c)
        .find(|c| time_typed(schema, c))
}

fn time_typed(schema: &Schema, c: &str) -> bool {
    schema
        .field_with_name(c)
        .is_ok_and(|f| is_time_type(f.data_type()))
}

fn orderable(schema: &Schema, c: &str) -> bool {
    schema
        .field_with_name(c)
        .is_ok_and(|f| is_orderable(f.data_type()) && !f.data_type().is_floating())
}

/// Every generated layout with its score (the statement weight its stream and keys serve).
fn generated(i: &Inputs<'_>, t: &Tally, time: &str) -> Vec<(Layout, f64)> {
    let ok = |c: &str| c != time && orderable(i.schema, c);
    let mut streams: Vec<(Option<String>, u64)> = ranked(&t.equal)
        .into_iter()
        .filter(|(c, _)| ok(c))
        .take(3)
        .map(|(c, w)| (Some(c), w))
        .collect();
    streams.push((None, 0));
    let mut key_weights = BTreeMap::new();
    for (c, w) in t.equal.iter().chain(&t.range) {
        *key_weights.entry(c.clone()).or_insert(0u64) += 2 * w;
    }
    for (c, w) in &t.group {
        *key_weights.entry(c.clone()).or_insert(0u64) += w;
    }
    let keys: Vec<(String, u64)> = ranked(&key_weights)
        .into_iter()
        .filter(|(c, _)| ok(c))
        .collect();
    let buckets = bucket_widths(i);
    let bloom = bloom_scope(i, t);
    let mut out = Vec::new();
    for (stream, sw) in &streams {
        for key in key_sets(&keys, stream.as_deref(), i.current) {
            let kw: f64 = key
                .iter()
                .enumerate()
                .map(|(n, k)| key_weights.get(k).copied().unwrap_or(0) as f64 / (2 << n) as f64)
                .sum();
            for (b, width) in buckets.iter().enumerate() {
                let layout = Layout {
                    stream: stream.clone(),
                    time: Some(time.to_string()),
                    clustering_key: Some(ClusteringKey {
                        columns: key.clone(),
                        bucket_width: *width,
                    }),
                    bloom: without(&bloom, stream.as_deref()),
                    ..i.current.clone()
                };
                if layout.validate_for(i.schema).is_ok() {
                    out.push((layout, *sw as f64 + kw - b as f64 * 1e-3));
                }
            }
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

/// Key column lists for one stream: the heaviest one or two columns other than the stream;
/// with none, the current layout's keys.
fn key_sets(keys: &[(String, u64)], stream: Option<&str>, current: &Layout) -> Vec<Vec<String>> {
    let free: Vec<&String> = keys
        .iter()
        .map(|(c, _)| c)
        .filter(|c| Some(c.as_str()) != stream)
        .take(3)
        .collect();
    let mut sets: Vec<Vec<String>> = match free.as_slice() {
        [] => vec![],
        [a] => vec![vec![(*a).clone()]],
        [a, b, ..] => vec![vec![(*a).clone(), (*b).clone()], vec![(*a).clone()]],
    };
    if let Some(k) = &current.clustering_key {
        let kept: Vec<String> = k
            .columns
            .iter()
            .filter(|c| Some(c.as_str()) != stream)
            .cloned()
            .collect();
        if !kept.is_empty() && !sets.contains(&kept) {
            sets.push(kept);
        }
    }
    sets
}

/// The weighted median span of the statements' time ranges (the nearest standard width), the current width, a day, and the whole span of the sample, in that order.
fn bucket_widths(i: &Inputs<'_>) -> Vec<BucketWidth> {
    const STANDARD: [u64; 6] = [
        3_600,
        6 * 3_600,
        86_400,
        7 * 86_400,
        30 * 86_400,
        365 * 86_400,
    ];
    let mut secs = Vec::new();
    if let Some(median) = weighted_median(i.range_spans) {
        // The nearest standard width, on a log scale: the rows of a day's range span a day
        // less a second.
        let distance = |s: &u64| ((*s as f64).ln() - (median.max(1) as f64).ln()).abs();
        let fit = STANDARD
            .iter()
            .min_by(|a, b| distance(a).total_cmp(&distance(b)));
        secs.extend(fit.copied());
    }
    if let Some(k) = &i.current.clustering_key {
        secs.push(k.bucket_width.seconds());
    }
    secs.push(86_400);
    if let Some(span) = i.time_span {
        let days = span.div_ceil(86_400) + 1;
        secs.push(days * 86_400);
    }
    let mut out: Vec<BucketWidth> = Vec::new();
    for s in secs {
        if let Ok(b) = BucketWidth::from_seconds(s)
            && !out.contains(&b)
        {
            out.push(b);
        }
    }
    out
}

fn weighted_median(spans: &[Span]) -> Option<u64> {
    let mut v = spans.to_vec();
    v.sort();
    let total: u64 = v.iter().fold(0u64, |t, s| t.saturating_add(s.weight));
    let mut seen = 0;
    for s in v {
        seen += s.weight;
        if 2 * seen >= total {
            return Some(s.seconds);
        }
    }
    None
}

/// The string columns compared for equality, else no Bloom filters at all.
fn bloom_scope(i: &Inputs<'_>, t: &Tally) -> Bloom {
    let cols: Vec<String> = ranked(&t.text_equal)
        .into_iter()
        .map(|(c, _)| c)
        .filter(|c| {
            i.schema
                .field_with_name(c)
                .is_ok_and(|f| ravel_layout::is_text(f.data_type()))
        })
        .collect();
    Bloom {
        scope: if cols.is_empty() {
            BloomScope::None
        } else {
            BloomScope::Columns(cols)
        },
        fpp: i.current.bloom.fpp,
    }
}

/// `bloom` without the stream column: the manifest's ranges of the column every object is
/// sorted by first find a looked-up value's objects without a filter.
fn without(bloom: &Bloom, stream: Option<&str>) -> Bloom {
    let BloomScope::Columns(cols) = &bloom.scope else {
        return bloom.clone();
    };
    let rest: Vec<String> = cols
        .iter()
        .filter(|c| Some(c.as_str()) != stream)
        .cloned()
        .collect();
    Bloom {
        scope: if rest.is_empty() {
            BloomScope::None
        } else {
            BloomScope::Columns(rest)
        },
        fpp: bloom.fpp,
    }
}

/// `stream / bucket / keys / bloom`, as a short name.
pub fn short_name(l: &Layout) -> String {
    let Some(k) = &l.clustering_key else {
        return "arrival".into();
    };
    format!(
        "{} / {} / {} / bloom {}",
        l.stream.as_deref().unwrap_or("-"),
        k.bucket_width,
        k.columns.join(","),
        l.bloom.scope
    )
}
