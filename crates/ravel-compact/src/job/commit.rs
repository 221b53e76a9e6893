//! Publishing a job's steps: one version holding every merge step's objects, or (for a merge)
//! one version per group of steps that share no input object, as Iceberg's partial progress.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use ravel_layout::{Layout, LayoutStore};
use ravel_loader::{Committed, LoadError, Replacement};
use ravel_manifest::{BloomIndex, MANIFEST_FORMAT, Manifest, ObjectEntry};
use ravel_store::{Store, TablePaths};
use serde::Serialize;

use super::{Job, JobError, JobOperation, StepResult, StepWork, check};
use crate::CompactError;
use crate::plan::Window;
use crate::publish::Publisher;

/// How a job's steps are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitMode {
    /// One version holding every step's objects; every merge step must have its result.
    Whole,
    /// A merge's groups of steps (steps that share an input object belong together), each
    /// committed on its own once all its steps have results; groups missing one are reported.
    PerStep,
}

/// A commit: the job and the results of its steps (any order; a step's extra results, from
/// attempts that also finished, are the same objects).
pub struct Commit<'a> {
    pub job: &'a Job,
    pub results: Vec<StepResult>,
    pub mode: CommitMode,
}

/// What a commit published.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct CommitReport {
    pub job: String,
    pub operation: JobOperation,
    pub table: String,
    pub read_version: Option<u64>,
    /// The newest version holding the job's objects (`None`: nothing published).
    pub version: Option<u64>,
    /// A version had published the job's rows already (a rerun): nothing was written.
    pub already_published: bool,
    pub objects: usize,
    pub rows: u64,
    pub stored_bytes: u64,
    /// Bytes the steps stored (spill and objects).
    pub written_bytes: u64,
    /// Objects the versions removed (a merge's inputs).
    pub removed_objects: usize,
    /// Each group of steps and what became of it (one group unless `--per-step`).
    pub groups: Vec<GroupOutcome>,
    /// Bytes of the log entries written.
    pub entry_bytes: u64,
    /// Seconds until the last version was committed; the rest of `wall_s` is clearing the
    /// job's scratch (the spill of a load).
    pub published_s: f64,
    pub wall_s: f64,
}

/// One group of steps committed together.
#[derive(Debug, Clone, Serialize)]
pub struct GroupOutcome {
    pub steps: Vec<usize>,
    /// The version that published it; `None` when a step had no result.
    pub version: Option<u64>,
    /// Steps of the group with no result.
    pub missing: Vec<usize>,
}

impl CommitReport {
    /// Groups that were not published (a step had no result).
    pub fn failed_groups(&self) -> usize {
        self.groups.iter().filter(|g| !g.missing.is_empty()).count()
    }
}

