//! What a commit checks before it publishes anything: the plan against itself, each result
//! against its step, the results' objects (and a merge's inputs) against the store, and that
//! every row is published once. Each failed check names what disagrees.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;
use parquet::errors::ParquetError;
use ravel_manifest::{ObjectEntry, compare_keys};
use ravel_store::{Store, TablePaths};
use serde_json::Value;

use super::footer::{Footer, FooterError, footer};
use super::{Job, JobError, JobOperation, JobStep, StepKind, StepResult, StepWork};

/// Who lists an object: a step's result, or one of the plan's overlapping sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    Step(usize),
    Set(usize),
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holder::Step(s) => write!(f, "the result of step {s}"),
            Holder::Set(i) => write!(f, "set {i} of the plan"),
        }
    }
}

/// Why a commit refused a plan or its results. Nothing was published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    #[error("the plan's step at position {position} is numbered {index}")]
    StepNumber { position: usize, index: usize },
    #[error("split step {step} comes after a merge step: a load's split steps come first")]
    SplitAfterMerge { step: usize },
    #[error("step {step} is a split step, but a {operation} has none")]
    SplitInMerge {
        step: usize,
        operation: &'static str,
    },
    #[error(
        "merge step {step} of a load names set {set}: a load's merge steps read the split steps' runs"
    )]
    SetInLoad { step: usize, set: usize },
    #[error("merge step {step} of a {operation} names no overlapping set")]
    NoSet {
        step: usize,
        operation: &'static str,
    },
    #[error("merge step {step} names set {set}; the plan has {sets}")]
    NoSuchSet {
        step: usize,
        set: usize,
        sets: usize,
    },
    #[error("no merge step covers {}", space(*set))]
    NoRanges { set: Option<usize> },
    #[error("merge step {step} is the first of {} but starts at {lo}: the first range must be open below", space(*set))]
    RangeStart {
        set: Option<usize>,
        step: usize,
        lo: String,
    },
    #[error("merge step {step} is the last of {} but ends at {hi}: the last range must be open above", space(*set))]
    RangeEnd {
        set: Option<usize>,
        step: usize,
        hi: String,
    },
    #[error("merge step {step}'s range [{lo}, {hi}) holds no key")]
    EmptyRange { step: usize, lo: String, hi: String },
    #[error(
        "merge step {step} starts at {lo}, but step {previous} before it ends at {hi}: the key ranges must meet"
    )]
    RangesApart {
        step: usize,
        lo: String,
        previous: usize,
        hi: String,
    },
    #[error("split steps {first} and {second} both take share {share}")]
    ShareTwice {
        share: usize,
        first: usize,
        second: usize,
    },
    #[error("the job's inputs list {input} twice")]
    InputListedTwice { input: String },
    #[error("input {input} is read by split step {first} and again by split step {second}")]
    InputTwice {
        input: String,
        first: usize,
        second: usize,
    },
    #[error(
        "split step {step} reads {input}, which the job's inputs (what the commit records as consumed) do not list"
    )]
    InputNotListed { step: usize, input: String },
    #[error(
        "the job's inputs list {input}, which no split step reads: it would be recorded as consumed and never loaded"
    )]
    InputNotRead { input: String },
    #[error("object {key} is listed by {first} and again by {second}")]
    ObjectTwice {
        key: String,
        first: Holder,
        second: Holder,
    },
    #[error("the plan sorts by [{plan}], the table by [{table}]")]
    SortKey { plan: String, table: String },
    #[error("the result of step {step} was written for table {found:?}, not for table {table:?}")]
    OtherTable {
        step: usize,
        found: String,
        table: String,
    },
    #[error(
        "the result of step {step} is a {result} step's, but step {step} of the plan is a {plan} step"
    )]
    KindMismatch {
        step: usize,
        result: &'static str,
        plan: &'static str,
    },
    #[error("object {key} of {holder} does not lie under {prefix}")]
    OutsideTable {
        holder: Holder,
        key: String,
        prefix: String,
    },
    /// `keys` are the object's first and last, `range` the step's `[lo, hi)`.
    #[error("object {key} of step {step} holds keys {keys}, outside the step's range {range}")]
    OutsideRange {
        step: usize,
        key: String,
        keys: String,
        range: String,
    },
    #[error("the result of step {step} says {claimed} rows, its objects hold {objects}")]
    ResultRows {
        step: usize,
        claimed: u64,
        objects: u64,
    },
    #[error("split step {step} was to read {planned}, its result says it read {read}")]
    SplitRead {
        step: usize,
        planned: String,
        read: String,
    },
    #[error("split step {step} read {read} bytes of {input}, the plan's inputs say {planned}")]
    InputSize {
        step: usize,
        input: String,
        planned: u64,
        read: u64,
    },
    #[error("split step {step} read inputs of {inputs} rows, its result says {rows}")]
    InputRows { step: usize, inputs: u64, rows: u64 },
    #[error(
        "input {input} holds {footer} rows by its footer, split step {step}'s result says {read}"
    )]
    InputFooterRows {
        step: usize,
        input: String,
        footer: u64,
        read: u64,
    },
    #[error("object {key} of {holder} is not in the store")]
    ObjectMissing { holder: Holder, key: String },
    #[error("object {key} of {holder} is {stored} bytes in the store, {holder} says {claimed}")]
    ObjectBytes {
        holder: Holder,
        key: String,
        claimed: u64,
        stored: u64,
    },
    #[error("object {key} of {holder} holds {stored} rows by its footer, {holder} says {claimed}")]
    ObjectRows {
        holder: Holder,
        key: String,
        claimed: u64,
        stored: u64,
    },
    #[error(
        "object {key} of {holder} holds {stored} rows by its footer, its statistics say {claimed}"
    )]
    StatsRows {
        holder: Holder,
        key: String,
        claimed: u64,
        stored: u64,
    },
    #[error(
        "object {key} of {holder}: its footer's {end} key is {stored}, {holder} says {claimed}"
    )]
    ObjectKey {
        holder: Holder,
        key: String,
        end: &'static str,
        claimed: String,
        stored: String,
    },
    #[error("object {key} of {holder} has no Parquet footer")]
    NotParquet {
        holder: Holder,
        key: String,
        #[source]
        source: ParquetError,
    },
    #[error(
        "the split result stored for share {share} is step {found}'s; the plan's step {step} takes that share"
    )]
    SplitStored {
        share: usize,
        step: usize,
        found: usize,
    },
    #[error(
        "the split steps wrote {split} rows, the merge steps {merge}: a key range is missing or read twice"
    )]
    LoadRows { split: u64, merge: u64 },
    #[error("merge steps {first} to {last} read objects of {inputs} rows and wrote {outputs}")]
    MergeRows {
        first: usize,
        last: usize,
        inputs: u64,
        outputs: u64,
    },
}

