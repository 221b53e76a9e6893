//! Objects other Delta writers added, checked before a load writes next to them (see
//! `ravel_log::ForeignObject`): every column of each, its partition columns too, must be one
//! the table has, and none may be partitioned, since a load's version ends the partitioning
//! in the table's Delta metadata. Otherwise the load publishes nothing, and the error names the
//! object and the way out.

use std::sync::Arc;

use arrow::datatypes::Schema;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::file::metadata::PageIndexPolicy;
use ravel_log::{ForeignObject, Snapshot};
use ravel_store::{ObjectFile, TablePaths};

use crate::LoadError;

/// Footers read at once.
const READ_CONCURRENCY: usize = 8;

/// Fails when an object other writers added to `snapshot` is partitioned or has a column
/// `schema` lacks (`None`: a table with no schema yet; its columns are not checked).
pub(crate) async fn check(
    store: &Arc<dyn ObjectStore>,
    table: &TablePaths,
    snapshot: &Snapshot,
    schema: Option<&Schema>,
) -> Result<(), LoadError> {
    let foreign = snapshot.foreign(table);
    if let Some(f) = foreign.iter().find(|f| !f.partition_values.is_empty()) {
        return Err(LoadError::ForeignPartitioned {
            table: table.name().to_string(),
            key: f.key.clone(),
            version: f.version,
            columns: f.partition_values.keys().cloned().collect(),
        });
    }
    let Some(schema) = schema else {
        return Ok(());
    };
    futures::stream::iter(&foreign)
        .map(|f| check_columns(store, table, f, schema))
        .buffer_unordered(READ_CONCURRENCY)
        .try_collect()
        .await
}

/// Fails when object `f` (its footer's columns) has a column `schema` lacks.
async fn check_columns(
    store: &Arc<dyn ObjectStore>,
    table: &TablePaths,
    f: &ForeignObject,
    schema: &Schema,
) -> Result<(), LoadError> {
    let reader =
        ObjectFile::new(store.clone(), &f.key, f.bytes).with_page_index(PageIndexPolicy::Skip);
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|source| LoadError::ForeignRead {
            key: f.key.clone(),
            source,
        })?;
    match builder
        .schema()
        .fields()
        .iter()
        .find(|c| schema.field_with_name(c.name()).is_err())
    {
        Some(c) => Err(f.extra_column(table.name(), c.name()).into()),
        None => Ok(()),
    }
}
