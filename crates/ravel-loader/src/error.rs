//! Errors of a load.

/// What went wrong in a load. Nothing is published when a load fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    #[error(transparent)]
    Layout(#[from] ravel_layout::LayoutError),

    /// The load's options are unusable (e.g. an object size of 0): nothing was read or written.
    #[error(transparent)]
    Options(#[from] crate::InvalidOptions),

    #[error(
        "a batch needing {batch_bytes} bytes (its memory and its rows' sort scratch) is larger than the whole load budget of {budget} bytes; raise --load-budget or push smaller batches"
    )]
    BatchOverBudget { batch_bytes: u64, budget: u64 },

    /// A load of no rows publishes nothing: an empty manifest would record a load that added
    /// nothing, and an empty input is far more often a wrong path or glob than an intent.
    #[error("the input holds no rows: nothing was published")]
    EmptyInput,

    #[error("input {input}: column {column:?} {problem}")]
    Schema {
        input: String,
        column: String,
        problem: ColumnProblem,
    },

    /// A column holds a null in a nested field that the table's type says is NOT NULL.
    #[error(
        "input {input}: column {column:?} holds a null where the table's type {data_type} has a NOT NULL field"
    )]
    NestedNull {
        input: String,
        column: String,
        data_type: arrow::datatypes::DataType,
        #[source]
        source: arrow::error::ArrowError,
    },

    #[error("input {input}: {problem}")]
    Input {
        input: String,
        problem: InputProblem,
    },

    /// The inputs break a rule checked before any is read (see [`crate::check_bad_rows`]).
    #[error(transparent)]
    Inputs(#[from] crate::InputsRefused),

    /// An object another Delta writer added has a column the table lacks.
    #[error(transparent)]
    ForeignColumn(#[from] ravel_log::ExtraColumn),

    /// The table holds objects another Delta writer partitioned: a load's version, which ends
    /// the partitioning in the table's Delta metadata, would leave them without their
    /// partition columns.
    #[error(
        "object {key}, which another Delta writer added in version {version}, is partitioned by \
         {}: ravel-load's objects are not partitioned, and a load's version next to it would \
         end the table's partitioning under it, so nothing was published. Take such objects in \
         first (`ravel-load maintain`; `ravel-load load` does it itself), and `ravel-load layout \
         --table {table} fence set` keeps partitioning writers out",
        columns.join(", ")
    )]
    ForeignPartitioned {
        table: String,
        key: String,
        version: u64,
        columns: Vec<String>,
    },

    #[error("reading {key}, an object another Delta writer added")]
    ForeignRead {
        key: String,
        #[source]
        source: parquet::errors::ParquetError,
    },

    /// An input (or the file its rejected rows go to) could not be opened, listed, read or
    /// written.
    #[error("input {input}: {}", .step.lead())]
    InputFailed {
        input: String,
        step: InputStep,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A TSV has no header: its columns come from the table's recorded schema or from the
    /// schema the caller gives for TSV ([`crate::TsvOptions`]); with neither it cannot be read.
    #[error(
        "input {input}: a TSV names no columns, and the table has no recorded schema and no TSV schema was given"
    )]
    NoTsvSchema { input: String },

    /// A part of the loader itself failed on an error (a task panicked, a local file could
    /// not be made, a merge's input could not be read): not the input's fault.
    #[error("{task}")]
    Internal {
        task: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A part of the loader itself was not in the state to go on (the pipeline closed, a
    /// call came too late): not the input's fault.
    #[error("{task}: {problem}")]
    InternalState {
        task: &'static str,
        problem: &'static str,
    },

    #[error("encoding an object")]
    Encode(#[from] parquet::errors::ParquetError),

    /// An Arrow kernel failed; `stage` says in which part of the load.
    #[error("{stage}")]
    Arrow {
        stage: ArrowStage,
        #[source]
        source: arrow::error::ArrowError,
    },

    #[error("storing {key}")]
    Store {
        key: String,
        #[source]
        source: object_store::Error,
    },

    #[error(
        "writing the manifest {key} failed ({write}) and reading it back failed too ({read}): the load may or may not be published; run the same command again (it recognizes a published identical load) or check with verify"
    )]
    CommitUnknown {
        key: String,
        write: Box<object_store::Error>,
        read: Box<object_store::Error>,
    },

    #[error("an earlier push of this load failed; the load cannot be published")]
    Poisoned,

    /// The load's lease, which keeps `gc` off its objects until the commit, could not be
    /// written.
    #[error("taking this load's lease")]
    Lease(#[from] ravel_store::LeaseError),

    /// Just before the commit, an object this load stored was not there as stored.
    #[error(
        "object {key} that this load stored {problem} (deleted or replaced while the load ran, e.g. by gc of a build without leases): nothing was published; run the load again, it stores the object again"
    )]
    NotStored { key: String, problem: NotStored },

    /// The table's log could not be read or written.
    #[error(transparent)]
    Log(#[from] ravel_log::LogError),

    #[error("{writing} failed after storing {} object(s) that no manifest lists (gc collects them): {}", left_behind.len(), left_behind.join(", "))]
    Failed {
        /// What the objects were written for.
        writing: Writing,
        left_behind: Vec<String>,
        #[source]
        source: Box<LoadError>,
    },
}