/// The key space a set of merge steps cuts, as messages name it.
fn space(set: Option<usize>) -> String {
    match set {
        None => "the load's key space".to_string(),
        Some(i) => format!("set {i}'s key space"),
    }
}

/// A range's end or an object's key as messages show it: JSON, or `open`.
fn key_text(key: Option<&Vec<Value>>) -> String {
    key.map_or("open".to_string(), |k| Value::from(k.clone()).to_string())
}

/// A plan checked against itself, that results are checked against.
pub(crate) struct Plan<'a> {
    job: &'a Job,
    paths: &'a TablePaths,
    /// A load's input files, by name: their sizes.
    sizes: BTreeMap<&'a str, u64>,
}

impl<'a> Plan<'a> {
    /// Checks the plan: steps numbered in order and of its operation's kinds, key ranges that
    /// cover each key space once, a load's inputs each read by one split step, a merge's input
    /// objects listed once and under the table.
    pub(crate) fn new(job: &'a Job, paths: &'a TablePaths) -> Result<Plan<'a>, CheckError> {
        numbered(job)?;
        kinds(job)?;
        // A load planned after its inputs were consumed has no steps: it publishes nothing.
        if !(job.operation == JobOperation::Load && job.steps.is_empty()) {
            for (set, steps) in key_spaces(job) {
                ranges(set, &steps)?;
            }
        }
        let sizes = match job.operation {
            JobOperation::Load if job.steps.is_empty() => BTreeMap::new(),
            JobOperation::Load => load_inputs(job)?,
            _ => {
                set_objects(job, paths)?;
                BTreeMap::new()
            }
        };
        Ok(Plan { job, paths, sizes })
    }

    /// Checks one result against its step (which the plan has): the job's table, the step's
    /// kind, objects under the table that hold the rows the result says, within a merge step's
    /// range, and a split step's inputs as planned.
    pub(crate) fn result(&self, r: &StepResult) -> Result<(), CheckError> {
        if r.table != self.job.table {
            return Err(CheckError::OtherTable {
                step: r.step,
                found: r.table.clone(),
                table: self.job.table.clone(),
            });
        }
        rows_add_up(r)?;
        match (&self.job.steps[r.step].work, r.kind) {
            (StepWork::Split { files, .. }, StepKind::Split) => {
                all_under(&self.paths.scratch_root(), r)?;
                self.split_inputs(r, files)
            }
            (StepWork::Merge { lo, hi, .. }, StepKind::Merge) => {
                all_under(&self.paths.data_dir(), r)?;
                if let Some(b) = &r.blooms {
                    under(&self.paths.blooms_dir(), Holder::Step(r.step), &b.key)?;
                }
                let range = Range { lo, hi };
                r.objects.iter().try_for_each(|o| range.holds(r.step, o))
            }
            (work, kind) => Err(CheckError::KindMismatch {
                step: r.step,
                result: kind.name(),
                plan: work_name(work),
            }),
        }
    }

    /// A split step's inputs as its result names them: the planned files in order, each of
    /// the size the plan has, their rows the result's.
    fn split_inputs(&self, r: &StepResult, files: &[String]) -> Result<(), CheckError> {
        for i in 0..files.len().max(r.inputs.len()) {
            let (planned, read) = (files.get(i), r.inputs.get(i));
            let (Some(planned), Some(read)) = (planned, read) else {
                return Err(CheckError::SplitRead {
                    step: r.step,
                    planned: planned.map_or("nothing more".into(), |f| f.clone()),
                    read: read.map_or("nothing more".into(), |f| f.name.clone()),
                });
            };
            if *planned != read.name {
                return Err(CheckError::SplitRead {
                    step: r.step,
                    planned: planned.clone(),
                    read: read.name.clone(),
                });
            }
            let size = self.sizes.get(planned.as_str()).copied().unwrap_or(0);
            if size != read.size {
                return Err(CheckError::InputSize {
                    step: r.step,
                    input: planned.clone(),
                    planned: size,
                    read: read.size,
                });
            }
        }
        let inputs: u64 = r.inputs.iter().map(|i| i.rows).sum();
        if inputs != r.rows {
            return Err(CheckError::InputRows {
                step: r.step,
                inputs,
                rows: r.rows,
            });
        }
        Ok(())
    }
}

