//! Plan, steps, one commit: a load or a merge spread over workers that share nothing but the
//! store.
//!
//! ```text
//! plan    (one process: reads the version, the layout, the inputs' sizes and a sample)
//!   → Job (JSON: base version, layout generation, per step an input share or a key range,
//!          the geometry and budget each step may use)
//!   → run_step i (any worker, any number of attempts: writes objects and a result, never the log)
//!   → commit (one process: one version holding every step's objects)
//! ```
//!
//! **A distributed load** is a sort in TeraSort's way. The plan cuts the key space into ranges
//! at quantiles of a sample of the inputs' sort keys. Each *split* step sorts one share of the
//! input files in runs, as any load does, and stores them as spill under the job's scratch
//! prefix; its result is the list of those objects with their key ranges. Each *merge* step
//! then reads, from every share's runs, the objects that hold a key of its range (an object
//! straddling an end is read by both neighbours, and each keeps its own rows), merges them and
//! writes the final objects. The commit publishes every merge step's objects, in range order,
//! as one load: one sequence in clustering order, with the inputs recorded as consumed, so a
//! rerun of the job publishes nothing twice.
//!
//! **A distributed compaction** (or maintenance merge) has only merge steps: key ranges of the
//! overlapping set the single-machine command would merge, cut at byte quantiles of its
//! objects' first keys. The commit replaces the inputs with the steps' objects, under
//! `compact`'s rule: it conflicts when an input left the table meanwhile.
//!
//! **Retries.** A step writes content-addressed objects, a split step its spill under a prefix
//! of its own attempt and then its result under the job's prefix (the last finished attempt's
//! stands; every attempt lists the same rows); it never touches the log. Two attempts of one
//! merge step write the same bytes under the same names, so a retry cannot change the outcome. Objects of failed or
//! superseded attempts are unreferenced: `gc` collects them under its lease and retention rules.
//!
//! **What the commit trusts.** Nothing in the plan or the results it is handed: before anything
//! is published it checks the plan against itself, each result against its step, the results'
//! objects against their footers in the store, and that every row is published once (see
//! [`CheckError`] for each rule). The store's own records (a split step's result, which the
//! merge steps read) are taken as written.

mod check;
mod commit;
mod footer;
mod plan;
mod sample;
mod step;

pub use crate::Merge;
pub use check::{CheckError, Holder};
pub use commit::{Commit, CommitMode, CommitReport, GroupOutcome, commit};
pub use plan::{PlanOptions, plan_compact, plan_load};
pub use step::run_step;

use object_store::path::Path;
use ravel_log::InputFile;
use ravel_manifest::{BloomIndex, ObjectEntry};
use ravel_store::TablePaths;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plan::{Chain, InputObject};

/// The format of a job and of its results (2: results name their table and a split step's
/// inputs).
pub const JOB_FORMAT: u32 = 2;

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JobOperation {
    /// A load of input files, published globally sorted.
    Load,
    /// `compact`'s merge of every overlapping object.
    Compact,
    /// The merge the table's maintenance policy chose.
    Maintain,
}

impl JobOperation {
    pub fn name(self) -> &'static str {
        match self {
            JobOperation::Load => "load",
            JobOperation::Compact => "compact",
            JobOperation::Maintain => "maintain",
        }
    }
}

/// A planned job: everything a worker needs to run any of its steps, and the commit to
/// publish them (see the module docs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub format: u32,
    /// Unique per plan: names the job's scratch prefix and ties results to it.
    pub id: String,
    pub operation: JobOperation,
    /// The store's URL (S3 settings come from each worker's environment).
    pub store: String,
    pub table: String,
    /// The version the plan read (`None`: the table had none yet).
    pub read_version: Option<u64>,
    /// The layout generation every step sorts by; the commit refuses another.
    pub layout_generation: u64,
    pub sort_key: Vec<String>,
    /// Geometry and budget of each step.
    pub geometry: StepGeometry,
    /// The steps: a load's split steps first, then its merge steps.
    pub steps: Vec<JobStep>,
    /// A merge's overlapping sets of chains (steps name theirs by index), in key order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<Vec<JobChain>>,
    /// A load's input files, as the log records what a load consumed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputFile>,
    /// The merge leaves the table one sequence (the totals since the last full compaction
    /// start over at its commit).
    #[serde(default)]
    pub full: bool,
    /// Why the plan merges what it merges (or loads).
    pub reason: String,
    /// What the plan did otherwise than asked: fewer steps than `--steps`, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Geometry and budget of one step: what [`ravel_loader::LoadOptions`] a worker loads with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepGeometry {
    pub object_bytes: u64,
    pub pipeline_depth: usize,
    /// Bytes one step may hold at once.
    pub budget_bytes: u64,
    pub zstd_level: i32,
}

