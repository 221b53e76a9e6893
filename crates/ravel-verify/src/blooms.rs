//! Bloom filters. In footers they sit exactly on the columns the layout's Bloom scope covers;
//! the load's sidecar is stored with the recorded size, holds one section per string column of
//! the scope, each one readable filter per object; and, deep, every value of an object passes
//! its filter (a reader that trusts the filter would otherwise lose rows).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_bloom::Filter;
use ravel_layout::Layout;
use ravel_manifest::{BloomIndex, Manifest};

use crate::Problem;
use crate::report::Findings;

/// The filters of one sidecar column, one per object of the load.
pub(crate) struct ColumnFilters {
    pub column: String,
    pub filters: Vec<Filter>,
}

/// One object's filter of one column.
pub(crate) struct ObjectFilter<'a> {
    pub column: &'a str,
    pub filter: &'a Filter,
}

/// The filters a load's sidecar holds (empty when there is nothing to check).
#[derive(Default)]
pub(crate) struct Sidecar {
    pub columns: Vec<ColumnFilters>,
}

impl Sidecar {
    /// The filters of the object at `position` in its manifest.
    pub fn of_object(&self, position: usize) -> Vec<ObjectFilter<'_>> {
        self.columns
            .iter()
            .map(|c| ObjectFilter {
                column: &c.column,
                filter: &c.filters[position],
            })
            .collect()
    }
}

/// A footer column's Bloom filter against the Bloom scope: there exactly when `wanted`.
pub(crate) fn footer_problem(
    layout: &Layout,
    column: &str,
    has: bool,
    wanted: bool,
) -> Option<Problem> {
    let (column, scope) = (column.to_string(), layout.bloom.scope.to_string());
    match (has, wanted) {
        (true, false) => Some(Problem::BloomOutsideScope { column, scope }),
        (false, true) => Some(Problem::BloomMissing { column, scope }),
        _ => None,
    }
}

/// The string columns of the layout's Bloom scope in `m`'s schema, sorted.
fn expected_columns(m: &Manifest, layout: &Layout) -> Vec<String> {
    let mut expected: Vec<String> = layout
        .bloom
        .scope
        .columns(&m.schema)
        .into_iter()
        .filter(|c| {
            m.schema
                .field_with_name(c)
                .is_ok_and(|f| ravel_bloom::supported(f.data_type()))
        })
        .map(str::to_string)
        .collect();
    expected.sort_unstable();
    expected
}

/// Checks the sidecar of the load `m` (manifest `manifest`); returns its filters for the deep
/// check.
pub(crate) async fn check_sidecar(
    store: &Arc<dyn ObjectStore>,
    manifest: &str,
    m: &Manifest,
    layout: &Layout,
    out: &mut Findings,
) -> Sidecar {
    // A manifest without a sidecar is valid (readers then prune by ranges alone).
    let Some(index) = &m.blooms else {
        return Sidecar::default();
    };
    if index.format != ravel_bloom::FORMAT {
        // Readers of this build skip it (they keep every object of the load), so no answer
        // depends on it: a note, not a violation.
        out.notes.push(format!(
            "Bloom sidecar {} of manifest {manifest} has format {}, which this build does not \
             read (it reads format {}): statements keep every object of that load instead of \
             pruning by it; loading the data again writes a sidecar of the current format",
            index.key,
            index.format,
            ravel_bloom::FORMAT
        ));
        return Sidecar::default();
    }
    let recorded: Vec<String> = index.columns.keys().cloned().collect();
    let expected = expected_columns(m, layout);
    if recorded != expected {
        out.violation(&index.key, Problem::SidecarColumns { recorded, expected });
    }
    match read_sidecar(store.as_ref(), manifest, index).await {
        Ok(bytes) => decode(&bytes, index, m.objects.len(), out),
        Err(problem) => {
            out.violation(&index.key, problem);
            Sidecar::default()
        }
    }
}

/// The sidecar's bytes, stored with the recorded size and the magic.
async fn read_sidecar(
    store: &dyn ObjectStore,
    manifest: &str,
    index: &BloomIndex,
) -> Result<Bytes, Problem> {
    let bytes = match store.get(&Path::from(index.key.as_str())).await {
        Ok(got) => got.bytes().await,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(Problem::SidecarMissing {
                manifest: manifest.to_string(),
            });
        }
        Err(e) => Err(e),
    };
    let bytes = bytes.map_err(|e| Problem::SidecarUnreadable { cause: e.into() })?;
    if bytes.len() as u64 != index.bytes || !bytes.starts_with(ravel_bloom::MAGIC) {
        return Err(Problem::SidecarSize {
            stored: bytes.len() as u64,
            manifest: index.bytes,
        });
    }
    Ok(bytes)
}

/// Each section of the sidecar, decoded into one filter per object.
fn decode(bytes: &[u8], index: &BloomIndex, objects: usize, out: &mut Findings) -> Sidecar {
    let mut sidecar = Sidecar::default();
    for (column, s) in &index.columns {
        let section = bytes.get(s.offset as usize..(s.offset + s.len) as usize);
        match section.map(|sec| ravel_bloom::decode_section(sec, objects)) {
            Some(Ok(filters)) => sidecar.columns.push(ColumnFilters {
                column: column.clone(),
                filters,
            }),
            Some(Err(e)) => out.violation(
                &index.key,
                Problem::SidecarSection {
                    column: column.clone(),
                    cause: e.into(),
                },
            ),
            None => out.violation(
                &index.key,
                Problem::SidecarSectionOutside {
                    column: column.clone(),
                },
            ),
        }
    }
    sidecar
}

/// Every value of an object's Bloom columns must pass the object's filter.
pub(crate) fn value_problems(
    filters: &[ObjectFilter<'_>],
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Vec<Problem> {
    let mut out = Vec::new();
    for f in filters {
        let Ok(c) = schema.index_of(f.column) else {
            out.push(Problem::BloomColumnMissing {
                column: f.column.to_string(),
            });
            continue;
        };
        if let Some(missing) = first_missing(f.filter, c, batches) {
            out.push(Problem::NotInBloom {
                column: f.column.to_string(),
                batch: missing.batch,
                row: missing.row,
            });
        }
    }
    out
}

/// Where a value sits in an object's batches.
struct At {
    batch: usize,
    row: usize,
}

/// The first value of column `c` the filter does not hold.
fn first_missing(filter: &Filter, c: usize, batches: &[RecordBatch]) -> Option<At> {
    batches.iter().enumerate().find_map(|(batch, b)| {
        let a = b.column(c);
        (0..a.len())
            .find(|&r| {
                ravel_bloom::value_bytes(a.as_ref(), r).is_some_and(|v| !filter.may_contain(v))
            })
            .map(|row| At { batch, row })
    })
}