/// Publishes `c.job`'s steps (see [`CommitMode`]), once the plan and the results check out
/// (see [`super::CheckError`]): before anything is written, a plan or a result that disagrees
/// is refused. A load's version records its inputs as consumed, so that a commit run again, or a
/// rerun of the whole job, publishes nothing twice.
/// A merge's version conflicts when one of its inputs left the table since the plan
/// ([`ravel_log::LogError::TableChanged`]); other versions committed meanwhile are read and the
/// commit is retried on top of them. The job's scratch is deleted after a load's commit.
#[tracing::instrument(name = "commit_job", skip_all, fields(job = %c.job.id))]
pub async fn commit(store: &Store, c: Commit<'_>) -> Result<CommitReport, CompactError> {
    let started = Instant::now();
    let job = c.job;
    job.check_format()?;
    if c.mode == CommitMode::PerStep && job.operation == JobOperation::Load {
        return Err(JobError::PerStepLoad.into());
    }
    let paths = TablePaths::new(&job.table)?;
    let plan = check::Plan::new(job, &paths).map_err(JobError::from)?;
    let results = by_step(&plan, job, c.results)?;
    let layouts = LayoutStore::new(store, &job.table)?;
    let layout = layouts.load().await?;
    job.check_layout(&layout)?;
    check::sort_key(job, &layout).map_err(JobError::from)?;
    let groups = match c.mode {
        CommitMode::Whole => vec![job.merge_steps().map(|s| s.index).collect()],
        CommitMode::PerStep => groups(job),
    };
    let mut report = empty_report(job);
    let splits = match job.operation {
        JobOperation::Load => stored_splits(store, &plan, job, &paths).await?,
        _ => BTreeMap::new(),
    };
    inputs_as_read(&splits).await?;
    let split_bytes: u64 = splits.values().map(|r| r.cost.written_bytes).sum();
    for steps in groups {
        let group = Group {
            steps,
            mode: c.mode,
            splits: &splits,
        };
        let outcome = publish_group(store, job, &layout, &paths, &results, group, &mut report);
        let outcome = outcome.await?;
        report.groups.push(outcome);
        report.published_s = started.elapsed().as_secs_f64();
    }
    report.written_bytes = split_bytes
        + results
            .values()
            .filter(|r| r.kind == super::StepKind::Merge)
            .map(|r| r.cost.written_bytes)
            .sum::<u64>();
    if job.operation == JobOperation::Load {
        clear_scratch(store, &paths, &job.id).await;
    }
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn empty_report(job: &Job) -> CommitReport {
    CommitReport {
        job: job.id.clone(),
        operation: job.operation,
        table: job.table.clone(),
        read_version: job.read_version,
        version: None,
        already_published: false,
        objects: 0,
        rows: 0,
        stored_bytes: 0,
        written_bytes: 0,
        removed_objects: 0,
        groups: Vec::new(),
        entry_bytes: 0,
        published_s: 0.0,
        wall_s: 0.0,
    }
}

/// The results by step, each checked to belong to the job and against its step; the first of
/// a step's results is kept.
fn by_step(
    plan: &check::Plan<'_>,
    job: &Job,
    results: Vec<StepResult>,
) -> Result<BTreeMap<usize, StepResult>, JobError> {
    let mut out = BTreeMap::new();
    for r in results {
        belongs(plan, job, &r)?;
        out.entry(r.step).or_insert(r);
    }
    Ok(out)
}

/// A result of one of the job's steps, that agrees with that step.
fn belongs(plan: &check::Plan<'_>, job: &Job, r: &StepResult) -> Result<(), JobError> {
    if r.job != job.id {
        return Err(JobError::OtherJob {
            job: job.id.clone(),
            step: r.step,
            found: r.job.clone(),
        });
    }
    job.check_step(r.step)?;
    Ok(plan.result(r)?)
}

/// The split steps' results as the merge steps read them (from the job's scratch), each
/// checked like a result handed in; a split step whose result is gone (its job committed
/// already, the scratch cleared) has none.
async fn stored_splits(
    store: &Store,
    plan: &check::Plan<'_>,
    job: &Job,
    paths: &TablePaths,
) -> Result<BTreeMap<usize, StepResult>, JobError> {
    let read = job.split_steps().map(|(step, share)| async move {
        let key = super::split_result(paths, &job.id, share);
        match super::step::get_json::<StepResult>(store, &key, "a split result").await {
            Ok(r) if r.step == step => belongs(plan, job, &r).map(|()| Some(r)),
            Ok(r) => Err(check::CheckError::SplitStored {
                share,
                step,
                found: r.step,
            }
            .into()),
            Err(JobError::Read {
                source: object_store::Error::NotFound { .. },
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    });
    let read: Vec<Option<StepResult>> = futures::stream::iter(read)
        .buffered(SIDECAR_READS)
        .try_collect()
        .await?;
    Ok(read.into_iter().flatten().map(|r| (r.step, r)).collect())
}

/// Each input's rows as the split results say them, against the input's own footer (read
/// here, where the plan read them): a split result cannot drop rows by saying its inputs
/// hold fewer.
async fn inputs_as_read(splits: &BTreeMap<usize, StepResult>) -> Result<(), JobError> {
    let said: Vec<(usize, super::InputRead)> = (splits.values())
        .flat_map(|r| r.inputs.iter().map(|i| (r.step, i.clone())))
        .collect();
    let check = move || {
        for (step, i) in said {
            let footer = super::sample::parquet_rows(std::path::Path::new(&i.name))?;
            if footer != i.rows {
                return Err(JobError::from(check::CheckError::InputFooterRows {
                    step,
                    input: i.name,
                    footer,
                    read: i.rows,
                }));
            }
        }
        Ok(())
    };
    tokio::task::spawn_blocking(check)
        .await
        .expect("reading footers does not panic")
}

/// Merge steps committed together, and how the job is committed.
struct Group<'a> {
    steps: Vec<usize>,
    mode: CommitMode,
    /// A load's split results as the store holds them, by step.
    splits: &'a BTreeMap<usize, StepResult>,
}

/// Publishes one group of merge steps as one version, or reports the steps it lacks.
async fn publish_group(
    store: &Store,
    job: &Job,
    layout: &Layout,
    paths: &TablePaths,
    results: &BTreeMap<usize, StepResult>,
    group: Group<'_>,
    report: &mut CommitReport,
) -> Result<GroupOutcome, CompactError> {
    let Group {
        steps,
        mode,
        splits,
    } = group;
    let missing: Vec<usize> = steps
        .iter()
        .copied()
        .filter(|s| !results.contains_key(s))
        .collect();
    if let (Some(&step), CommitMode::Whole) = (missing.first(), mode) {
        return Err(JobError::MissingResult {
            job: job.id.clone(),
            step,
        }
        .into());
    }
    if !missing.is_empty() {
        return Ok(GroupOutcome {
            steps,
            version: None,
            missing,
        });
    }
    if steps.is_empty() || consumed_already(store, job, paths).await? {
        return match job.operation {
            JobOperation::Load => already_consumed(store, job, paths, steps, report).await,
            _ => Ok(GroupOutcome {
                steps,
                version: None,
                missing,
            }),
        };
    }
    let ordered: Vec<&StepResult> = steps.iter().map(|s| &results[s]).collect();
    let mut manifest = manifest_of(job, &ordered)?;
    let publisher = Publisher::new(store.object_store().clone(), paths.clone(), layout);
    // A merge committed already (a commit run again) holds every object: nothing to build.
    let newest = publisher.log().latest().await?;
    let removes = match job.operation {
        JobOperation::Load => Vec::new(),
        _ => inputs_of(job, &steps),
    };
    let live = match job.operation {
        JobOperation::Load => ravel_log::published_in(paths, &newest, &manifest)?,
        _ => merged_already(paths, &newest, &manifest, &removes)?,
    };
    // A load is checked whenever it records its inputs; a merge whenever it writes.
    if job.operation == JobOperation::Load || live.is_none() {
        check_group(store, job, &steps, &ordered, splits).await?;
    }
    if live.is_none() {
        let with_rows: Vec<&&StepResult> =
            ordered.iter().filter(|r| !r.objects.is_empty()).collect();
        manifest.blooms = join_sidecars(store, paths, &with_rows).await?;
    }
    let committed = match job.operation {
        JobOperation::Load => {
            let consumed = ravel_log::Consumed {
                inputs: job.inputs.clone(),
                reload: false,
            };
            let merged = ordered.iter().map(|r| r.cost.written_bytes).sum::<u64>();
            let split_bytes: u64 = splits.values().map(|r| r.cost.written_bytes).sum();
            let stored: u64 = manifest.objects.iter().map(|o| o.bytes).sum();
            let spilled = (split_bytes + merged).saturating_sub(stored);
            publisher.load(&manifest, spilled, consumed).await
        }
        JobOperation::Compact | JobOperation::Maintain => {
            report.removed_objects += removes.len();
            match live {
                Some(p) => Ok(Committed::AlreadyLive(p)),
                None => {
                    let r = replacement(job, &manifest, removes, &ordered, steps.len());
                    publisher.replace(&manifest, r).await
                }
            }
        }
    }?;
    let version = committed.version();
    let published = matches!(committed, Committed::Version(_));
    report.already_published |= !published;
    if published {
        let joined = manifest.blooms.as_ref().map(|b| b.key.as_str());
        delete_step_sidecars(store, &ordered, joined).await;
    }
    report.version = Some(version);
    report.objects += manifest.objects.len();
    report.rows += manifest.objects.iter().map(|o| o.rows).sum::<u64>();
    report.stored_bytes += manifest.objects.iter().map(|o| o.bytes).sum::<u64>();
    report.entry_bytes += entry_bytes(store, paths, version).await;
    tracing::info!(version, objects = manifest.objects.len(), "job committed");
    Ok(GroupOutcome {
        steps,
        version: Some(version),
        missing: Vec::new(),
    })
}

/// Whether a version consumed a load's inputs already (a commit run again): nothing to build.
async fn consumed_already(
    store: &Store,
    job: &Job,
    paths: &TablePaths,
) -> Result<bool, CompactError> {
    if job.operation != JobOperation::Load {
        return Ok(false);
    }
    let log = ravel_log::TableLog::new(store.object_store().clone(), paths.clone());
    let consumed = ravel_log::Consumed {
        inputs: job.inputs.clone(),
        reload: false,
    };
    Ok(matches!(
        log.latest().await?.inputs_stand(&consumed),
        ravel_log::InputsStand::Published { .. }
    ))
}

/// Deletes the merge steps' own sidecars once the joined one (`joined`, which may be one of
/// them) is published. A failure is logged: `gc` collects them.
async fn delete_step_sidecars(store: &Store, results: &[&StepResult], joined: Option<&str>) {
    let own = results.iter().filter_map(|r| r.blooms.as_ref());
    let keys = own
        .filter(|b| Some(b.key.as_str()) != joined)
        .map(|b| Path::from(b.key.as_str()));
    delete_all(store, keys.collect(), "a step's sidecar").await;
}

/// Deletes `keys` through the store's bulk delete (S3's takes a thousand keys a request).
/// A failure is logged: `gc` collects what is left.
async fn delete_all(store: &Store, keys: Vec<Path>, what: &'static str) {
    let keys = futures::stream::iter(keys.into_iter().map(Ok)).boxed();
    let mut deleted = store.object_store().delete_stream(keys);
    while let Some(r) = deleted.next().await {
        if let Err(e) = r {
            tracing::warn!(error = %ravel_store::ErrorChain::new(&e), "{what} was not deleted; gc collects it");
        }
    }
}

/// A load whose inputs a version consumed before the plan: that version is its publication.
async fn already_consumed(
    store: &Store,
    job: &Job,
    paths: &TablePaths,
    steps: Vec<usize>,
    report: &mut CommitReport,
) -> Result<GroupOutcome, CompactError> {
    let log = ravel_log::TableLog::new(store.object_store().clone(), paths.clone());
    let newest = log.latest().await?;
    let consumed = ravel_log::Consumed {
        inputs: job.inputs.clone(),
        reload: false,
    };
    let version = match newest.inputs_stand(&consumed) {
        ravel_log::InputsStand::Published { version } => Some(version),
        _ => None,
    };
    report.already_published = version.is_some();
    report.version = version;
    Ok(GroupOutcome {
        steps,
        version,
        missing: Vec::new(),
    })
}

/// What a merge's version replaces: its inputs, each output ranked with the highest of them.
fn replacement(
    job: &Job,
    manifest: &Manifest,
    removes: Vec<String>,
    results: &[&StepResult],
    group_steps: usize,
) -> Replacement {
    let rank = job
        .sets
        .iter()
        .flatten()
        .map(|c| c.order)
        .max()
        .unwrap_or(0);
    let n = manifest.objects.len();
    Replacement {
        orders: vec![Some(rank); n],
        chains: vec![None; n],
        removes,
        written_bytes: results.iter().map(|r| r.cost.written_bytes).sum(),
        full: job.full && group_steps == job.merge_steps().count(),
        consumed: Default::default(),
    }
}

/// One manifest of the results' objects, in step order (its Bloom sidecar is joined after).
fn manifest_of(job: &Job, results: &[&StepResult]) -> Result<Manifest, CompactError> {
    let with_rows: Vec<&&StepResult> = results.iter().filter(|r| !r.objects.is_empty()).collect();
    let schema = match with_rows.first().and_then(|r| r.schema.clone()) {
        Some(s) => s,
        None => return Err(LoadError::EmptyInput.into()),
    };
    if let Some(other) = with_rows
        .iter()
        .find(|r| r.schema.as_ref() != Some(&schema))
    {
        return Err(JobError::Schemas {
            first: with_rows[0].step,
            second: other.step,
        }
        .into());
    }
    let objects: Vec<ObjectEntry> = with_rows
        .iter()
        .flat_map(|r| r.objects.iter().cloned())
        .collect();
    let committed_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut h = blake3::Hasher::new();
    h.update(job.id.as_bytes());
    for o in &objects {
        h.update(o.key.as_bytes());
    }
    h.update(&committed_at_ms.to_le_bytes());
    Ok(Manifest {
        format: MANIFEST_FORMAT,
        load_id: format!("{committed_at_ms:013}-{}", &h.finalize().to_hex()[..16]),
        committed_at_ms,
        layout_generation: job.layout_generation,
        sort_key: job.sort_key.clone(),
        schema,
        objects,
        blooms: None,
    })
}

/// Step sidecars read at once while they are joined.
const SIDECAR_READS: usize = 16;

/// One sidecar holding the results' sidecars one after another: a column's section is the
/// concatenation of its sections (each is its objects' filters in order).
async fn join_sidecars(
    store: &Store,
    paths: &TablePaths,
    results: &[&&StepResult],
) -> Result<Option<BloomIndex>, CompactError> {
    let indexes: Vec<&BloomIndex> = results.iter().filter_map(|r| r.blooms.as_ref()).collect();
    let Some(first) = indexes.first() else {
        return Ok(None);
    };
    if indexes.len() == 1 && results.len() == 1 {
        return Ok(Some((*first).clone()));
    }
    let mut columns: BTreeMap<String, Vec<u8>> = first
        .columns
        .keys()
        .map(|c| (c.clone(), Vec::new()))
        .collect();
    // In order, a few read ahead; each one's sections appended as it arrives.
    let mut read_ahead = futures::stream::iter(&indexes)
        .map(|i| read(store, &i.key))
        .buffered(SIDECAR_READS);
    let mut next = indexes.iter();
    while let (Some(bytes), Some(index)) = (read_ahead.try_next().await?, next.next()) {
        for (column, section) in &index.columns {
            let range = section.offset as usize..(section.offset + section.len) as usize;
            let part = bytes.get(range).ok_or_else(|| JobError::Read {
                key: index.key.clone(),
                source: object_store::Error::Generic {
                    store: "sidecar",
                    source: format!("section {column} lies past the end").into(),
                },
            })?;
            columns
                .entry(column.clone())
                .or_default()
                .extend_from_slice(part);
        }
    }
    let mut bytes = ravel_bloom::MAGIC.to_vec();
    let mut sections = BTreeMap::new();
    for (column, part) in columns {
        let offset = bytes.len() as u64;
        bytes.extend_from_slice(&part);
        sections.insert(
            column,
            ravel_manifest::Section {
                offset,
                len: part.len() as u64,
            },
        );
    }
    let key = paths
        .blooms_dir()
        .join(format!("{}.blooms", blake3::hash(&bytes).to_hex()));
    let size = bytes.len() as u64;
    store
        .object_store()
        .put(&key, bytes.into())
        .await
        .map_err(|source| JobError::Write {
            key: key.to_string(),
            source,
        })?;
    Ok(Some(BloomIndex {
        key: key.to_string(),
        bytes: size,
        format: first.format,
        fpp: first.fpp,
        columns: sections,
    }))
}

async fn read(store: &Store, key: &str) -> Result<bytes::Bytes, JobError> {
    let path = Path::from(key);
    let failed = |source| JobError::Read {
        key: key.to_string(),
        source,
    };
    store
        .object_store()
        .get(&path)
        .await
        .map_err(failed)?
        .bytes()
        .await
        .map_err(failed)
}

/// Checks a group of merge steps before it is published (see [`check::group`]).
async fn check_group(
    store: &Store,
    job: &Job,
    steps: &[usize],
    results: &[&StepResult],
    splits: &BTreeMap<usize, StepResult>,
) -> Result<(), JobError> {
    if job.operation == JobOperation::Load {
        check::splits_done(job, splits)?;
    }
    let g = check::Group {
        job,
        results,
        splits,
        inputs: input_objects(job, steps).into_values().collect(),
    };
    check::group(store, &g).await
}

/// The objects a group of merge steps reads: every object of its sets that holds a key of one
/// of its ranges.
fn inputs_of(job: &Job, steps: &[usize]) -> Vec<String> {
    input_objects(job, steps)
        .into_keys()
        .map(str::to_string)
        .collect()
}

/// The objects a group of merge steps reads, by key, each with its set.
fn input_objects<'a>(job: &'a Job, steps: &[usize]) -> BTreeMap<&'a str, (usize, &'a ObjectEntry)> {
    let mut out = BTreeMap::new();
    for s in steps {
        if let StepWork::Merge {
            set: Some(i),
            lo,
            hi,
            ..
        } = &job.steps[*s].work
        {
            let w = Window {
                lo: lo.clone(),
                hi: hi.clone(),
            };
            for o in job.sets[*i].iter().flat_map(|c| &c.objects) {
                if crate::window::within(o, &w) {
                    out.insert(o.key.as_str(), (*i, o));
                }
            }
        }
    }
    out
}

/// Whether a merge's objects are live already (its commit run again). An output that is also
/// one of the merge's inputs (a range whose rows one object held, encoded again to the same
/// bytes, so to the same name) is live before the merge as after: it tells nothing.
fn merged_already(
    paths: &TablePaths,
    base: &ravel_log::Snapshot,
    manifest: &Manifest,
    inputs: &[String],
) -> Result<Option<ravel_log::Published>, ravel_log::LogError> {
    let mut fresh = manifest.clone();
    fresh.objects.retain(|o| !inputs.contains(&o.key));
    if fresh.objects.is_empty() {
        return Ok(None);
    }
    ravel_log::published_in(paths, base, &fresh)
}

/// The merge steps in groups that share no input object, in step order.
fn groups(job: &Job) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut last: BTreeSet<String> = BTreeSet::new();
    for s in job.merge_steps() {
        let inputs: BTreeSet<String> = inputs_of(job, &[s.index]).into_iter().collect();
        match out.last_mut() {
            Some(g) if !inputs.is_disjoint(&last) => g.push(s.index),
            _ => out.push(vec![s.index]),
        }
        last = inputs;
    }
    out
}

/// Bytes of the log entry of `version` (0 when it cannot be read).
async fn entry_bytes(store: &Store, paths: &TablePaths, version: u64) -> u64 {
    store
        .object_store()
        .head(&paths.log_entry(version))
        .await
        .map_or(0, |m| m.size)
}

/// Deletes the job's scratch: its directory and every split attempt's spill. A failure is
/// logged: `gc` collects what is left.
async fn clear_scratch(store: &Store, paths: &TablePaths, job: &str) {
    let os = store.object_store();
    let root = paths.scratch_root();
    let listed: Result<Vec<_>, _> = os.list(Some(&root)).try_collect().await;
    let Ok(listed) = listed else {
        tracing::warn!(job, "the job's scratch was not listed; gc collects it");
        return;
    };
    let ours = |p: &Path| {
        p.prefix_match(&root)
            .and_then(|mut parts| parts.next())
            .is_some_and(|op| op.as_ref().starts_with(job))
    };
    let keys = listed.into_iter().map(|m| m.location).filter(|p| ours(p));
    delete_all(store, keys.collect(), "a scratch object").await;
}