impl StepGeometry {
    pub fn from_load(opts: &ravel_loader::LoadOptions) -> StepGeometry {
        StepGeometry {
            object_bytes: opts.object_bytes,
            pipeline_depth: opts.pipeline_depth,
            budget_bytes: opts.load_budget,
            zstd_level: opts.zstd_level,
        }
    }

    pub(crate) fn load_options(&self) -> ravel_loader::LoadOptions {
        ravel_loader::LoadOptions {
            object_bytes: self.object_bytes,
            target_bytes: None,
            pipeline_depth: self.pipeline_depth,
            load_budget: self.budget_bytes,
            // A step's input is all there: runs close on bytes and at the end, never on age.
            max_flush_delay: std::time::Duration::from_secs(24 * 3600),
            zstd_level: self.zstd_level,
        }
    }
}

/// One step of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStep {
    pub index: usize,
    #[serde(flatten)]
    pub work: StepWork,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepWork {
    /// Sorts one share of a load's input files into runs of spill.
    Split {
        share: usize,
        /// The share's files, in load order (local paths every worker reads alike).
        files: Vec<String>,
        bytes: u64,
    },
    /// Merges the rows of one key range `[lo, hi)`: of every split step's runs (a load), or
    /// of the overlapping set `set` (a merge).
    Merge {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        set: Option<usize>,
        lo: Option<Vec<Value>>,
        hi: Option<Vec<Value>>,
        /// The input bytes the plan expects the step to read (objects that hold a key of
        /// the range).
        bytes: u64,
    },
}

/// A chain of a merge's input: one run of one load or compaction, objects in key order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobChain {
    pub manifest: String,
    pub run: u64,
    /// Its rank among equal sort keys.
    pub order: u64,
    pub objects: Vec<ObjectEntry>,
    /// Sorted under the current layout's key; otherwise its rows are sorted again.
    pub sorted: bool,
}

impl JobChain {
    pub(crate) fn from_chain(c: &Chain) -> JobChain {
        JobChain {
            manifest: c.manifest.clone(),
            run: c.run,
            order: c.order,
            objects: c.objects.iter().map(|o| o.entry.clone()).collect(),
            sorted: c.sorted,
        }
    }

    pub(crate) fn chain(&self) -> Chain {
        Chain {
            manifest: self.manifest.clone(),
            run: self.run,
            order: self.order,
            objects: self
                .objects
                .iter()
                .map(|o| InputObject {
                    entry: o.clone(),
                    order: self.order,
                })
                .collect(),
            sorted: self.sorted,
        }
    }
}

/// What one attempt of one step wrote: the worker hands it to the commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepResult {
    pub format: u32,
    /// The job's id.
    pub job: String,
    /// The table the step wrote for.
    pub table: String,
    pub step: usize,
    /// Unique per attempt.
    pub attempt: String,
    pub kind: StepKind,
    /// A merge step's objects (to publish) or a split step's spill (read by the merge steps),
    /// in key order within each run.
    pub objects: Vec<ObjectEntry>,
    /// A merge step's Bloom sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blooms: Option<BloomIndex>,
    /// The schema of the rows written.
    pub schema: Option<arrow::datatypes::Schema>,
    pub rows: u64,
    /// A split step's input files as it read them, in the plan's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRead>,
    pub cost: StepCost,
}

/// One input file as a split step read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRead {
    /// The file, as the plan names it.
    pub name: String,
    pub size: u64,
    /// Rows, as its Parquet footer says.
    pub rows: u64,
}

/// A step's kind, as results name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepKind {
    Split,
    Merge,
}

impl StepKind {
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Split => "split",
            StepKind::Merge => "merge",
        }
    }
}

/// What a step cost: the per-step model's inputs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StepCost {
    pub wall_s: f64,
    /// Bytes read: input files (split) or objects (merge).
    pub read_bytes: u64,
    /// Bytes stored: spill, or objects and sidecar.
    pub written_bytes: u64,
    /// The loader's peak, plus the merge's estimate.
    pub peak_budget_bytes: u64,
    /// Merge passes over the step's rows (a merge step over more runs than one pass holds
    /// takes more than one); 0 for a split step.
    #[serde(default)]
    pub passes: usize,
}

