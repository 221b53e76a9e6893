//! Adoption: objects other Delta writers added (see [`ravel_log::ForeignObject`]) are read,
//! given the table's types, sorted under its layout through the loader (with the layout's
//! Bloom filters) and published as one version that replaces them, as a load of their rows
//! would have been. Their rows then rank as of the version that added them; maintenance and
//! compaction treat the result like any load's runs.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, new_null_array};
use arrow::compute::CastOptions;
use arrow::datatypes::{DataType, Schema};
use futures::TryStreamExt;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use ravel_loader::{LoadError, LoadMode, Loader, Replacement};
use ravel_log::{ForeignObject, TableLog};
use ravel_store::{ObjectFile, Store, TablePaths};
use serde::Serialize;

use crate::publish::Publisher;
use crate::{CompactError, CompactOptions};

/// What an adoption did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Adopted {
    /// The version that replaced the foreign objects.
    pub version: u64,
    /// Foreign objects taken in, and their rows.
    pub objects: usize,
    pub rows: u64,
    /// Objects written in their place, and their bytes.
    pub output_objects: usize,
    pub written_bytes: u64,
}

/// Why a foreign object could not be taken in.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    #[error("reading {key}, an object another Delta writer added")]
    Read {
        key: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error(transparent)]
    ExtraColumn(#[from] ravel_log::ExtraColumn),
    #[error(
        "column {column:?} of {key}, an object another Delta writer added, does not read as the table's {to}"
    )]
    Cast {
        key: String,
        column: String,
        to: DataType,
        #[source]
        source: arrow::error::ArrowError,
    },
    #[error(
        "table {0:?} has objects other Delta writers added but no recorded schema to read them with"
    )]
    NoSchema(String),
}

/// The objects of the newest version that other writers added.
pub async fn foreign_objects(
    store: &Store,
    table: &str,
) -> Result<Vec<ForeignObject>, CompactError> {
    let paths = TablePaths::new(table)?;
    let log = TableLog::new(store.object_store().clone(), paths.clone());
    Ok(log.latest().await?.foreign(&paths))
}

/// Takes the foreign objects of `table`'s newest version in when one of them is partitioned
/// (a load cannot publish next to it, see [`ravel_loader::LoadError::ForeignPartitioned`]);
/// `None` when none is.
pub async fn adopt_partitioned(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<Option<Adopted>, CompactError> {
    let foreign = foreign_objects(store, table).await?;
    if foreign.iter().all(|f| f.partition_values.is_empty()) {
        return Ok(None);
    }
    adopt(store, table, opts).await
}

/// Takes the foreign objects of `table`'s newest version in; `None` when it has none.
#[tracing::instrument(skip_all, fields(table = %table))]
pub async fn adopt(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<Option<Adopted>, CompactError> {
    let foreign = foreign_objects(store, table).await?;
    if foreign.is_empty() {
        return Ok(None);
    }
    let paths = TablePaths::new(table)?;
    let mode = LoadMode::table().for_purpose(ravel_loader::Writing::Merge);
    let mut loader = Loader::with_mode(store, table, opts.load.clone(), mode).await?;
    let Some(schema) = loader.table_schema().cloned().map(Arc::new) else {
        return Err(AdoptError::NoSchema(table.to_string()).into());
    };
    for f in &foreign {
        match push_object(store, &mut loader, &schema, f, table).await {
            Ok(()) => {}
            Err(CompactError::Load(e)) => return Err(loader.abandon(e).await.into()),
            Err(e) => {
                // Its objects are orphans `gc` collects; the lease goes now.
                let _ = loader.abandon(LoadError::Poisoned).await;
                return Err(e);
            }
        }
    }
    let prepared = loader.prepare().await?;
    let m = &prepared.manifest;
    let rank = foreign.iter().map(|f| f.version).max();
    let replacement = Replacement {
        orders: vec![rank; m.objects.len()],
        chains: Vec::new(),
        // As the log names them (its paths are URL-encoded, store keys are not).
        removes: foreign.iter().map(|f| paths.absolute(&f.path)).collect(),
        written_bytes: prepared.report.stored_bytes,
        full: false,
        consumed: Default::default(),
    };
    let publisher = Publisher::new(store.object_store().clone(), paths, &prepared.report.layout);
    let committed = publisher.replace(m, replacement).await;
    let adopted = Adopted {
        version: 0,
        objects: foreign.len(),
        rows: prepared.report.rows,
        output_objects: m.objects.len(),
        written_bytes: prepared.report.stored_bytes,
    };
    prepared.release().await;
    let version = committed?.version();
    tracing::info!(
        version,
        objects = adopted.objects,
        rows = adopted.rows,
        "took in the objects other writers added"
    );
    Ok(Some(Adopted { version, ..adopted }))
}

/// Pushes the rows of foreign object `f` into `loader`, with the table's types.
async fn push_object(
    store: &Store,
    loader: &mut Loader,
    schema: &Arc<Schema>,
    f: &ForeignObject,
    table: &str,
) -> Result<(), CompactError> {
    let read_err = |source| AdoptError::Read {
        key: f.key.clone(),
        source,
    };
    let reader = ObjectFile::new(store.object_store().clone(), &f.key, f.bytes);
    let mut batches = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(read_err)?
        .build()
        .map_err(read_err)?;
    while let Some(batch) = batches.try_next().await.map_err(read_err)? {
        let batch = with_table_types(schema, &batch, f, table)?;
        loader.push_from(batch, &f.key).await?;
    }
    Ok(())
}

/// `batch`'s columns in the table's order and types: a partition column of `f` holds its
/// partition value; a column the table has and the object lacks is null (the loader refuses
/// it if the table's column is NOT NULL); a value that does not fit the table's type, or a
/// column the table does not have, fails, naming it.
fn with_table_types(
    schema: &Arc<Schema>,
    batch: &RecordBatch,
    f: &ForeignObject,
    table: &str,
) -> Result<RecordBatch, AdoptError> {
    let key = f.key.as_str();
    let batch_schema = batch.schema();
    let mut names = batch_schema
        .fields()
        .iter()
        .map(|g| g.name())
        .chain(f.partition_values.keys());
    if let Some(extra) = names.find(|name| schema.field_with_name(name).is_err()) {
        return Err(f.extra_column(table, extra).into());
    }
    let strict = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        if let Some(values) = f.partition_column(field, batch.num_rows()) {
            columns.push(values.map_err(|source| AdoptError::Cast {
                key: key.to_string(),
                column: field.name().clone(),
                to: field.data_type().clone(),
                source,
            })?);
            continue;
        }
        let Some(column) = batch.column_by_name(field.name()) else {
            columns.push(new_null_array(field.data_type(), batch.num_rows()));
            continue;
        };
        let cast = arrow::compute::cast_with_options(column, field.data_type(), &strict).map_err(
            |source| AdoptError::Cast {
                key: key.to_string(),
                column: field.name().clone(),
                to: field.data_type().clone(),
                source,
            },
        )?;
        columns.push(cast);
    }
    // Nullability is the loader's to check (it names the row); the types are the table's.
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options).map_err(
        |source| AdoptError::Cast {
            key: key.to_string(),
            column: String::new(),
            to: DataType::Null,
            source,
        },
    )
}
