//! Planning a job: a load's shares and key ranges, or a merge's key ranges.

use std::cmp::Ordering;
use std::path::PathBuf;

use ravel_layout::{Layout, LayoutStore};
use ravel_log::TableLog;
use ravel_manifest::compare_keys;
use ravel_store::Store;
use serde_json::Value;

use super::{JOB_FORMAT, Job, JobChain, JobError, JobOperation, JobStep, StepGeometry, StepWork};
use crate::plan::{Step, Window};
use crate::{CompactError, Merge};

/// How a job is cut.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Merge steps (key ranges), at most one per object the input fills (`object_bytes`); a
    /// load also splits its input into as many shares, at most one per file. A plan clamped to
    /// fewer says so in [`Job::notes`].
    pub steps: usize,
    /// Geometry and budget of each step.
    pub geometry: StepGeometry,
}

/// Rows sampled per merge step for a load's cut points, and the sample's bounds.
const SAMPLE_PER_STEP: usize = 64;
const SAMPLE_ROWS: std::ops::RangeInclusive<usize> = 16_384..=262_144;

/// Plans a distributed load of `inputs` (Parquet files or globs) into `table`, which must
/// have a clustering key: shares of the files in order (about equal bytes) and key ranges cut
/// at quantiles of a sample of the inputs' sort keys. A job for inputs a version consumed
/// already has no steps; its commit reports that version.
pub async fn plan_load(
    store: &Store,
    table: &str,
    inputs: &[PathBuf],
    opts: &PlanOptions,
) -> Result<Job, CompactError> {
    if opts.steps == 0 {
        return Err(JobError::NoSteps.into());
    }
    let layouts = LayoutStore::new(store, table)?;
    let layout = layouts.load().await?;
    layout.validate()?;
    if layout.clustering_key.is_none() {
        return Err(CompactError::NotClustered(table.to_string()));
    }
    let files = ravel_loader::expand_inputs(inputs)?;
    if files.is_empty() {
        return Err(JobError::NoInputs(display(inputs)).into());
    }
    if let Some(f) = files.iter().find(|f| {
        ravel_loader::InputFormat::from_path(f) != Some(ravel_loader::InputFormat::Parquet)
    }) {
        return Err(JobError::NotParquet {
            input: f.display().to_string(),
        }
        .into());
    }
    let identities = ravel_loader::input_files(&files)?;
    let log = TableLog::new(store.object_store().clone(), layouts.table().clone());
    let newest = log.latest().await?;
    let consumed = ravel_log::Consumed {
        inputs: identities.clone(),
        reload: false,
    };
    let mut job = job_of(
        store,
        table,
        &layout,
        newest.version,
        opts,
        JobOperation::Load,
    );
    job.inputs = identities;
    match newest.inputs_stand(&consumed) {
        ravel_log::InputsStand::New => newest.check_new(&consumed, ravel_log::now_ms())?,
        ravel_log::InputsStand::Published { version } => {
            job.reason =
                format!("version {version} consumed these inputs already: nothing to load");
            return Ok(job);
        }
        ravel_log::InputsStand::Partly {
            input,
            version,
            new,
        } => {
            let e = ravel_log::LogError::PartlyConsumed {
                input,
                version,
                new,
            };
            return Err(CompactError::Log(e));
        }
    }
    let total: u64 = job.inputs.iter().map(|i| i.size).sum();
    let merges = merge_steps(opts, total, &mut job.notes);
    let shares = shares(&files, &job.inputs, opts.steps);
    if shares.len() < opts.steps {
        job.notes.push(format!(
            "--steps {} clamped to the input files: {} (a file is never divided)",
            opts.steps,
            counted(shares.len(), "split step")
        ));
    }
    let cuts = sampled_cuts(&files, &layout, merges).await?;
    for (share, files) in shares.into_iter().enumerate() {
        let index = job.steps.len();
        job.steps.push(JobStep {
            index,
            work: StepWork::Split {
                share,
                bytes: files.iter().map(|f| f.1).sum(),
                files: files.into_iter().map(|f| f.0).collect(),
            },
        });
    }
    let ranges = ranges(cuts);
    let per = total / ranges.len() as u64;
    for w in ranges {
        let index = job.steps.len();
        job.steps.push(JobStep {
            index,
            work: StepWork::Merge {
                set: None,
                lo: w.lo,
                hi: w.hi,
                bytes: per,
            },
        });
    }
    job.reason = format!("a globally sorted load of {} files", files.len());
    Ok(job)
}