fn work_name(work: &StepWork) -> &'static str {
    match work {
        StepWork::Split { .. } => "split",
        StepWork::Merge { .. } => "merge",
    }
}

/// Each step numbered by its position.
fn numbered(job: &Job) -> Result<(), CheckError> {
    match job.steps.iter().enumerate().find(|(i, s)| s.index != *i) {
        Some((position, s)) => Err(CheckError::StepNumber {
            position,
            index: s.index,
        }),
        None => Ok(()),
    }
}

/// A load's split steps first, its merge steps reading the split steps' runs; a merge's steps
/// each naming one of its sets.
fn kinds(job: &Job) -> Result<(), CheckError> {
    let load = job.operation == JobOperation::Load;
    let mut merged = false;
    for s in &job.steps {
        let step = s.index;
        match &s.work {
            StepWork::Split { .. } if !load => {
                let operation = job.operation.name();
                return Err(CheckError::SplitInMerge { step, operation });
            }
            StepWork::Split { .. } if merged => return Err(CheckError::SplitAfterMerge { step }),
            StepWork::Split { .. } => {}
            StepWork::Merge { set: Some(set), .. } if load => {
                return Err(CheckError::SetInLoad { step, set: *set });
            }
            StepWork::Merge { set: None, .. } if !load => {
                let operation = job.operation.name();
                return Err(CheckError::NoSet { step, operation });
            }
            StepWork::Merge { set: Some(set), .. } if *set >= job.sets.len() => {
                let (set, sets) = (*set, job.sets.len());
                return Err(CheckError::NoSuchSet { step, set, sets });
            }
            StepWork::Merge { .. } => merged = true,
        }
    }
    Ok(())
}

