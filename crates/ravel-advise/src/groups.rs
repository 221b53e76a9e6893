//! Column sizes from whole groups.
//!
//! A sample of a few percent of the rows holds a row or two of a group that has a few dozen in
//! the table (a user's events, a URL's visits). A stream puts each group's rows side by side,
//! where the columns that follow the group (a user's region, browser and pages) repeat and
//! compress; in the row sample they do not, so it sizes those columns as the current order
//! stores them. A point lookup of the group then seems to fetch the columns it reads apart,
//! where the reader fetches them in one request with the (smaller) columns between.
//!
//! So for each stream that a candidate brings and the row sample holds thinly (a row's group holds
//! fewer than [`THIN`] of its other rows), a second sample draws every row of the groups whose
//! value hashes under the same fraction: the row sample's columns and those between the columns a
//! lookup of the group reads. Its sizes in a candidate's order over its sizes in the current order
//! give the candidate's size of each column, relative to the current layout's. The row sample still
//! decides which objects and pages a statement reads.

use std::collections::BTreeMap;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Schema, SchemaRef};
use ravel_store::Store;
use rayon::prelude::*;

use crate::AdviseError;
use crate::candidates::{Candidate, CandidateKind};
use crate::estimate::{self, ChunkSize, FileColumn, Resize};
use crate::sample::{self, Draw};
use crate::statements::Scan;

/// The sample's other rows of a row's group (on average over the rows) under which a stream's
/// groups are thin: a group of a few rows in the sample shows no runs of its own.
pub const THIN: f64 = 4.0;

/// Every row of the groups of `column` whose value hashes under the sample's fraction.
pub struct GroupSample {
    pub column: String,
    pub batch: RecordBatch,
}

/// What drawing group samples needs.
pub struct Draws<'a> {
    pub store: &'a Store,
    pub table: &'a str,
    /// The table's file schema.
    pub schema: &'a SchemaRef,
    pub scans: &'a [&'a Scan],
    /// The row sample's columns.
    pub sampled: &'a [String],
    pub target_rows: usize,
}

/// A sample of whole groups for each stream of `candidates` that the row sample holds thinly.
pub async fn read_all(
    draws: &Draws<'_>,
    candidates: &[Candidate],
    rows: &sample::Sample,
) -> Result<Vec<GroupSample>, AdviseError> {
    let mut out = Vec::new();
    for column in thin_streams(candidates, rows)? {
        let columns = columns(&column, draws.schema, draws.scans, draws.sampled);
        let s = sample::read(
            draws.store,
            draws.table,
            draws.schema,
            &columns,
            draws.target_rows,
            Draw::WholeGroups(&column),
        )
        .await?;
        tracing::debug!(column, rows = s.batch.num_rows(), "whole groups sampled");
        if s.batch.num_rows() > 0 {
            out.push(GroupSample {
                column,
                batch: s.batch,
            });
        }
    }
    Ok(out)
}

/// The stream a generated candidate with a clustering key sorts by first (without a key the
/// rows keep arrival order, and no stream leads), unless it is the current layout's (the row
/// sample's blocks hold runs of the table's own order, its groups' rows side by side).
fn new_stream(c: &Candidate, current: &Candidate) -> Option<String> {
    let stream = c.layout.stream.as_ref()?;
    let generated = c.kind == CandidateKind::Generated && c.layout.clustering_key.is_some();
    (generated && current.layout.stream.as_ref() != Some(stream)).then(|| stream.clone())
}

/// The new streams of `candidates` whose groups `rows` holds thinly: the group of a row drawn
/// at random holds fewer than [`THIN`] of its other rows. The rows that start its blocks tell:
/// they share no run of the table's order, so two of them of one value are two draws of a
/// group, and the share of their pairs that match is the chance that two rows share a group.
/// One group of a large share of the rows (or of the rows without a value) makes a stream not
/// thin, and its candidates keep the row sample's sizes.
fn thin_streams(
    candidates: &[Candidate],
    rows: &sample::Sample,
) -> Result<Vec<String>, AdviseError> {
    let n = rows.block_starts.len();
    if n < 2 {
        return Ok(Vec::new());
    }
    let starts =
        arrow::array::UInt32Array::from_iter_values(rows.block_starts.iter().map(|&s| s as u32));
    let mut streams: Vec<String> = candidates
        .iter()
        .filter_map(|c| new_stream(c, &candidates[0]))
        .collect();
    streams.sort_unstable();
    streams.dedup();
    let mut out = Vec::new();
    for s in streams {
        let Some(a) = rows.batch.column_by_name(&s) else {
            continue;
        };
        let picked = arrow::compute::take(a.as_ref(), &starts, None)?;
        let pairs = (n * (n - 1) / 2) as f64;
        let share = matching_pairs(&picked)? as f64 / pairs;
        let per_group = share * rows.batch.num_rows() as f64;
        tracing::debug!(stream = s, per_group, "sampled rows of a row's group");
        if per_group < THIN {
            out.push(s);
        }
    }
    Ok(out)
}