/// How an object a load stored is not as it stored it (see [`LoadError::NotStored`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotStored {
    #[error("is missing")]
    Missing,
    #[error("has {found} bytes where this load stored {stored}")]
    Size { found: u64, stored: u64 },
}

/// What is wrong with one column of an input (see [`LoadError::Schema`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ColumnProblem {
    #[error("is missing")]
    Missing,
    /// `row` is 1-based in the input.
    #[error("is null in row {row} of the input, but the table's column is NOT NULL")]
    NullInNotNull { row: u64 },
    #[error("has type {data_type}, which TSV input does not read")]
    NotInTsv {
        data_type: arrow::datatypes::DataType,
    },
    #[error("columns are in another order than the table's")]
    Order,
    /// It breaks a rule of [`ravel_manifest::schema_difference`]; `detail` says how.
    #[error("{detail}")]
    Differs {
        kind: ravel_manifest::DifferenceKind,
        detail: String,
    },
}

/// What is wrong with an input as a whole (see [`LoadError::Input`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputProblem {
    #[error("{0}")]
    BadLine(BadLine),
    /// More bad lines than `--max-bad-rows` allows; `last` is the one past the allowance.
    #[error("more than {max} bad line(s) (--max-bad-rows); {last}")]
    TooManyBadLines { max: u64, last: BadLine },
    /// A glob that names no file.
    #[error("matches no file")]
    NoMatch,
    #[error("a row group held fewer rows than its footer says")]
    ShortRowGroup,
    /// The file's size or modification time changed while it was read: it was being written
    /// or replaced. Nothing of it is published.
    #[error(
        "changed while it was read ({before_bytes} bytes when the read began, {after_bytes} bytes, or another modification time, when it ended): nothing of it is published; load it once it is whole"
    )]
    ChangedWhileRead { before_bytes: u64, after_bytes: u64 },
    #[error("column readers disagree on the number of batches")]
    ReadersDisagree,
}

/// A TSV line that does not parse as the table's columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based in its file.
    pub line: u64,
    /// The cell that does not parse (`None`: the line as a whole, e.g. too few cells).
    pub column: Option<BadColumn>,
    pub reason: String,
}

/// A column of a TSV line, as a [`BadLine`] names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadColumn {
    /// 1-based.
    pub number: usize,
    pub name: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.column {
            None => write!(f, "line {}: {}", self.line, self.reason),
            Some(c) => write!(
                f,
                "line {}, column {} ({}): {}",
                self.line, c.number, c.name, self.reason
            ),
        }
    }
}

/// What a loader writes: a load's objects, a merge's output, or a merge's spill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Writing {
    Load,
    /// A compaction's output, in the table's order already.
    Merge,
    /// Sorted runs a merge reads back.
    Spill,
}

impl std::fmt::Display for Writing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Writing::Load => "the load",
            Writing::Merge => "the compaction",
            Writing::Spill => "the sort ahead of the merge",
        })
    }
}

/// What an input's reader was doing when it failed (see [`LoadError::InputFailed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputStep {
    /// Opening the file.
    Open,
    /// Reading a Parquet file's footer.
    Footer,
    /// Reading the file's bytes or batches.
    Read,
    /// Decoding a Parquet file's rows (the error says how).
    Decode,
    /// Creating the file rejected rows go to.
    CreateRejects,
    /// Writing a rejected row.
    WriteRejects,
    /// Parsing a glob.
    Glob,
    /// Listing a glob's matches.
    List,
}

impl InputStep {
    /// What failed, in words.
    fn lead(self) -> &'static str {
        match self {
            InputStep::Open => "cannot open",
            InputStep::Footer => "not a readable Parquet file",
            InputStep::Read => "reading",
            InputStep::Decode => "decoding",
            InputStep::CreateRejects => "cannot create the rejects file",
            InputStep::WriteRejects => "cannot write the rejects file",
            InputStep::Glob => "not a valid glob",
            InputStep::List => "cannot list",
        }
    }
}

/// The part of a load in which an Arrow kernel failed. (Computing a run's clustering order
/// fails as [`ravel_layout::LayoutError`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArrowStage {
    /// Giving an input batch the table's schema.
    ReadingInput,
    /// Taking a run's columns in its clustering order.
    Gathering,
    /// Encoding an object (the dictionary trials that choose its settings).
    Encoding,
    /// Computing an object's key ranges for the manifest.
    ComputingRanges,
}

impl std::fmt::Display for ArrowStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ArrowStage::ReadingInput => "reading input",
            ArrowStage::Gathering => "gathering a run in its sorted order",
            ArrowStage::Encoding => "encoding an object",
            ArrowStage::ComputingRanges => "computing an object's key ranges",
        })
    }
}

/// `?` on an Arrow error reads an input (the Parquet and TSV sources); the loader's other
/// stages name theirs with [`LoadError::arrow`].
impl From<arrow::error::ArrowError> for LoadError {
    fn from(source: arrow::error::ArrowError) -> LoadError {
        LoadError::Arrow {
            stage: ArrowStage::ReadingInput,
            source,
        }
    }
}

