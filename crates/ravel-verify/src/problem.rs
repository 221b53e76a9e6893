//! What is wrong with an object, a manifest, a sidecar or the log: one variant per broken
//! promise, displayed as the report words it.

use std::fmt;
use std::sync::Arc;

use parquet::basic::{LogicalType, Type as PhysicalType};
use parquet::file::metadata::SortingColumn;
use ravel_manifest::SchemaDifference;
use serde::{Serialize, Serializer};
use serde_json::Value;

/// An error a check met, kept with its sources. Two causes are equal when they read the same.
#[derive(Debug, Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// The error itself, to walk its sources.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.0.as_ref()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Cause {
    fn from(error: E) -> Self {
        Cause(Arc::new(error))
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// A broken promise. [`Problem::kind`] names the variant; `Display` words it for the report.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    // The log chain (the object is "log entry N").
    /// The entry has no `commitInfo` action.
    NoCommitInfo,
    /// The entry removes an object the table does not hold.
    RemovesUnheld { path: String },
    /// The entry removes and adds one object: Delta readers drop it.
    RemovesAndAdds { path: String },
    /// The entry adds (as a data change) an object the table holds already.
    AddsHeld { path: String },

    // The Delta log as a whole.
    /// The newest checkpoint does not read.
    CheckpointUnreadable { cause: Cause },
    /// The version read from the newest checkpoint holds other objects than a replay.
    CheckpointFiles {
        version: Option<u64>,
        paths: Vec<String>,
    },
    /// The version read from the newest checkpoint has another protocol or `metaData`.
    CheckpointMetadata { version: Option<u64> },
    /// The log lost an entry, or a checksum file says it did: nothing reads the table.
    LogDamaged { cause: Cause },
    /// A checksum file disagrees with the log replayed to its version (the object is the
    /// file): which figures, and what the evidence says is wrong.
    ChecksumMismatch {
        disagreement: ravel_log::ChecksumDisagreement,
    },
    /// A column has no Delta type and the protocol does not say readers must refuse the table.
    ProtocolFeatureMissing { why: String },

    // Schemas (the object is a manifest).
    /// A load's schema differs from the first load's.
    SchemaDisagreesWithFirst {
        first: String,
        difference: SchemaDifference,
    },
    /// A load's schema differs from the table's recorded one.
    SchemaDisagreesWithTable { difference: SchemaDifference },
    /// A load's column is nullable where the table's recorded schema says NOT NULL.
    NullableColumn { column: String },

    // Objects and their footers.
    /// Two manifests list the object.
    ListedTwice { first: String, second: String },
    /// The object is not stored.
    Missing { manifest: String },
    /// The object (or sidecar) could not be read.
    Unreadable { cause: Cause },
    /// The object's stored size differs from the manifest's.
    SizeMismatch { stored: u64, manifest: u64 },
    /// The object's footer does not read.
    NotParquet { cause: Cause },
    /// The object's rows do not read.
    RowsUnreadable { cause: Cause },
    /// The object has other than one row group.
    RowGroups { count: usize },
    /// The footer's columns (names, types, order) differ from the manifest's schema.
    ColumnsDiffer,
    /// The footer has no Arrow schema that reads.
    NoArrowSchema { cause: Cause },
    /// The footer's row count differs from the manifest's.
    RowCountMismatch { stored: u64, manifest: u64 },
    /// The footer's layout generation differs from the manifest's.
    FooterGeneration {
        footer: Option<String>,
        manifest: u64,
    },
    /// The footer's sort key differs from the manifest's.
    FooterSortKey {
        footer: Option<String>,
        manifest: String,
    },
    /// The footer's first or last key (`name`) differs from the manifest's.
    FooterKey {
        name: String,
        footer: Option<Value>,
        manifest: Option<Value>,
    },
    /// A column has no page index.
    NoPageIndex { column: String },

    // Clustering order.
    /// The manifest's sort key is not its layout generation's.
    SortKeyMismatch {
        sort_key: Vec<String>,
        generation: u64,
        layout: Vec<String>,
    },
    /// The object's key range overlaps its predecessor's in one run.
    RunOverlap {
        previous: String,
        run: u64,
        manifest: String,
        last: Value,
        first: Value,
    },
    /// The row group's `sorting_columns` do not start with the stream column.
    SortingColumns {
        sorting_columns: Option<Vec<SortingColumn>>,
        stream: String,
    },
    /// The object's columns do not fit its layout's clustering key.
    LayoutMismatch { cause: Cause },
    /// The object's batches cannot be joined into one.
    RowsUnjoinable { cause: Cause },
    /// The clustering key of the rows cannot be computed.
    SortKeyUncomputable { cause: Cause },
    /// Row `row` sorts after row `next`.
    OutOfOrder { row: usize, next: usize },
    /// The rows span another key range than the manifest records.
    KeyRangeMismatch {
        first: Value,
        last: Value,
        manifest_first: Option<Value>,
        manifest_last: Option<Value>,
    },

    // Bloom filters, in footers and in the load's sidecar.
    /// A column outside the Bloom scope has a footer Bloom filter.
    BloomOutsideScope { column: String, scope: String },
    /// A column of the Bloom scope has no footer Bloom filter.
    BloomMissing { column: String, scope: String },
    /// The object has no column its sidecar filter covers.
    BloomColumnMissing { column: String },
    /// A value of the object is not in its sidecar filter.
    NotInBloom {
        column: String,
        batch: usize,
        row: usize,
    },
    /// The sidecar's columns are not the Bloom scope's string columns.
    SidecarColumns {
        recorded: Vec<String>,
        expected: Vec<String>,
    },
    /// The sidecar is not stored.
    SidecarMissing { manifest: String },
    /// The sidecar could not be read.
    SidecarUnreadable { cause: Cause },
    /// The sidecar's size differs from the manifest's, or it lacks the magic.
    SidecarSize { stored: u64, manifest: u64 },
    /// A section of the sidecar does not decode.
    SidecarSection { column: String, cause: Cause },
    /// A section of the sidecar lies outside it.
    SidecarSectionOutside { column: String },

    // The Delta view of an object.
    /// The object is not among the version's `add` actions.
    NoDeltaAdd,
    /// The `add`'s size differs from the manifest's.
    DeltaSize { add: u64, manifest: u64 },
    /// The `add`'s record count differs from the footer's.
    DeltaRecords { add: Value, footer: i64 },
    /// The `add`'s null count of a column differs from the footer's.
    DeltaNullCount {
        column: String,
        add: Value,
        footer: Value,
    },
    /// The `add`'s bound (`stat` is `minValues` or `maxValues`) excludes values of the footer.
    DeltaBound {
        stat: String,
        column: String,
        add: Value,
        footer: Value,
    },
    /// A column of the object is not in the Delta schema.
    NotInDeltaSchema { column: String },
    /// A column's Parquet type does not read as its Delta type.
    DeltaType {
        column: String,
        physical: PhysicalType,
        logical: Option<LogicalType>,
        delta: String,
    },

    // Objects other Delta writers added.
    /// The object is not stored.
    ForeignMissing { cause: Cause },
    /// The object's stored size differs from the log's.
    ForeignSize { stored: u64, log: u64 },
    /// The footer's row count differs from the `add`'s statistics.
    ForeignRows { stored: u64, log: u64 },
    /// The object (its footer or its partition values) has a column the table's schema lacks:
    /// load, compact and maintain refuse the table.
    ForeignExtraColumn { column: String, version: u64 },
}