/// Pairs of rows of `a` of one value (by a 64-bit hash: a collision among a sample's values
/// is rare).
fn matching_pairs(a: &ArrayRef) -> Result<usize, AdviseError> {
    let mut hashes = sample::hashes(a)?;
    hashes.sort_unstable();
    Ok(hashes
        .chunk_by(|x, y| x == y)
        .map(|run| run.len() * (run.len() - 1) / 2)
        .sum())
}

/// The columns a sample of `group`'s groups reads, in file order: the row sample's, and those
/// between the first and the last column that a statement comparing `group` for equality
/// reads (a lookup fetches them with the columns it reads when they are small enough).
fn columns(group: &str, schema: &Schema, scans: &[&Scan], sampled: &[String]) -> Vec<String> {
    let fields = schema.fields();
    let mut keep: Vec<bool> = fields.iter().map(|f| sampled.contains(f.name())).collect();
    let lookups = scans.iter().filter(|s| {
        s.predicates
            .iter()
            .any(|p| p.column == group && matches!(p.test, ravel_query::prune::Test::Equal { .. }))
    });
    for scan in lookups {
        let read: Vec<usize> = (0..fields.len())
            .filter(|&i| scan.columns.contains(fields[i].name()))
            .collect();
        if let (Some(&first), Some(&last)) = (read.first(), read.last()) {
            keep[first..=last].iter_mut().for_each(|k| *k = true);
        }
    }
    fields
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(f, _)| f.name().clone())
        .collect()
}

/// Per column of a group sample, its bytes in a candidate's order over its bytes in the current
/// layout's order, of its dictionary page and of the rest apart.
pub type Ratios = BTreeMap<String, Resize>;

/// Per candidate, the [`Ratios`] of its stream's group sample; `None` for a candidate whose
/// stream has no group sample.
pub fn ratios(
    candidates: &[Candidate],
    groups: &[GroupSample],
    table: &estimate::Table<'_>,
) -> Result<Vec<Option<Ratios>>, AdviseError> {
    let mut out = vec![None; candidates.len()];
    for g in groups {
        let mine: Vec<usize> = (1..candidates.len())
            .filter(|&i| new_stream(&candidates[i], &candidates[0]).as_ref() == Some(&g.column))
            .collect();
        let picked: Vec<&Candidate> = std::iter::once(0)
            .chain(mine.iter().copied())
            .map(|i| &candidates[i])
            .collect();
        let totals = totals_by_order(&g.batch, &picked, table)?;
        let names = g.batch.schema_ref().fields().iter().map(|f| f.name());
        for (k, &i) in mine.iter().enumerate() {
            let (this, current) = (&totals[k + 1], &totals[0]);
            out[i] = Some(
                names
                    .clone()
                    .zip(this.iter().zip(current))
                    .filter(|(_, (_, cur))| cur.bytes > 0)
                    .map(|(n, (t, cur))| (n.clone(), ratio(*cur, *t)))
                    .collect(),
            );
        }
    }
    Ok(out)
}

/// Each candidate's column totals of `batch` put in its order, the candidates that put it in
/// the same order sharing one encoding.
fn totals_by_order(
    batch: &RecordBatch,
    candidates: &[&Candidate],
    table: &estimate::Table<'_>,
) -> Result<Vec<Vec<ChunkSize>>, AdviseError> {
    let orders = candidates
        .iter()
        .map(|c| estimate::ordered(batch, c))
        .collect::<Result<Vec<_>, AdviseError>>()?;
    let first: Vec<usize> = (0..orders.len())
        .map(|i| {
            (0..=i)
                .find(|&j| orders[j].signature.same_order(&orders[i].signature))
                .unwrap_or(i)
        })
        .collect();
    let encoded = (0..orders.len())
        .into_par_iter()
        .map(|i| match first[i] == i {
            true => estimate::column_totals(batch, &orders[i].order, table).map(Some),
            false => Ok(None),
        })
        .collect::<Result<Vec<Option<Vec<ChunkSize>>>, AdviseError>>()?;
    Ok(first
        .iter()
        .map(|&f| encoded[f].clone().expect("every order's first is encoded"))
        .collect())
}