impl LoadError {
    /// A failure of `step` reading `input` (for `map_err`).
    pub(crate) fn input<E>(
        input: &std::path::Path,
        step: InputStep,
    ) -> impl FnOnce(E) -> LoadError + '_
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |source| LoadError::InputFailed {
            input: input.display().to_string(),
            step,
            source: Box::new(source),
        }
    }

    /// A failure of the loader's `task` on an error of its own (for `map_err`).
    pub fn internal<E>(task: impl Into<String>) -> impl FnOnce(E) -> LoadError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let task = task.into();
        move |source| LoadError::Internal {
            task,
            source: Box::new(source),
        }
    }

    /// An Arrow kernel's failure in `stage` (for `map_err`).
    pub fn arrow(stage: ArrowStage) -> impl FnOnce(arrow::error::ArrowError) -> LoadError {
        move |source| LoadError::Arrow { stage, source }
    }

    /// A commit lost to a concurrent change it cannot be replayed over (see
    /// [`ravel_log::LogError::is_conflict`]), however deeply wrapped.
    pub fn is_conflict(&self) -> bool {
        match self {
            LoadError::Log(e) => e.is_conflict(),
            LoadError::Failed { source, .. } => source.is_conflict(),
            _ => false,
        }
    }

    /// The input the error is about, as the load named it, when it is about one input (it
    /// cannot be read, or its rows do not fit the table): loading the other inputs without
    /// it may succeed.
    pub fn failed_input(&self) -> Option<&str> {
        match self {
            LoadError::Schema { input, .. }
            | LoadError::NestedNull { input, .. }
            | LoadError::Input { input, .. }
            | LoadError::InputFailed { input, .. }
            | LoadError::NoTsvSchema { input } => Some(input),
            LoadError::Failed { source, .. } => source.failed_input(),
            _ => None,
        }
    }

    /// True when the error is about the input or the request (exit code 2).
    pub fn is_invalid_input(&self) -> bool {
        match self {
            LoadError::Layout(e) => e.is_invalid_input(),
            LoadError::BatchOverBudget { .. }
            | LoadError::Options(_)
            | LoadError::EmptyInput
            | LoadError::Schema { .. }
            | LoadError::NestedNull { .. }
            | LoadError::Input { .. }
            | LoadError::Inputs(_)
            | LoadError::ForeignColumn(_)
            | LoadError::ForeignPartitioned { .. }
            | LoadError::InputFailed { .. }
            | LoadError::NoTsvSchema { .. } => true,
            LoadError::Failed { source, .. } => source.is_invalid_input(),
            LoadError::Log(e) => e.is_invalid_input(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_names_what_was_written() {
        let failed = |writing| LoadError::Failed {
            writing,
            left_behind: vec!["t/data/a.parquet".into()],
            source: Box::new(LoadError::Poisoned),
        };
        let merge = failed(Writing::Merge).to_string();
        assert!(
            merge.starts_with("the compaction failed after storing 1 object(s)"),
            "{merge}"
        );
        assert!(
            failed(Writing::Load)
                .to_string()
                .starts_with("the load failed")
        );
        assert!(
            failed(Writing::Spill)
                .to_string()
                .starts_with("the sort ahead of the merge failed")
        );
    }

    #[test]
    fn an_arrow_error_names_the_stage_it_happened_in() {
        let failed =
            |stage| LoadError::arrow(stage)(arrow::error::ArrowError::ComputeError("boom".into()));
        assert_eq!(
            failed(ArrowStage::Gathering).to_string(),
            "gathering a run in its sorted order"
        );
        assert_eq!(
            failed(ArrowStage::ComputingRanges).to_string(),
            "computing an object's key ranges"
        );
        let from_input: LoadError = arrow::error::ArrowError::ComputeError("boom".into()).into();
        assert_eq!(from_input.to_string(), "reading input");
        assert!(!from_input.is_invalid_input());
    }

    #[test]
    fn an_error_keeps_the_error_it_failed_on_as_its_source() {
        use std::error::Error;
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let path = std::path::Path::new("in.tsv");
        let failed = LoadError::input(path, InputStep::Open)(io());
        // The message leaves its source out; the chain prints each once.
        assert_eq!(failed.to_string(), "input in.tsv: cannot open");
        assert_eq!(
            ravel_store::ErrorChain::new(&failed).to_string(),
            "input in.tsv: cannot open: no such file"
        );
        assert!(failed.is_invalid_input());
        assert!(failed.source().unwrap().is::<std::io::Error>());
        let decoded = LoadError::input(path, InputStep::Decode)(io());
        assert_eq!(
            ravel_store::ErrorChain::new(&decoded).to_string(),
            "input in.tsv: decoding: no such file"
        );
        let internal = LoadError::internal("reader: the reader thread failed")(io());
        assert_eq!(
            ravel_store::ErrorChain::new(&internal).to_string(),
            "reader: the reader thread failed: no such file"
        );
        assert!(!internal.is_invalid_input());
        assert!(internal.source().unwrap().is::<std::io::Error>());
    }
}