/// Merge steps over `bytes` of input: `--steps`, but no more than the objects the input fills
/// (`bytes / object_bytes` rounded up, at least 1), so that each step writes an object of the
/// planned size at least. A clamp is noted in the job.
fn merge_steps(opts: &PlanOptions, bytes: u64, notes: &mut Vec<String>) -> usize {
    let object_bytes = opts.geometry.object_bytes.max(1);
    let bound = usize::try_from(bytes.div_ceil(object_bytes).max(1)).unwrap_or(usize::MAX);
    if opts.steps <= bound {
        return opts.steps;
    }
    notes.push(format!(
        "--steps {} clamped to the objects the input fills: {} for {bytes} input bytes at \
         --object-bytes {object_bytes} (a merge step writes one object at least)",
        opts.steps,
        counted(bound, "merge step")
    ));
    bound
}

/// `n` things, as a note counts them.
fn counted(n: usize, thing: &str) -> String {
    match n {
        1 => format!("1 {thing}"),
        n => format!("{n} {thing}s"),
    }
}

fn display(inputs: &[PathBuf]) -> String {
    inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The files in `shares` groups of consecutive files of about equal bytes (fewer when there
/// are fewer files): each with its path and size.
fn shares(
    files: &[PathBuf],
    identities: &[ravel_log::InputFile],
    shares: usize,
) -> Vec<Vec<(String, u64)>> {
    let n = shares.min(files.len()).max(1);
    let total: u64 = identities.iter().map(|i| i.size).sum::<u64>().max(1);
    let mut out: Vec<Vec<(String, u64)>> = vec![Vec::new(); n];
    let mut before = 0u64;
    for (i, id) in identities.iter().enumerate() {
        // The share the file's first byte falls in, never leaving a later share empty.
        let by_bytes = (before as u128 * n as u128 / total as u128) as usize;
        let share = by_bytes.min(n - 1).max(n.saturating_sub(files.len() - i));
        // The canonical path: every worker reads it alike, wherever it starts.
        out[share].push((id.name.clone(), id.size));
        before += id.size;
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Cut points from a sample of the inputs' sort keys, spread over the files by rows.
async fn sampled_cuts(
    files: &[PathBuf],
    layout: &Layout,
    steps: usize,
) -> Result<Vec<Vec<Value>>, CompactError> {
    if steps <= 1 {
        return Ok(Vec::new());
    }
    let (files, layout) = (files.to_vec(), layout.clone());
    let keys = tokio::task::spawn_blocking(move || {
        let rows: Vec<u64> = files
            .iter()
            .map(|f| super::sample::parquet_rows(f))
            .collect::<Result<_, _>>()?;
        let total = rows.iter().sum::<u64>().max(1);
        let want = (steps * SAMPLE_PER_STEP).clamp(*SAMPLE_ROWS.start(), *SAMPLE_ROWS.end());
        let mut keys = Vec::new();
        for (f, r) in files.iter().zip(rows) {
            let n = ((want as u128 * r as u128).div_ceil(total as u128)) as usize;
            keys.extend(super::sample::keys(f, &layout, n)?);
        }
        Ok::<_, JobError>(keys)
    })
    .await
    .map_err(|e| {
        CompactError::Load(ravel_loader::LoadError::internal("sampling the inputs")(e))
    })??;
    Ok(super::sample::cuts(keys, steps))
}

/// The ranges between consecutive cut points, unbounded at both ends.
fn ranges(cuts: Vec<Vec<Value>>) -> Vec<Window> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut lo = None;
    for c in cuts {
        out.push(Window {
            lo: lo.take(),
            hi: Some(c.clone()),
        });
        lo = Some(c);
    }
    out.push(Window { lo, hi: None });
    out
}

/// Plans a distributed compaction of `table` (or, with [`Merge::Maintain`], the merge its
/// maintenance policy chooses now): every overlapping set the single-machine command merges,
/// each cut into key ranges at byte quantiles of its objects' first keys (`opts.steps` over all
/// sets, by bytes, at most one per object their bytes fill, at least one per set). A set with
/// objects under an older layout is one step (sorted again whole, as `compact` sorts it). A
/// step over more chains than one pass holds merges its range in passes. A job with nothing to
/// merge has no steps.
pub async fn plan_compact(
    store: &Store,
    table: &str,
    opts: &PlanOptions,
    merge: Merge,
) -> Result<Job, CompactError> {
    if opts.steps == 0 {
        return Err(JobError::NoSteps.into());
    }
    let o = crate::run::open(store, table).await?;
    if o.foreign > 0 {
        return Err(JobError::ForeignObjects {
            table: table.to_string(),
        }
        .into());
    }
    let operation = match merge {
        Merge::Compact => JobOperation::Compact,
        Merge::Maintain => JobOperation::Maintain,
    };
    let mut job = job_of(
        store,
        table,
        &o.layout,
        Some(o.read_version),
        opts,
        operation,
    );
    let first = crate::plan(&o.live, &o.layout.sort_key_names());
    let (sets, full, reason) = if merge == Merge::Maintain {
        let d = crate::maintenance::decide(&first, &o.layout.maintenance);
        (d.step.into_iter().collect(), d.full, d.reason)
    } else if first.steps.is_empty() {
        (Vec::new(), false, "no two objects overlap".to_string())
    } else {
        let full = first.steps.len() == 1;
        let why = "compact merges every overlapping object".to_string();
        (first.steps.clone(), full, why)
    };
    job.full = full;
    job.reason = reason;
    let total: u64 = sets.iter().map(Step::input_bytes).sum::<u64>().max(1);
    let steps = match sets.is_empty() {
        true => opts.steps,
        false => merge_steps(opts, total, &mut job.notes),
    };
    for (i, set) in sets.iter().enumerate() {
        let splittable = set.chains.iter().all(|c| c.sorted);
        let share = (steps as u128 * set.input_bytes() as u128 / total as u128) as usize;
        let n = if splittable { share.max(1) } else { 1 };
        for w in ranges(byte_cuts(set, n)) {
            let bytes = within_bytes(set, &w);
            let index = job.steps.len();
            job.steps.push(JobStep {
                index,
                work: StepWork::Merge {
                    set: Some(i),
                    lo: w.lo,
                    hi: w.hi,
                    bytes,
                },
            });
        }
        job.sets
            .push(set.chains.iter().map(JobChain::from_chain).collect());
    }
    Ok(job)
}

/// A job with no steps yet.
fn job_of(
    store: &Store,
    table: &str,
    layout: &Layout,
    read_version: Option<u64>,
    opts: &PlanOptions,
    operation: JobOperation,
) -> Job {
    Job {
        format: JOB_FORMAT,
        id: ravel_store::unique_id(),
        operation,
        store: store_url(store),
        table: table.to_string(),
        read_version,
        layout_generation: layout.generation,
        sort_key: layout.sort_key_names(),
        geometry: opts.geometry,
        steps: Vec::new(),
        sets: Vec::new(),
        inputs: Vec::new(),
        full: false,
        reason: String::new(),
        notes: Vec::new(),
    }
}

/// The store as every worker opens it: a local directory by its absolute path.
fn store_url(store: &Store) -> String {
    let location = store.location();
    if location.contains("://") {
        return location.to_string();
    }
    std::fs::canonicalize(location).map_or(location.to_string(), |p| p.display().to_string())
}

/// `n - 1` cut points of a set at byte quantiles of its objects, ordered by first key.
fn byte_cuts(set: &Step, n: usize) -> Vec<Vec<Value>> {
    let mut objects: Vec<(&Vec<Value>, u64)> = set
        .input_objects()
        .filter_map(|o| o.entry.first_key.as_ref().map(|k| (k, o.entry.bytes)))
        .collect();
    objects.sort_by(|a, b| compare_keys(a.0, b.0));
    let total: u64 = objects.iter().map(|o| o.1).sum();
    let mut cuts: Vec<Vec<Value>> = Vec::new();
    let (mut before, mut j) = (0u64, 1usize);
    for (key, bytes) in &objects {
        while j < n && before >= total * j as u64 / n as u64 {
            let above = cuts
                .last()
                .is_none_or(|l| compare_keys(key, l) == Ordering::Greater);
            let above_first = compare_keys(key, objects[0].0) == Ordering::Greater;
            if above && above_first {
                cuts.push((*key).clone());
            }
            j += 1;
        }
        before += bytes;
    }
    cuts
}

/// Bytes of the set's objects that hold a key of `w`.
fn within_bytes(set: &Step, w: &Window) -> u64 {
    set.input_objects()
        .filter(|o| crate::window::within(&o.entry, w))
        .map(|o| o.entry.bytes)
        .sum()
}