/// `to` over `from`, of the dictionary page and of the rest apart where both have both, else
/// of the whole chunk (as [`estimate::PartScale`] scales a chunk).
fn ratio(from: ChunkSize, to: ChunkSize) -> Resize {
    let s = estimate::PartScale::new(from, to);
    Resize {
        dictionary: s.dictionary,
        data: s.data,
    }
}

/// The factors on each file column's scaled chunk under a candidate whose group sample gives
/// `ratios`: the group sample's ratio of its bytes to the current order's, over the ratio the
/// row sample already gives it (`row_candidate` over `row_current`, per sampled column), each
/// of the dictionary page and of the rest apart.
pub fn resize(
    ratios: &Ratios,
    file_columns: &[FileColumn],
    row_current: &[ChunkSize],
    row_candidate: &[ChunkSize],
) -> Vec<Resize> {
    let over = |g: f64, row: f64| if row > 0.0 { g / row } else { g };
    file_columns
        .iter()
        .map(|fc| {
            let Some(&g) = ratios.get(&fc.name) else {
                return Resize::NONE;
            };
            let row = fc
                .sampled
                .and_then(|c| Some(ratio(*row_current.get(c)?, *row_candidate.get(c)?)))
                .unwrap_or(Resize::NONE);
            Resize {
                dictionary: over(g.dictionary, row.dictionary),
                data: over(g.data, row.data),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use ravel_layout::{BucketWidth, ClusteringKey, Layout};
    use ravel_query::prune::{Predicate, Test};

    use super::*;

    const ROWS: i64 = 4_000;

    /// Rows in arrival order, each of a user drawn at random of `users`; the user's region
    /// follows the user.
    fn rows(users: u64) -> RecordBatch {
        let user = |i: i64| {
            // splitmix64's finalizer: a user drawn at random per row.
            let mut z = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % users) as i64
        };
        RecordBatch::try_from_iter([
            (
                "t",
                Arc::new(Int64Array::from_iter_values(0..ROWS)) as ArrayRef,
            ),
            (
                "k",
                Arc::new(Int64Array::from_iter_values((0..ROWS).map(|i| i % 3))) as ArrayRef,
            ),
            (
                "u",
                Arc::new(Int64Array::from_iter_values((0..ROWS).map(user))) as ArrayRef,
            ),
            (
                "region",
                Arc::new(StringArray::from_iter_values(
                    (0..ROWS).map(|i| format!("region {}", user(i) * 37 % 211)),
                )) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    fn candidate(stream: Option<&str>, kind: CandidateKind) -> Candidate {
        Candidate {
            name: format!("{stream:?}"),
            kind,
            layout: Layout {
                stream: stream.map(String::from),
                time: Some("t".into()),
                clustering_key: Some(ClusteringKey {
                    columns: vec!["k".into()],
                    bucket_width: BucketWidth::from_seconds(86_400).unwrap(),
                }),
                ..Layout::default()
            },
        }
    }

    /// The current layout (no stream), and candidates streamed by `u` and by `region`.
    fn current_and_two_streams() -> [Candidate; 3] {
        [
            candidate(None, CandidateKind::Current),
            candidate(Some("u"), CandidateKind::Generated),
            candidate(Some("region"), CandidateKind::Generated),
        ]
    }

    fn sample(batch: RecordBatch, block_starts: Vec<usize>) -> sample::Sample {
        sample::Sample {
            batch,
            block_starts,
            table_rows: 100 * ROWS as u64,
            table_bytes: 0,
            objects: 4,
            column_bytes: Default::default(),
            page_rows: Default::default(),
            page_index_bytes: 0.0,
            object_bytes: 0.0,
            bloom_bytes: Default::default(),
            dictionary_bytes: Default::default(),
        }
    }

    #[test]
    fn a_stream_is_thin_when_a_rows_group_holds_few_of_the_sample() {
        let candidates = current_and_two_streams();
        // Every 7th row starts a block: 572 rows spread over the 4,000.
        let starts: Vec<usize> = (0..ROWS as usize).step_by(7).collect();
        // A user has 2 of the rows, a region about 19.
        let s = sample(rows(2_000), starts.clone());
        assert_eq!(thin_streams(&candidates, &s).unwrap(), ["u"]);
        // At 8 rows a user, a user is no longer thin.
        let s = sample(rows(500), starts);
        assert!(thin_streams(&candidates, &s).unwrap().is_empty());
        // A sample of every row has no blocks: it holds every group whole.
        let whole = sample(rows(2_000), Vec::new());
        assert!(thin_streams(&candidates, &whole).unwrap().is_empty());
    }

    #[test]
    fn a_group_samples_columns_are_the_rows_and_those_between_a_lookups_reads() {
        let names = ["a", "u", "b", "c", "d", "e"];
        let schema = Schema::new(
            names
                .iter()
                .map(|n| arrow::datatypes::Field::new(*n, arrow::datatypes::DataType::Int64, true))
                .collect::<Vec<_>>(),
        );
        let scan = |group: &str, read: &[&str]| Scan {
            filters: Vec::new(),
            columns: read.iter().map(|c| c.to_string()).collect(),
            group_by: BTreeSet::new(),
            filtered: BTreeSet::from([group.to_string()]),
            top_k: None,
            predicates: vec![Predicate {
                column: group.into(),
                test: Test::Equal {
                    values: 1,
                    text: false,
                    strings: Vec::new(),
                },
            }],
        };
        let (lookup, other) = (scan("u", &["u", "c"]), scan("a", &["a", "e"]));
        let sampled = ["e".to_string()];
        let got = columns("u", &schema, &[&lookup, &other], &sampled);
        assert_eq!(got, ["u", "b", "c", "e"]);
    }

    #[test]
    fn a_column_that_follows_the_group_shrinks_under_its_stream() {
        let candidates = current_and_two_streams();
        let groups = [GroupSample {
            column: "u".into(),
            batch: rows(500),
        }];
        let (none, lookups) = (BTreeSet::new(), estimate::Lookups::new());
        let table = estimate::Table {
            objects: 2,
            dictionaries: &none,
            lookups: &lookups,
        };
        let r = ratios(&candidates, &groups, &table).unwrap();
        assert!(
            r[0].is_none() && r[2].is_none(),
            "only the stream sampled whole"
        );
        let streamed = r[1].as_ref().unwrap();
        assert!(streamed["region"].data < 0.8, "{streamed:?}");
        assert!(streamed["u"].data < 1.0, "{streamed:?}");
    }

    #[test]
    fn resizing_takes_the_group_ratio_over_what_the_row_sample_gives() {
        let whole = |k: f64| Resize {
            dictionary: k,
            data: k,
        };
        let ratios = BTreeMap::from([
            ("a".to_string(), whole(0.5)),
            ("b".to_string(), whole(0.6)),
            (
                "d".to_string(),
                Resize {
                    dictionary: 0.5,
                    data: 0.25,
                },
            ),
        ]);
        let column = |name: &str, sampled: Option<usize>| FileColumn {
            name: name.into(),
            sampled,
            bytes: 1.0,
            page_rows: 1.0,
            dictionary_share: 0.0,
        };
        let files = [
            column("a", Some(0)),
            column("b", None),
            column("c", None),
            column("d", Some(1)),
        ];
        let size = |bytes, dictionary| ChunkSize { bytes, dictionary };
        // The row sample: `a` 0.8 of the current order's, `d`'s dictionary the same and its
        // data pages half.
        let current = [size(100, 0), size(300, 100)];
        let candidate = [size(80, 0), size(200, 100)];
        let k = resize(&ratios, &files, &current, &candidate);
        assert!((k[0].data - 0.625).abs() < 1e-9, "{k:?}");
        assert!((k[0].dictionary - 0.625).abs() < 1e-9, "{k:?}");
        assert_eq!(k[1], whole(0.6));
        assert_eq!(k[2], Resize::NONE);
        assert_eq!(
            k[3],
            Resize {
                dictionary: 0.5,
                data: 0.5
            }
        );
    }
}
