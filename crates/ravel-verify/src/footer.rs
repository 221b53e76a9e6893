//! An object's footer against its manifest and layout: one row group; the manifest's columns;
//! its row count; the layout generation, sort key, first and last key in its metadata; a page
//! index and (exactly where the Bloom scope says) a Bloom filter on every column; the stream
//! column first in `sorting_columns`.

use std::collections::{BTreeMap, HashSet};

use arrow::datatypes::{DataType, Schema};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::errors::ParquetError;
use parquet::file::metadata::{FooterTail, ParquetMetaData, ParquetMetaDataReader};
use ravel_layout::Layout;
use ravel_manifest::{Manifest, ObjectEntry};
use serde_json::Value;

use crate::{Problem, blooms, order};

/// Why a footer does not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FooterError {
    #[error("{size} bytes is too short for Parquet")]
    TooShort { size: u64 },
    #[error("footer length {len} exceeds the object")]
    TooLong { len: u64 },
    #[error(transparent)]
    Store(#[from] object_store::Error),
    #[error(transparent)]
    Parquet(#[from] ParquetError),
}

/// The footer of a Parquet object: two ranged reads (the 8-byte tail, then the metadata).
pub(crate) async fn read_footer(
    store: &dyn ObjectStore,
    path: &Path,
    size: u64,
) -> Result<ParquetMetaData, FooterError> {
    if size < 12 {
        return Err(FooterError::TooShort { size });
    }
    let tail = store.get_range(path, size - 8..size).await?;
    let tail = FooterTail::try_new(tail[..].try_into().expect("8 bytes"))?;
    let len = tail.metadata_length() as u64;
    if len + 12 > size {
        return Err(FooterError::TooLong { len });
    }
    let footer = store.get_range(path, size - 8 - len..size - 8).await?;
    Ok(ParquetMetaDataReader::decode_metadata(&footer)?)
}

/// What the footer says against what the manifest and the layout say.
pub(crate) fn footer_problems(
    m: &Manifest,
    layout: &Layout,
    entry: &ObjectEntry,
    meta: &ParquetMetaData,
) -> Vec<Problem> {
    let mut out = shape_problems(m, entry, meta);
    out.extend(metadata_problems(m, layout, entry, meta));
    out.extend(column_problems(m, layout, meta));
    out
}

/// One row group, the manifest's columns, the manifest's row count.
fn shape_problems(m: &Manifest, entry: &ObjectEntry, meta: &ParquetMetaData) -> Vec<Problem> {
    let mut out = Vec::new();
    let count = meta.num_row_groups();
    if count != 1 {
        out.push(Problem::RowGroups { count });
    }
    let file = meta.file_metadata();
    match parquet::arrow::parquet_to_arrow_schema(file.schema_descr(), file.key_value_metadata()) {
        Ok(schema) if columns(&schema) != columns(&m.schema) => out.push(Problem::ColumnsDiffer),
        Ok(_) => {}
        Err(e) => out.push(Problem::NoArrowSchema { cause: e.into() }),
    }
    let stored = file.num_rows() as u64;
    if stored != entry.rows {
        out.push(Problem::RowCountMismatch {
            stored,
            manifest: entry.rows,
        });
    }
    out
}

/// The names and types of a schema's columns, in order.
fn columns(s: &Schema) -> Vec<(&String, &DataType)> {
    s.fields()
        .iter()
        .map(|f| (f.name(), f.data_type()))
        .collect()
}

/// The footer's key-value metadata: layout generation, sort key (clustered), first and last key.
fn metadata_problems(
    m: &Manifest,
    layout: &Layout,
    entry: &ObjectEntry,
    meta: &ParquetMetaData,
) -> Vec<Problem> {
    let kv: BTreeMap<&str, &str> = meta
        .file_metadata()
        .key_value_metadata()
        .map(|kv| {
            kv.iter()
                .filter_map(|e| Some((e.key.as_str(), e.value.as_deref()?)))
                .collect()
        })
        .unwrap_or_default();
    let footer = |name: &str| kv.get(name).map(|v| v.to_string());
    let mut out = Vec::new();
    let generation = footer("ravel.layout_generation");
    if generation != Some(m.layout_generation.to_string()) {
        out.push(Problem::FooterGeneration {
            footer: generation,
            manifest: m.layout_generation,
        });
    }
    let sort_key = m.sort_key.join(", ");
    let footer_sort_key = footer("ravel.sort_key");
    if layout.clustering_key.is_some() && footer_sort_key.as_ref() != Some(&sort_key) {
        out.push(Problem::FooterSortKey {
            footer: footer_sort_key,
            manifest: sort_key,
        });
    }
    for (name, recorded) in [
        ("ravel.first_key", &entry.first_key),
        ("ravel.last_key", &entry.last_key),
    ] {
        let stored: Option<Vec<Value>> = kv.get(name).and_then(|v| serde_json::from_str(v).ok());
        if &stored != recorded {
            out.push(Problem::FooterKey {
                name: name.to_string(),
                footer: stored.map(Value::from),
                manifest: recorded.clone().map(Value::from),
            });
        }
    }
    out
}

/// Each column's page index and Bloom filter, then each row group's `sorting_columns`.
fn column_problems(m: &Manifest, layout: &Layout, meta: &ParquetMetaData) -> Vec<Problem> {
    let scope: HashSet<&str> = layout.bloom.scope.columns(&m.schema).into_iter().collect();
    let mut out = Vec::new();
    for group in meta.row_groups() {
        for column in group.columns() {
            let name = column.column_path().string();
            if column.column_index_offset().is_none() || column.offset_index_offset().is_none() {
                out.push(Problem::NoPageIndex {
                    column: name.clone(),
                });
            }
            let has = column.bloom_filter_offset().is_some();
            let wanted = scope.contains(name.as_str());
            out.extend(blooms::footer_problem(layout, &name, has, wanted));
        }
        out.extend(order::sorting_columns_problem(layout, &m.schema, group));
    }
    out
}