/// The merge steps by the key space their ranges cut (the load's, or each set's), in step
/// order.
fn key_spaces(job: &Job) -> Vec<(Option<usize>, Vec<&JobStep>)> {
    let spaces: Vec<Option<usize>> = match job.operation {
        JobOperation::Load => vec![None],
        _ => (0..job.sets.len()).map(Some).collect(),
    };
    let set_of = |s: &JobStep| match &s.work {
        StepWork::Merge { set, .. } => *set,
        StepWork::Split { .. } => None,
    };
    spaces
        .into_iter()
        .map(|space| {
            let steps = job.merge_steps().filter(|s| set_of(s) == space);
            (space, steps.collect())
        })
        .collect()
}

/// A merge step's key range `[lo, hi)`.
struct Range<'a> {
    lo: &'a Option<Vec<Value>>,
    hi: &'a Option<Vec<Value>>,
}

impl Range<'_> {
    fn of(s: &JobStep) -> Option<Range<'_>> {
        match &s.work {
            StepWork::Merge { lo, hi, .. } => Some(Range { lo, hi }),
            StepWork::Split { .. } => None,
        }
    }

    /// Whether an object's keys lie in the range (an object without keys says nothing).
    fn holds(&self, step: usize, o: &ObjectEntry) -> Result<(), CheckError> {
        let (Some(first), Some(last)) = (&o.first_key, &o.last_key) else {
            return Ok(());
        };
        let above = self
            .lo
            .as_ref()
            .is_none_or(|lo| compare_keys(first, lo) != Ordering::Less);
        let below = self
            .hi
            .as_ref()
            .is_none_or(|hi| compare_keys(last, hi) == Ordering::Less);
        if above && below {
            return Ok(());
        }
        let (lo, hi) = (key_text(self.lo.as_ref()), key_text(self.hi.as_ref()));
        Err(CheckError::OutsideRange {
            step,
            key: o.key.clone(),
            keys: format!("{} to {}", key_text(Some(first)), key_text(Some(last))),
            range: format!("[{lo}, {hi})"),
        })
    }
}

/// One key space's ranges, in step order: the first open below, each holding a key and
/// starting where the one before it ends, the last open above.
fn ranges(set: Option<usize>, steps: &[&JobStep]) -> Result<(), CheckError> {
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else {
        return Err(CheckError::NoRanges { set });
    };
    fn range<'s>(s: &&'s JobStep) -> Range<'s> {
        Range::of(s).expect("merge steps")
    }
    if let Some(lo) = range(first).lo {
        let lo = key_text(Some(lo));
        return Err(CheckError::RangeStart {
            set,
            step: first.index,
            lo,
        });
    }
    if let Some(hi) = range(last).hi {
        let hi = key_text(Some(hi));
        return Err(CheckError::RangeEnd {
            set,
            step: last.index,
            hi,
        });
    }
    for s in steps {
        let r = range(s);
        if let (Some(lo), Some(hi)) = (r.lo, r.hi)
            && compare_keys(lo, hi) != Ordering::Less
        {
            let (lo, hi) = (key_text(Some(lo)), key_text(Some(hi)));
            return Err(CheckError::EmptyRange {
                step: s.index,
                lo,
                hi,
            });
        }
    }
    steps.windows(2).try_for_each(|pair| meet(pair[0], pair[1]))
}

/// Two consecutive ranges meet: the second starts where the first ends, inside the key space.
fn meet(before: &JobStep, after: &JobStep) -> Result<(), CheckError> {
    let (a, b) = (Range::of(before), Range::of(after));
    let (hi, lo) = (a.and_then(|r| r.hi.as_ref()), b.and_then(|r| r.lo.as_ref()));
    if let (Some(hi), Some(lo)) = (hi, lo)
        && compare_keys(hi, lo) == Ordering::Equal
    {
        return Ok(());
    }
    Err(CheckError::RangesApart {
        step: after.index,
        lo: key_text(lo),
        previous: before.index,
        hi: key_text(hi),
    })
}

/// `name` with its links and `..` resolved, when it names a file here; else as written.
fn resolved(name: &str) -> String {
    std::fs::canonicalize(name).map_or_else(|_| name.to_string(), |p| p.display().to_string())
}