/// Why a job could not be planned, run or committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    #[error(
        "the job file is not a job of this build (format {found}, this build reads {JOB_FORMAT})"
    )]
    Format { found: u32 },
    #[error("job {job} has no step {step} (it has {steps})")]
    NoSuchStep {
        job: String,
        step: usize,
        steps: usize,
    },
    #[error("the result of step {step} belongs to job {found}, not to job {job}")]
    OtherJob {
        job: String,
        step: usize,
        found: String,
    },
    #[error("no result for step {step} of job {job}: run it first")]
    MissingResult { job: String, step: usize },
    #[error(
        "split step {step} (share {share}) of job {job} has not finished: merge steps run after every split step"
    )]
    SplitNotDone {
        job: String,
        step: usize,
        share: usize,
    },
    #[error(
        "the layout of table {table:?} changed since the plan (generation {planned}, now {now}): plan again"
    )]
    LayoutChanged {
        table: String,
        planned: u64,
        now: u64,
    },
    #[error(
        "table {table:?} holds objects other Delta writers added: run `maintain` or `compact` once to take them in, then plan"
    )]
    ForeignObjects { table: String },
    #[error("a distributed load reads Parquet inputs; {input} is not one (load it with `load`)")]
    NotParquet { input: String },
    #[error("no input files match {0:?}")]
    NoInputs(String),
    #[error("--steps must be at least 1")]
    NoSteps,
    #[error(
        "a load publishes its inputs' rows in one version (each input once): commit it whole, without --per-step"
    )]
    PerStepLoad,
    #[error("results of steps {first} and {second} hold different schemas")]
    Schemas { first: usize, second: usize },
    #[error("reading {key}")]
    Read {
        key: String,
        #[source]
        source: object_store::Error,
    },
    #[error("writing {key}")]
    Write {
        key: String,
        #[source]
        source: object_store::Error,
    },
    #[error("{what} {key} does not parse")]
    Parse {
        what: &'static str,
        key: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("reading input {input} for the plan's sample")]
    Sample {
        input: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error("reading input {input}")]
    Input {
        input: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// The plan or the results disagree: nothing was published.
    #[error("the job does not check out; nothing was published")]
    Check(#[from] CheckError),
}

impl JobError {
    /// Errors the user can fix by asking differently (exit code 2).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            JobError::Format { .. }
                | JobError::NoSuchStep { .. }
                | JobError::OtherJob { .. }
                | JobError::NotParquet { .. }
                | JobError::NoInputs(_)
                | JobError::NoSteps
                | JobError::PerStepLoad
                | JobError::ForeignObjects { .. }
                | JobError::Check(_)
        )
    }
}

impl Job {
    /// Checks the job's format and that it has step `step`.
    pub fn check_step(&self, step: usize) -> Result<&JobStep, JobError> {
        self.check_format()?;
        self.steps.get(step).ok_or(JobError::NoSuchStep {
            job: self.id.clone(),
            step,
            steps: self.steps.len(),
        })
    }

    /// Checks that `layout` is the generation the job was planned under.
    pub fn check_layout(&self, layout: &ravel_layout::Layout) -> Result<(), JobError> {
        if layout.generation == self.layout_generation {
            return Ok(());
        }
        Err(JobError::LayoutChanged {
            table: self.table.clone(),
            planned: self.layout_generation,
            now: layout.generation,
        })
    }

    pub fn check_format(&self) -> Result<(), JobError> {
        match self.format {
            JOB_FORMAT => Ok(()),
            found => Err(JobError::Format { found }),
        }
    }

    /// The steps whose results the commit publishes: every merge step.
    pub fn merge_steps(&self) -> impl Iterator<Item = &JobStep> {
        self.steps
            .iter()
            .filter(|s| matches!(s.work, StepWork::Merge { .. }))
    }

    /// The lower ends of the merge steps' key ranges: where a split step's spill objects are
    /// cut, so that each merge step reads only its own.
    pub(crate) fn range_starts(&self) -> Vec<Value> {
        let starts = self.steps.iter().filter_map(|s| match &s.work {
            StepWork::Merge { lo: Some(lo), .. } => Some(Value::from(lo.clone())),
            _ => None,
        });
        starts.collect()
    }

    /// The split steps, by share.
    pub(crate) fn split_steps(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.steps.iter().filter_map(|s| match s.work {
            StepWork::Split { share, .. } => Some((s.index, share)),
            StepWork::Merge { .. } => None,
        })
    }
}

/// Where a job keeps what its steps hand each other: `<table>/_ravel/tmp/<job id>/`.
pub(crate) fn job_dir(paths: &TablePaths, job: &str) -> Path {
    paths.scratch_dir(job)
}

/// Where split step `share`'s result is kept for the merge steps.
pub(crate) fn split_result(paths: &TablePaths, job: &str, share: usize) -> Path {
    job_dir(paths, job).join(format!("split-{share:05}.json"))
}

/// The scratch operation one attempt of a split step stores its spill under.
pub(crate) fn split_operation(job: &str, share: usize, attempt: &str) -> String {
    format!("{job}-s{share:05}-{attempt}")
}