impl Problem {
    /// A stable snake_case name of the variant (the `kind` of a violation in JSON).
    pub fn kind(&self) -> &'static str {
        use Problem::*;
        match self {
            NoCommitInfo => "no_commit_info",
            RemovesUnheld { .. } => "removes_unheld",
            RemovesAndAdds { .. } => "removes_and_adds",
            AddsHeld { .. } => "adds_held",
            CheckpointUnreadable { .. } => "checkpoint_unreadable",
            CheckpointFiles { .. } => "checkpoint_files",
            CheckpointMetadata { .. } => "checkpoint_metadata",
            LogDamaged { .. } => "log_damaged",
            ChecksumMismatch { .. } => "checksum_mismatch",
            ProtocolFeatureMissing { .. } => "protocol_feature_missing",
            SchemaDisagreesWithFirst { .. } => "schema_disagrees_with_first",
            SchemaDisagreesWithTable { .. } => "schema_disagrees_with_table",
            NullableColumn { .. } => "nullable_column",
            ListedTwice { .. } => "listed_twice",
            Missing { .. } => "missing",
            Unreadable { .. } => "unreadable",
            SizeMismatch { .. } => "size_mismatch",
            NotParquet { .. } => "not_parquet",
            RowsUnreadable { .. } => "rows_unreadable",
            RowGroups { .. } => "row_groups",
            ColumnsDiffer => "columns_differ",
            NoArrowSchema { .. } => "no_arrow_schema",
            RowCountMismatch { .. } => "row_count_mismatch",
            FooterGeneration { .. } => "footer_generation",
            FooterSortKey { .. } => "footer_sort_key",
            FooterKey { .. } => "footer_key",
            NoPageIndex { .. } => "no_page_index",
            SortKeyMismatch { .. } => "sort_key_mismatch",
            RunOverlap { .. } => "run_overlap",
            SortingColumns { .. } => "sorting_columns",
            LayoutMismatch { .. } => "layout_mismatch",
            RowsUnjoinable { .. } => "rows_unjoinable",
            SortKeyUncomputable { .. } => "sort_key_uncomputable",
            OutOfOrder { .. } => "out_of_order",
            KeyRangeMismatch { .. } => "key_range_mismatch",
            BloomOutsideScope { .. } => "bloom_outside_scope",
            BloomMissing { .. } => "bloom_missing",
            BloomColumnMissing { .. } => "bloom_column_missing",
            NotInBloom { .. } => "not_in_bloom",
            SidecarColumns { .. } => "sidecar_columns",
            SidecarMissing { .. } => "sidecar_missing",
            SidecarUnreadable { .. } => "sidecar_unreadable",
            SidecarSize { .. } => "sidecar_size",
            SidecarSection { .. } => "sidecar_section",
            SidecarSectionOutside { .. } => "sidecar_section_outside",
            NoDeltaAdd => "no_delta_add",
            DeltaSize { .. } => "delta_size",
            DeltaRecords { .. } => "delta_records",
            DeltaNullCount { .. } => "delta_null_count",
            DeltaBound { .. } => "delta_bound",
            NotInDeltaSchema { .. } => "not_in_delta_schema",
            DeltaType { .. } => "delta_type",
            ForeignMissing { .. } => "foreign_missing",
            ForeignSize { .. } => "foreign_size",
            ForeignRows { .. } => "foreign_rows",
            ForeignExtraColumn { .. } => "foreign_extra_column",
        }
    }
}