/// A load's inputs each listed once and read by exactly one split step, every file a split
/// step reads among them, each share taken once; their sizes by name.
fn load_inputs(job: &Job) -> Result<BTreeMap<&str, u64>, CheckError> {
    let mut sizes = BTreeMap::new();
    // One file under two spellings (`a/../b.parquet`, a link) is one file, where it is here to
    // be resolved.
    let mut files = std::collections::BTreeSet::new();
    for i in &job.inputs {
        let another = !files.insert(resolved(&i.name));
        if sizes.insert(i.name.as_str(), i.size).is_some() || another {
            let input = i.name.clone();
            return Err(CheckError::InputListedTwice { input });
        }
    }
    let mut read_by: BTreeMap<&str, usize> = BTreeMap::new();
    let mut read_files: BTreeMap<String, usize> = BTreeMap::new();
    let mut shares: BTreeMap<usize, usize> = BTreeMap::new();
    for s in &job.steps {
        let StepWork::Split { share, files, .. } = &s.work else {
            continue;
        };
        if let Some(first) = shares.insert(*share, s.index) {
            let (share, second) = (*share, s.index);
            return Err(CheckError::ShareTwice {
                share,
                first,
                second,
            });
        }
        for f in files {
            if !sizes.contains_key(f.as_str()) {
                let (step, input) = (s.index, f.clone());
                return Err(CheckError::InputNotListed { step, input });
            }
            read_by.insert(f, s.index);
            if let Some(first) = read_files.insert(resolved(f), s.index) {
                let (input, second) = (f.clone(), s.index);
                return Err(CheckError::InputTwice {
                    input,
                    first,
                    second,
                });
            }
        }
    }
    match job
        .inputs
        .iter()
        .find(|i| !read_by.contains_key(i.name.as_str()))
    {
        Some(i) => Err(CheckError::InputNotRead {
            input: i.name.clone(),
        }),
        None => Ok(sizes),
    }
}

/// A merge's input objects each listed once, under the table's data.
fn set_objects(job: &Job, paths: &TablePaths) -> Result<(), CheckError> {
    let data = paths.data_dir();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, set) in job.sets.iter().enumerate() {
        for o in set.iter().flat_map(|c| &c.objects) {
            under(&data, Holder::Set(i), &o.key)?;
            if let Some(first) = seen.insert(&o.key, i) {
                return Err(CheckError::ObjectTwice {
                    key: o.key.clone(),
                    first: Holder::Set(first),
                    second: Holder::Set(i),
                });
            }
        }
    }
    Ok(())
}

/// `key` is a plain path (no empty, `.` or `..` parts) below `prefix`.
fn under(prefix: &Path, holder: Holder, key: &str) -> Result<(), CheckError> {
    let below = |p: &Path| {
        p.prefix_match(prefix)
            .is_some_and(|mut rest| rest.next().is_some())
    };
    let parsed = Path::parse(key).ok();
    let inside = parsed.is_some_and(|p| p.as_ref() == key && below(&p));
    match inside {
        true => Ok(()),
        false => Err(CheckError::OutsideTable {
            holder,
            key: key.to_string(),
            prefix: format!("{prefix}/"),
        }),
    }
}

fn all_under(prefix: &Path, r: &StepResult) -> Result<(), CheckError> {
    let holder = Holder::Step(r.step);
    r.objects
        .iter()
        .try_for_each(|o| under(prefix, holder, &o.key))
}

/// A result's rows are its objects' rows.
fn rows_add_up(r: &StepResult) -> Result<(), CheckError> {
    let objects: u64 = r.objects.iter().map(|o| o.rows).sum();
    if objects == r.rows {
        return Ok(());
    }
    Err(CheckError::ResultRows {
        step: r.step,
        claimed: r.rows,
        objects,
    })
}

/// The plan sorts by the table's sort key (the manifest records the plan's).
pub(crate) fn sort_key(job: &Job, layout: &ravel_layout::Layout) -> Result<(), CheckError> {
    let table = layout.sort_key_names();
    if job.sort_key == table {
        return Ok(());
    }
    Err(CheckError::SortKey {
        plan: job.sort_key.join(", "),
        table: table.join(", "),
    })
}

/// A group of merge steps about to be published, and what it is checked against.
pub(crate) struct Group<'a> {
    pub job: &'a Job,
    /// The group's results, in step order.
    pub results: &'a [&'a StepResult],
    /// A load's split results as the store holds them (what the merge steps read), by step.
    pub splits: &'a BTreeMap<usize, StepResult>,
    /// A merge's input objects (those of the group's ranges) with their sets.
    pub inputs: Vec<(usize, &'a ObjectEntry)>,
}

