//! Sort-preserving compaction. A load larger than its run trigger leaves runs that each span
//! the key space, and every load adds runs: the table's objects overlap. [`compact`] merges the
//! overlapping objects of the newest version into one sequence in clustering order and commits
//! a version that replaces them (see `ravel-log`): objects that overlap nothing stay as they
//! are, and a table with nothing to merge is left alone.
//!
//! **How it reads.** The objects of one run (a *chain*) follow each other in key order, so the
//! merge reads each chain from its start, a slice of rows at a time; a slice is fetched by
//! ranged GETs of the pages that hold it (the page index locates them), so the merge holds one
//! slice per chain. Objects written under another layout are not in the current order: they are
//! sorted again first, through the loader, into runs that then merge like any other.
//!
//! **How it writes.** The merged rows go through a [`ravel_loader::Loader`], the code that writes
//! a load's objects: tier geometry, one row group, zstd, statistics, page index, Bloom filters on
//! the scope's columns and their sidecar, content-addressed names, bounded uploads. Its runs
//! arrive in key order, so they follow each other and the result overlaps nowhere.
//!
//! **Memory.** The budget is split: half to the loader, half to the merge's slices. More chains
//! than the merge's half holds at its smallest slice are merged in passes: consecutive chains
//! (in rank order) into intermediate objects that are never committed, then those.
//!
//! **Ties.** Among equal keys, rows leave in chain rank order: earlier loads first, then runs in
//! input order. A compaction's objects carry the highest rank of its inputs, so rows loaded
//! later keep sorting after them.
//!
//! **Steps.** With `max_input_bytes`, a large set of overlapping objects is merged one key range
//! at a time, the deepest first, each committed as a version (see [`bounded`]).
//!
//! **Commit.** A compaction commits only if every input is still in the table: a concurrent
//! compaction that removed one wins, and this one fails with `ravel_log::LogError::TableChanged`:
//! the step that conflicted publishes nothing (steps committed before it stand). Loads committed
//! meanwhile stay untouched. Every version this crate makes (a step, an adoption, a sorted
//! load, a job) is published through one place, `publish.rs`.
//!
//! **The sorted load lives here.** [`SortedLoad`] is a load whose rows exceed one run: it
//! spills sorted runs through the loader and merges them with this crate's merge. The loader
//! makes runs and objects and knows nothing of merges, so the load that needs one sits beside
//! the merge rather than in `ravel-loader`.

mod adopt;
pub mod job;
mod maintenance;
mod merge;
mod plan;
mod publish;
mod read;
mod run;
mod scratch;
mod selection;
mod sorted;
mod steps;
mod window;
mod writer;

pub use adopt::{AdoptError, Adopted, adopt, adopt_partitioned, foreign_objects};
pub use maintenance::{Decision, decide, depth_bound};
pub use plan::{Chain, InputObject, Plan, Ranged, Step, Window, max_depth, plan};
pub use run::{Merge, compact, maintain};
pub use sorted::{SortedLoad, SortedLoadReport};
pub use window::bounded;

use ravel_layout::LayoutError;
use ravel_loader::{LoadError, LoadOptions, StageTimes};
use ravel_log::LogError;
use ravel_store::StoreError;
use serde::Serialize;

/// How a compaction runs. The default merges every overlapping set in one step, with the
/// loader's default geometry ([`LoadOptions::default`]) and a fan-in from its budget.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CompactOptions {
    /// The loader's geometry and budget for the objects written; the budget also bounds the
    /// merge (see the crate docs).
    pub load: LoadOptions,
    /// Chains merged at once, at most; `None` derives it from the budget.
    pub fan_in: Option<usize>,
    /// Input bytes a step merges at most: a larger set of overlapping objects is merged one
    /// key range at a time, the most overlapping first, each range committed as a version.
    /// `None`: every overlapping set in one step.
    pub max_input_bytes: Option<u64>,
    /// Plan and report only; write nothing to the store. Objects other Delta writers added are
    /// taken in on an overlay first (see [`ravel_store::Store::overlay`]), so that the plan is
    /// the one the real run makes.
    pub dry_run: bool,
    /// Steps committed at most, each a version (a service that shares its budget between
    /// tables takes one at a time); `None`: until the plan asks for none.
    pub max_steps: Option<usize>,
}