/// The report's wording; a table of one line per variant.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Problem::*;
        match self {
            NoCommitInfo => write!(f, "has no commitInfo"),
            RemovesUnheld { path } => write!(f, "removes {path}, which the table does not hold"),
            RemovesAndAdds { path } => {
                write!(
                    f,
                    "removes and adds {path} in one entry: Delta readers drop it"
                )
            }
            AddsHeld { path } => write!(
                f,
                "adds {path}, which the table holds already: its rows count twice"
            ),
            CheckpointUnreadable { cause } => write!(
                f,
                "the newest checkpoint does not read ({cause}): Delta readers start there"
            ),
            CheckpointFiles { version, paths } => write!(
                f,
                "read from its checkpoint, version {version:?} differs from a replay of the log in {paths:?}"
            ),
            CheckpointMetadata { version } => write!(
                f,
                "read from its checkpoint, version {version:?} has another protocol or metaData than a replay of the log"
            ),
            LogDamaged { cause } => write!(f, "{cause}"),
            ChecksumMismatch { disagreement } => f.write_str(&disagreement.finding()),
            ProtocolFeatureMissing { why } => write!(
                f,
                "the log's protocol does not list reader feature {}, though {why}",
                ravel_log::NO_DELTA_VIEW_FEATURE
            ),
            SchemaDisagreesWithFirst { first, difference } => write!(
                f,
                "schema disagrees with the first load's ({first}): {difference}; queries refuse the table"
            ),
            SchemaDisagreesWithTable { difference } => write!(
                f,
                "schema disagrees with the table's recorded schema: {difference}"
            ),
            NullableColumn { column } => write!(
                f,
                "schema has {column} nullable, the table's recorded schema says NOT NULL"
            ),
            ListedTwice { first, second } => write!(
                f,
                "is listed by manifests {first} and {second}: its rows count twice"
            ),
            Missing { manifest } | SidecarMissing { manifest } => {
                write!(f, "is missing: manifest {manifest} lists it")
            }
            Unreadable { cause } | SidecarUnreadable { cause } => {
                write!(f, "cannot be read: {cause}")
            }
            SizeMismatch { stored, manifest } => {
                write!(f, "has {stored} bytes, the manifest says {manifest}")
            }
            NotParquet { cause } => write!(f, "is not a readable Parquet file: {cause}"),
            RowsUnreadable { cause } => write!(f, "rows cannot be read: {cause}"),
            RowGroups { count } => write!(f, "has {count} row groups, not 1"),
            ColumnsDiffer => write!(f, "has other columns than the manifest's schema"),
            NoArrowSchema { cause } => write!(f, "has no readable Arrow schema: {cause}"),
            RowCountMismatch { stored, manifest } => {
                write!(f, "has {stored} rows, the manifest says {manifest}")
            }
            FooterGeneration { footer, manifest } => write!(
                f,
                "footer layout generation {:?}, the manifest says {manifest}",
                footer.as_deref()
            ),
            FooterSortKey { footer, manifest } => write!(
                f,
                "footer sort key {:?}, the manifest says {manifest:?}",
                footer.as_deref()
            ),
            FooterKey {
                name,
                footer,
                manifest,
            } => write!(
                f,
                "footer {name} {footer:?}, the manifest says {manifest:?}"
            ),
            NoPageIndex { column } => write!(f, "has no page index for column {column:?}"),
            SortKeyMismatch {
                sort_key,
                generation,
                layout,
            } => write!(
                f,
                "sort key {sort_key:?}, layout generation {generation} says {layout:?}"
            ),
            RunOverlap {
                previous,
                run,
                manifest,
                last,
                first,
            } => write!(
                f,
                "overlaps {previous} in key range within run {run} of manifest {manifest}: {last} > {first}"
            ),
            SortingColumns {
                sorting_columns,
                stream,
            } => write!(
                f,
                "sorting_columns {sorting_columns:?} do not start with the stream column {stream:?}"
            ),
            LayoutMismatch { cause } => write!(f, "its columns do not fit the layout: {cause}"),
            RowsUnjoinable { cause } => write!(f, "rows cannot be joined: {cause}"),
            SortKeyUncomputable { cause } => write!(f, "sort key cannot be computed: {cause}"),
            OutOfOrder { row, next } => write!(
                f,
                "is not in clustering order: row {row} sorts after row {next}"
            ),
            KeyRangeMismatch {
                first,
                last,
                manifest_first,
                manifest_last,
            } => write!(
                f,
                "rows span {first} .. {last}, the manifest says {manifest_first:?} .. {manifest_last:?}"
            ),
            BloomOutsideScope { column, scope } => write!(
                f,
                "has a Bloom filter on column {column:?}, which the Bloom scope ({scope}) does not cover"
            ),
            BloomMissing { column, scope } => write!(
                f,
                "has no Bloom filter on column {column:?}, which the Bloom scope ({scope}) covers"
            ),
            BloomColumnMissing { column } => {
                write!(f, "has no column {column}, which its Bloom filter covers")
            }
            NotInBloom { column, batch, row } => write!(
                f,
                "value of {column} at batch {batch} row {row} is not in the object's Bloom filter"
            ),
            SidecarColumns { recorded, expected } => write!(
                f,
                "holds filters of {recorded:?}; the Bloom scope's string columns are {expected:?}"
            ),
            SidecarSize { stored, manifest } => write!(
                f,
                "has {stored} bytes (the manifest says {manifest}) or no sidecar magic"
            ),
            SidecarSection { column, cause } => write!(f, "section {column}: {cause}"),
            SidecarSectionOutside { column } => {
                write!(f, "section {column} lies outside the sidecar")
            }
            NoDeltaAdd => write!(f, "is in the version but not among its Delta `add` actions"),
            DeltaSize { add, manifest } => write!(
                f,
                "its Delta `add` says {add} bytes, the manifest {manifest}"
            ),
            DeltaRecords { add, footer } => {
                write!(f, "its Delta `add` says {add} records, the footer {footer}")
            }
            DeltaNullCount {
                column,
                add,
                footer,
            } => write!(
                f,
                "its Delta `add` says {add} nulls in {column:?}, the footer {footer}"
            ),
            DeltaBound {
                stat,
                column,
                add,
                footer,
            } => write!(
                f,
                "its Delta `add` has {stat} {add} for {column:?}, past the footer's {footer}"
            ),
            NotInDeltaSchema { column } => {
                write!(f, "column {column:?} is not in the Delta schema")
            }
            DeltaType {
                column,
                physical,
                logical,
                delta,
            } => write!(
                f,
                "column {column:?} is stored as {physical} ({:?}), which Delta readers do not read as {delta}",
                logical.as_ref()
            ),
            ForeignMissing { cause } => write!(f, "is not stored, and the log adds it ({cause})"),
            ForeignSize { stored, log } => write!(f, "has {stored} bytes, the log says {log}"),
            ForeignRows { stored, log } => {
                write!(f, "has {stored} rows, its add's statistics say {log}")
            }
            ForeignExtraColumn { column, version } => write!(
                f,
                "has column {column:?}, which the table lacks (another Delta writer added the object in version {version}): load, compact and maintain refuse the table until that writer takes the object out"
            ),
        }
    }
}

/// In JSON a problem is its wording.
impl Serialize for Problem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
