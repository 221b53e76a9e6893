//! The clustered load: batches are buffered under one memory budget, sorted in runs by the
//! table's clustering order, cut into objects (one Parquet file, one row group each) near a
//! target size, stored under content-addressed names, and published as one table version: a
//! manifest of the objects, then the Delta log entry that adds them (see `ravel-log`).
//!
//! What a loader makes is one [`LoadMode`], given when it is made ([`Loader::with_mode`]). A
//! load that spills and merges its runs into one sequence (a sorted load) needs the merge, so
//! it lives with the merge in `ravel-compact` (`SortedLoad`).

mod budget;
mod columns;
mod commit;
mod encode;
mod error;
mod foreign;
mod gather;
mod inputs;
pub mod kernels;
mod loader;
mod mode;
mod object;
mod options;
mod sidecar;
mod source;
pub mod tsv;
mod upload;

pub use budget::Budget;
pub use columns::{ColumnPlan, load_by_columns};
pub use commit::{Committed, Committer, Published, Replacement, commit_settings};
pub use encode::{
    EncodeSettings, EncodedRun, ObjectKind, RunEncoder, SortedRun, stats_columns,
    table_configuration,
};
pub use error::{
    ArrowStage, BadColumn, BadLine, ColumnProblem, InputProblem, InputStep, LoadError, NotStored,
    Writing,
};
pub use inputs::{InputsRefused, check_bad_rows, distinct_inputs, input_format};
pub use loader::{LoadReport, Loader, Prepared, StageTimes};
pub use mode::{LoadMode, Rows};
pub use object::{EncodedObject, Run};
pub use options::{InvalidOptions, LoadOptions, SORT_SCRATCH_PER_ROW, ZSTD_LEVELS};
pub use ravel_log::{Consumed, InputFile};
pub use ravel_manifest::{MANIFEST_FORMAT, Manifest, ObjectEntry};
pub use sidecar::BloomSidecar;
pub use source::{
    BadRows, Files, InputFormat, READ_BATCH_ROWS, TsvOptions, expand_inputs, feed_files,
    input_files, load_files, load_files_with,
};
pub use upload::{Put, StoredObject, UploadedRun, Uploader};