impl CompactOptions {
    /// Refuses options no merge can run with; `compact` and `maintain` call it first.
    pub fn validate(&self) -> Result<(), CompactError> {
        match self.fan_in {
            Some(fan_in) if fan_in < 2 => Err(CompactError::FanIn { fan_in }),
            _ => Ok(()),
        }
    }
}

/// Rows a merged batch holds at most.
const BATCH_ROWS: usize = 65_536;
/// Rows a chain's slice holds at least and at most.
const SLICE_ROWS: std::ops::RangeInclusive<usize> = 1024..=65_536;
/// The merge's cost of one open chain beyond its slice: the object's footer and page index.
const CHAIN_OVERHEAD_BYTES: u64 = 2 << 20;

/// Why a compaction failed. Nothing is published on failure; objects already stored are
/// orphans that `gc` collects.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("reading an input object")]
    Read {
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// A step would merge the very objects the step before it merged.
    #[error("a step would merge the same objects again: the plan made no progress")]
    NoProgress,
    /// Options no merge can run with (see [`CompactOptions::validate`]).
    #[error("the fan-in must be at least 2 (a merge takes two chains at least), not {fan_in}")]
    FanIn { fan_in: usize },
    #[error(transparent)]
    Adopt(#[from] AdoptError),
    #[error(transparent)]
    Job(#[from] job::JobError),
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    #[error(
        "table {0:?} has no clustering key: its objects keep arrival order, there is nothing to compact"
    )]
    NotClustered(String),
    #[error("table {0:?} has no versions in this store")]
    NoSuchTable(String),
}

impl CompactError {
    /// Errors the user can fix by asking differently (exit code 2).
    pub fn is_invalid_input(&self) -> bool {
        match self {
            CompactError::NotClustered(_)
            | CompactError::NoSuchTable(_)
            | CompactError::FanIn { .. } => true,
            CompactError::Store(e) => e.is_invalid_input(),
            CompactError::Layout(e) => e.is_invalid_input(),
            CompactError::Load(e) => e.is_invalid_input(),
            CompactError::Adopt(AdoptError::ExtraColumn(_)) => true,
            CompactError::Job(e) => e.is_invalid_input(),
            _ => false,
        }
    }

    /// The table changed while the compaction ran (another compaction removed an input),
    /// however deeply the log's error is wrapped.
    pub fn is_conflict(&self) -> bool {
        let direct = match self {
            CompactError::Log(e) => e.is_conflict(),
            CompactError::Load(e) => e.is_conflict(),
            _ => false,
        };
        // Any other wrapping: the log's and the loader's errors anywhere in the chain of
        // sources (a transparent variant's source is its inner error's source, so the
        // variants above are matched first).
        direct || conflict_in_sources(self)
    }

    /// The input the error is about, when it is about one input of a load (see
    /// [`LoadError::failed_input`]).
    pub fn failed_input(&self) -> Option<&str> {
        match self {
            CompactError::Load(e) => e.failed_input(),
            _ => None,
        }
    }
}

/// Whether a log or loader error that is a conflict is among `e`'s sources.
fn conflict_in_sources(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = e.source();
    while let Some(s) = next {
        if let Some(log) = s.downcast_ref::<LogError>() {
            if log.is_conflict() {
                return true;
            }
        } else if let Some(load) = s.downcast_ref::<LoadError>()
            && load.is_conflict()
        {
            return true;
        }
        next = s.source();
    }
    false
}

/// Seconds spent per stage.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CompactStages {
    /// Reading the log and manifests, planning.
    pub plan_s: f64,
    /// Merging: reading slices, comparing keys, gathering rows (the loader's time inside).
    pub merge_s: f64,
    /// The loader's stages over every pass.
    pub write: StageTimes,
    pub commit_s: f64,
}