/// Before a group is published: no object listed twice, every row once (a load's split rows
/// are its merge rows, a merge's input rows its output rows), and every object in the store as
/// listed (a merge's inputs too).
pub(crate) async fn group(store: &Store, g: &Group<'_>) -> Result<(), JobError> {
    distinct(g.results)?;
    match g.job.operation {
        JobOperation::Load => load_rows(g)?,
        _ => merge_rows(g)?,
    }
    let outputs = g.results.iter().flat_map(|r| {
        let holder = Holder::Step(r.step);
        r.objects.iter().map(move |o| (holder, o))
    });
    let inputs = g.inputs.iter().map(|(set, o)| (Holder::Set(*set), *o));
    stored(store, outputs.chain(inputs).collect()).await
}

/// No object listed by two results (or twice by one).
fn distinct(results: &[&StepResult]) -> Result<(), CheckError> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results {
        for o in &r.objects {
            if let Some(first) = seen.insert(&o.key, r.step) {
                return Err(CheckError::ObjectTwice {
                    key: o.key.clone(),
                    first: Holder::Step(first),
                    second: Holder::Step(r.step),
                });
            }
        }
    }
    Ok(())
}

/// A load's rows: the split steps' (each as the store holds it) are the merge steps'.
fn load_rows(g: &Group<'_>) -> Result<(), CheckError> {
    let split: u64 = g.splits.values().map(|r| r.rows).sum();
    let merge: u64 = g.results.iter().map(|r| r.rows).sum();
    match split == merge {
        true => Ok(()),
        false => Err(CheckError::LoadRows { split, merge }),
    }
}

/// A merge group's rows: its input objects' are its outputs'.
fn merge_rows(g: &Group<'_>) -> Result<(), CheckError> {
    let inputs: u64 = g.inputs.iter().map(|(_, o)| o.rows).sum();
    let outputs: u64 = g.results.iter().map(|r| r.rows).sum();
    let (Some(first), Some(last)) = (g.results.first(), g.results.last()) else {
        return Ok(());
    };
    if inputs == outputs {
        return Ok(());
    }
    Err(CheckError::MergeRows {
        first: first.step,
        last: last.step,
        inputs,
        outputs,
    })
}

/// Objects whose footers are read at once.
const FOOTER_READS: usize = 32;

/// Every object in the store with the size, rows and first and last key listed.
async fn stored(store: &Store, listed: Vec<(Holder, &ObjectEntry)>) -> Result<(), JobError> {
    let os = store.object_store().as_ref();
    let mut checks = futures::stream::iter(listed)
        .map(|(holder, o)| stored_one(os, holder, o))
        .buffer_unordered(FOOTER_READS);
    while checks.try_next().await?.is_some() {}
    Ok(())
}

/// One object against its footer.
async fn stored_one(os: &dyn ObjectStore, holder: Holder, o: &ObjectEntry) -> Result<(), JobError> {
    let key = o.key.clone();
    let f = match footer(os, &o.key).await {
        Ok(f) => f,
        Err(FooterError::Store(object_store::Error::NotFound { .. })) => {
            return Err(CheckError::ObjectMissing { holder, key }.into());
        }
        Err(FooterError::Store(source)) => return Err(JobError::Read { key, source }),
        Err(FooterError::Parquet(source)) => {
            return Err(CheckError::NotParquet {
                holder,
                key,
                source,
            }
            .into());
        }
    };
    if f.size != o.bytes {
        let (claimed, stored) = (o.bytes, f.size);
        return Err(CheckError::ObjectBytes {
            holder,
            key,
            claimed,
            stored,
        }
        .into());
    }
    if f.rows != o.rows {
        let (claimed, stored) = (o.rows, f.rows);
        return Err(CheckError::ObjectRows {
            holder,
            key,
            claimed,
            stored,
        }
        .into());
    }
    stats_rows(holder, o, f.rows)?;
    footer_keys(holder, o, &f)?;
    Ok(())
}

/// The rows an object's Delta statistics record (what Delta readers count) are its footer's.
fn stats_rows(holder: Holder, o: &ObjectEntry, stored: u64) -> Result<(), CheckError> {
    let Some(stats) = &o.delta_stats else {
        return Ok(());
    };
    let parsed: Option<Value> = serde_json::from_str(stats).ok();
    let claimed = parsed.as_ref().and_then(|v| v["numRecords"].as_u64());
    match claimed {
        Some(claimed) if claimed != stored => Err(CheckError::StatsRows {
            holder,
            key: o.key.clone(),
            claimed,
            stored,
        }),
        _ => Ok(()),
    }
}

