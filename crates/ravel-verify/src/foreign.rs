//! Objects other Delta writers added: not clustered (a note, not a violation; maintenance and
//! `compact` take them in), but each must be stored, with the size and, when its `add` records
//! them, the rows the log says, and hold no column the table's schema lacks (ravel-load could
//! never take it in).

use std::sync::Arc;

use arrow::datatypes::Schema;
use parquet::file::metadata::ParquetMetaData;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use ravel_log::ForeignObject;

use crate::footer::read_footer;
use crate::{Problem, Violation};

/// What the foreign objects hold, as their footers say.
#[derive(Debug, Default)]
pub(crate) struct Foreign {
    /// The objects' keys.
    pub keys: Vec<String>,
    pub rows: u64,
    pub bytes: u64,
    pub violations: Vec<Violation>,
    pub notes: Vec<String>,
}

/// Checks each of `foreign` against the store and, with `schema` (the table's), its columns.
pub(crate) async fn check_foreign(
    store: &Arc<dyn ObjectStore>,
    foreign: &[ForeignObject],
    schema: Option<&Schema>,
) -> Foreign {
    let mut out = Foreign {
        keys: foreign.iter().map(|f| f.key.clone()).collect(),
        ..Foreign::default()
    };
    for f in foreign {
        let mut bad = |problem| out.violations.push(Violation::new(f.key.clone(), problem));
        let path = Path::from(f.key.as_str());
        let head = match store.head(&path).await {
            Ok(h) => h,
            Err(e) => {
                bad(Problem::ForeignMissing { cause: e.into() });
                continue;
            }
        };
        if head.size != f.bytes {
            bad(Problem::ForeignSize {
                stored: head.size,
                log: f.bytes,
            });
        }
        let meta = match read_footer(store.as_ref(), &path, head.size).await {
            Ok(meta) => meta,
            Err(e) => {
                bad(Problem::NotParquet { cause: e.into() });
                continue;
            }
        };
        if let Some(column) = schema.and_then(|s| extra_column(f, &meta, s)) {
            bad(Problem::ForeignExtraColumn {
                column,
                version: f.version,
            });
        }
        let rows = meta.file_metadata().num_rows() as u64;
        if f.rows.is_some_and(|r| r != rows) {
            bad(Problem::ForeignRows {
                stored: rows,
                log: f.rows.unwrap_or(0),
            });
        }
        out.rows += rows;
        out.bytes += head.size;
    }
    if !foreign.is_empty() {
        out.notes.push(format!(
            "{} object(s) another Delta writer added are not clustered (no key ranges, no Bloom filters); in a table with a clustering key, maintenance or compact takes them in",
            foreign.len()
        ));
    }
    out
}

/// The first column of `f` (in its footer, then in its partition values) that `schema` lacks.
fn extra_column(f: &ForeignObject, meta: &ParquetMetaData, schema: &Schema) -> Option<String> {
    let stored = meta
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields();
    stored
        .iter()
        .map(|c| c.name())
        .chain(f.partition_values.keys().map(String::as_str))
        .find(|name| schema.field_with_name(name).is_err())
        .map(str::to_string)
}
