//! Errors of the layout service.

use arrow::datatypes::DataType;

/// What went wrong reading, validating or writing a table's layout.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    #[error("bucket width {text:?}: {reason}")]
    BadBucketWidth { text: String, reason: String },

    #[error("the clustering key needs 1 to 4 columns, got {0}")]
    KeyColumnCount(usize),

    /// Rows sort by time bucket before the key columns, so a key needs a time column.
    #[error("a clustering key needs a time column: name the time column first")]
    KeyWithoutTime,

    #[error("column {column:?} is named more than once in the {role}")]
    DuplicateColumn { column: String, role: &'static str },

    #[error("column {column:?} cannot be both the {first} and the {second}")]
    RoleClash {
        column: String,
        first: &'static str,
        second: &'static str,
    },

    #[error("{role} column name is empty")]
    EmptyColumnName { role: &'static str },

    #[error("{role} column {column:?} is not in the table's schema; columns are: {available}")]
    UnknownColumn {
        column: String,
        role: &'static str,
        available: String,
    },

    #[error(
        "{role} column {column:?} has type {data_type}, which the clustering order does not sort; sortable types are integers, floats, booleans, dates, timestamps, strings and binary"
    )]
    Unorderable {
        column: String,
        role: &'static str,
        data_type: DataType,
    },

    #[error(
        "time column {column:?} has type {data_type}; the time column must be a timestamp, a date, or an integer of unix seconds"
    )]
    BadTimeColumn { column: String, data_type: DataType },

    #[error("retention {setting} {value}: {reason}")]
    BadRetention {
        setting: &'static str,
        value: String,
        reason: String,
    },

    #[error("Bloom filter false-positive rate {0} must be above 0 and below 1")]
    BadFpp(f64),

    #[error("maintenance {setting} {value}: {reason}")]
    BadMaintenance {
        setting: &'static str,
        value: String,
        reason: String,
    },

    #[error("Bloom scope {0:?} is not one of none, text, all, or a comma-separated column list")]
    BadBloomScope(String),

    #[error(
        "the layout of table {table:?} changed while this update was made (generation {generation} was written by someone else): re-read the layout and retry"
    )]
    Conflict { table: String, generation: u64 },

    #[error(
        "table {table:?} already has a recorded schema that differs from the one given; a table's schema is fixed once recorded"
    )]
    SchemaMismatch { table: String },

    #[error("batch has {rows} rows; a batch is sorted with u32 row indices, so at most {max}")]
    BatchTooLarge { rows: usize, max: usize },

    /// Rows read twice to be ordered (see `ClusteringOrder::streamed_order`) were not the
    /// same rows the second time.
    #[error("the rows being ordered changed between their two reads")]
    Changed,

    #[error("{path}: not a valid document")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
    },

    #[error("{path}: unsupported layout document format {format} (this build reads format 1)")]
    UnsupportedFormat { path: String, format: u32 },

    #[error("store request failed")]
    Store(#[from] object_store::Error),

    /// A document written once (a layout generation, the recorded schema) was not stored.
    #[error(transparent)]
    Create(#[from] ravel_store::CreateError),

    #[error(transparent)]
    Table(#[from] ravel_store::StoreError),

    #[error("computing the clustering order")]
    Arrow(#[from] arrow::error::ArrowError),

    /// Reading the Delta log of a table without a recorded schema, for the schema it declares.
    #[error("reading the table's Delta log for its schema")]
    Log(#[from] Box<ravel_log::LogError>),

    #[error(transparent)]
    DeclaredSchema(#[from] ravel_log::DeclaredSchemaError),
}

impl LayoutError {
    /// True when the error is about what the user asked for (bad input: exit code 2), false when
    /// it is about the store or a concurrent writer.
    pub fn is_invalid_input(&self) -> bool {
        !matches!(
            self,
            LayoutError::Conflict { .. }
                | LayoutError::Store(_)
                | LayoutError::Create(_)
                | LayoutError::Json { .. }
                | LayoutError::UnsupportedFormat { .. }
                | LayoutError::Arrow(_)
                | LayoutError::Log(_)
                | LayoutError::DeclaredSchema(_)
                | LayoutError::Table(
                    ravel_store::StoreError::Probe { .. }
                        | ravel_store::StoreError::Open { .. }
                        | ravel_store::StoreError::CreateDir { .. }
                )
        )
    }
}