impl CompactStages {
    /// Adds `other`'s times to these.
    pub fn add(&mut self, other: &CompactStages) {
        self.plan_s += other.plan_s;
        self.merge_s += other.merge_s;
        self.write.add(&other.write);
        self.commit_s += other.commit_s;
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct CompactReport {
    pub table: String,
    /// The version read, and the one committed (`None`: nothing written).
    pub read_version: Option<u64>,
    pub version: Option<u64>,
    /// Objects of the version read that the compaction replaced.
    pub input_objects: usize,
    pub input_bytes: u64,
    pub input_rows: u64,
    /// Objects the compaction leaves in its last version (as many rows as the input).
    pub output_objects: usize,
    pub output_bytes: u64,
    pub output_rows: u64,
    /// Bytes stored over every pass and step: intermediate objects and rows written back
    /// included.
    pub written_bytes: u64,
    /// Objects that overlap nothing, left as they are.
    pub untouched_objects: usize,
    /// Steps committed, each a version.
    pub steps: usize,
    /// Chains merged (runs of loads and compactions, or runs of objects sorted again).
    pub chains: usize,
    /// Merge passes: 1 when every chain fits at once.
    pub passes: usize,
    pub fan_in: usize,
    pub slice_rows: usize,
    /// `written_bytes` over `output_bytes`.
    pub written_over_output: f64,
    /// Bytes loads published since the table was last one sequence (before this run's
    /// commits, loads that landed meanwhile not counted).
    pub loaded_since_full_bytes: u64,
    /// Bytes merges wrote since then, this run's included.
    pub written_since_full_bytes: u64,
    /// The cumulative write amplification: `written_since_full_bytes` over
    /// `loaded_since_full_bytes`, what keeping the table clustered cost per byte loaded.
    pub write_amplification: f64,
    /// Bytes loads published and merges wrote since the table began.
    pub loaded_bytes_total: u64,
    pub written_bytes_total: u64,
    /// Intermediate objects written by earlier passes and deleted after the commit.
    pub intermediate_objects: usize,
    /// The deepest overlap before and after, as `verify` counts it (objects of the current
    /// layout; touching ends counted once).
    pub depth_before: usize,
    pub depth_after: usize,
    /// The maintenance policy applied (`maintain`); `None` for `compact`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ravel_layout::Maintenance>,
    /// The deepest overlap the policy allows after it (1 for `compact`; `None`: no bound).
    pub depth_bound: Option<usize>,
    /// Why the last step was chosen, or why there was nothing to do.
    pub reason: String,
    /// The merge's estimated slices plus the loader's peak, bytes.
    pub peak_budget_bytes: u64,
    pub stages: CompactStages,
    pub wall_s: f64,
    pub dry_run: bool,
    /// Objects of the version read that other Delta writers added.
    pub foreign_objects: usize,
    /// Those taken in before the merge, as a version of their own; in a dry run, what would be
    /// (its version the one it would commit; nothing is written).
    pub adopted: Option<Adopted>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_changed() -> LogError {
        LogError::TableChanged {
            path: "data/x.parquet".into(),
            version: 3,
        }
    }

    #[test]
    fn a_conflict_is_found_however_deeply_it_is_wrapped() {
        let wrapped = CompactError::Load(LoadError::Failed {
            writing: ravel_loader::Writing::Merge,
            left_behind: vec![],
            source: Box::new(LoadError::Log(table_changed())),
        });
        assert!(wrapped.is_conflict());
        assert!(CompactError::Log(table_changed()).is_conflict());
        let adopted = CompactError::Load(LoadError::Log(table_changed()));
        assert!(adopted.is_conflict());
        assert!(!CompactError::NoProgress.is_conflict());
        assert!(!CompactError::Log(LogError::NoSuchVersion(2)).is_conflict());
    }

    #[test]
    fn a_fan_in_below_two_is_refused_as_bad_input() {
        let mut opts = CompactOptions {
            load: LoadOptions::default(),
            fan_in: Some(1),
            max_input_bytes: None,
            dry_run: false,
            max_steps: None,
        };
        let err = opts.validate().unwrap_err();
        assert!(err.is_invalid_input(), "{err}");
        assert!(err.to_string().contains("at least 2"), "{err}");
        opts.fan_in = Some(2);
        opts.validate().unwrap();
        opts.fan_in = None;
        opts.validate().unwrap();
    }

    #[test]
    fn a_read_error_keeps_its_source_and_its_words() {
        let source = parquet::errors::ParquetError::General("bad page".into());
        let err = CompactError::Read { source };
        assert_eq!(err.to_string(), "reading an input object");
        assert_eq!(
            ravel_store::ErrorChain::new(&err).to_string(),
            "reading an input object: Parquet error: bad page"
        );
        assert!(std::error::Error::source(&err).is_some());
        assert!(
            CompactError::NoProgress
                .to_string()
                .ends_with("the plan made no progress")
        );
    }
}