/// The first and last key listed are the footer's (when the footer records them).
fn footer_keys(holder: Holder, o: &ObjectEntry, f: &Footer) -> Result<(), CheckError> {
    let ends = [
        ("first", &o.first_key, &f.first_key),
        ("last", &o.last_key, &f.last_key),
    ];
    for (end, claimed, stored) in ends {
        let Some(stored) = stored else { continue };
        if claimed.as_ref() != Some(stored) {
            return Err(CheckError::ObjectKey {
                holder,
                key: o.key.clone(),
                end,
                claimed: key_text(claimed.as_ref()),
                stored: key_text(Some(stored)),
            });
        }
    }
    Ok(())
}

/// The split steps each have their result in the store (the merge steps read them).
pub(crate) fn splits_done(job: &Job, splits: &BTreeMap<usize, StepResult>) -> Result<(), JobError> {
    match job
        .split_steps()
        .find(|(step, _)| !splits.contains_key(step))
    {
        Some((step, _)) => Err(JobError::MissingResult {
            job: job.id.clone(),
            step,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merge steps over the key ranges `[lo, hi)`, keys of one integer.
    fn steps(ranges: &[(Option<i64>, Option<i64>)]) -> Vec<JobStep> {
        let key = |k: Option<i64>| k.map(|k| vec![Value::from(k)]);
        let step = |(index, (lo, hi)): (usize, &(Option<i64>, Option<i64>))| JobStep {
            index,
            work: StepWork::Merge {
                set: None,
                lo: key(*lo),
                hi: key(*hi),
                bytes: 0,
            },
        };
        ranges.iter().enumerate().map(step).collect()
    }

    fn check(ranges_of: &[(Option<i64>, Option<i64>)]) -> Result<(), CheckError> {
        let steps = steps(ranges_of);
        let refs: Vec<&JobStep> = steps.iter().collect();
        ranges(None, &refs)
    }

    #[test]
    fn ranges_that_cover_the_key_space_once_pass() {
        check(&[(None, None)]).unwrap();
        check(&[(None, Some(3)), (Some(3), Some(7)), (Some(7), None)]).unwrap();
    }

    #[test]
    fn ranges_with_a_gap_an_overlap_or_a_closed_end_are_refused() {
        let gap = check(&[(None, Some(3)), (Some(4), None)]).unwrap_err();
        assert!(
            matches!(gap, CheckError::RangesApart { step: 1, .. }),
            "{gap}"
        );
        let overlap = check(&[(None, Some(5)), (Some(3), None)]).unwrap_err();
        assert!(
            matches!(overlap, CheckError::RangesApart { .. }),
            "{overlap}"
        );
        let start = check(&[(Some(1), None)]).unwrap_err();
        assert!(
            matches!(start, CheckError::RangeStart { step: 0, .. }),
            "{start}"
        );
        let end = check(&[(None, Some(9))]).unwrap_err();
        assert!(matches!(end, CheckError::RangeEnd { step: 0, .. }), "{end}");
        assert!(matches!(
            check(&[]),
            Err(CheckError::NoRanges { set: None })
        ));
    }

    #[test]
    fn ranges_that_meet_but_read_rows_twice_are_refused() {
        // Each meets the one before, but [5, 3) holds no key and its neighbours overlap.
        let inverted = check(&[(None, Some(5)), (Some(5), Some(3)), (Some(3), None)]);
        assert!(matches!(
            inverted,
            Err(CheckError::EmptyRange { step: 1, .. })
        ));
        // Two ranges of the whole key space "meet" at an open end.
        let twice = check(&[(None, None), (None, None)]).unwrap_err();
        assert!(
            matches!(twice, CheckError::RangesApart { step: 1, .. }),
            "{twice}"
        );
    }

    #[test]
    fn keys_outside_the_tables_directory_are_refused() {
        let data = TablePaths::new("t").unwrap().data_dir();
        under(&data, Holder::Step(0), "t/data/a.parquet").unwrap();
        for key in [
            "u/data/a.parquet",
            "t/data/../../u/data/a.parquet",
            "t//data/a.parquet",
            "t/data",
        ] {
            let e = under(&data, Holder::Step(0), key).unwrap_err();
            assert!(matches!(e, CheckError::OutsideTable { .. }), "{key}: {e}");
        }
    }
}
