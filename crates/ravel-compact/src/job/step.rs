//! Running one step of a job: a load's split of one share into sorted runs of spill, or the
//! merge of one key range into objects to publish. A step never touches the log.

use std::path::PathBuf;
use std::time::Instant;

use arrow::datatypes::Schema;
use object_store::{ObjectStoreExt, PutPayload};
use ravel_layout::{ClusteringOrder, LayoutStore};
use ravel_loader::{InputFormat, LoadMode, Loader, Prepared, TsvOptions};
use ravel_store::{Store, TablePaths};

use super::{
    InputRead, JOB_FORMAT, Job, JobError, StepCost, StepKind, StepResult, StepWork,
    split_operation, split_result,
};
use crate::plan::{InputObject, Window};
use crate::writer::{Geometry, Work, Writer};
use crate::{CompactError, CompactOptions};

/// Runs step `step` of `job` and returns what it wrote (see the module docs of
/// [`crate::job`]). Any number of attempts may run, one after another or at once: each
/// writes the same objects, and a split step's latest finished attempt is the one the merge
/// steps read.
#[tracing::instrument(name = "run_step", skip_all, fields(job = %job.id, step))]
pub async fn run_step(store: &Store, job: &Job, step: usize) -> Result<StepResult, CompactError> {
    let started = Instant::now();
    let s = job.check_step(step)?;
    let layouts = LayoutStore::new(store, &job.table)?;
    job.check_layout(&layouts.load().await?)?;
    let mut result = match &s.work {
        StepWork::Split { share, files, .. } => split(store, job, step, *share, files).await?,
        StepWork::Merge { set, lo, hi, .. } => {
            let window = Window {
                lo: lo.clone(),
                hi: hi.clone(),
            };
            merge(store, job, step, *set, &window).await?
        }
    };
    result.cost.wall_s = started.elapsed().as_secs_f64();
    tracing::info!(
        kind = ?result.kind,
        rows = result.rows,
        objects = result.objects.len(),
        written_bytes = result.cost.written_bytes,
        "step finished"
    );
    Ok(result)
}

fn empty_result(job: &Job, step: usize, kind: StepKind) -> StepResult {
    StepResult {
        format: JOB_FORMAT,
        job: job.id.clone(),
        table: job.table.clone(),
        step,
        attempt: ravel_store::unique_id(),
        kind,
        objects: Vec::new(),
        blooms: None,
        schema: None,
        rows: 0,
        inputs: Vec::new(),
        cost: StepCost::default(),
    }
}

/// Sorts one share's files into runs stored as spill under this attempt's scratch prefix,
/// and records them for the merge steps.
async fn split(
    store: &Store,
    job: &Job,
    step: usize,
    share: usize,
    files: &[String],
) -> Result<StepResult, CompactError> {
    let mut result = empty_result(job, step, StepKind::Split);
    let paths: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
    result.inputs = inputs_read(files).await?;
    let mode = LoadMode::spill()
        .cut_at(job.range_starts())
        .in_scratch(split_operation(&job.id, share, &result.attempt));
    let opts = job.geometry.load_options();
    let mut loader = Loader::with_mode(store, &job.table, opts, mode).await?;
    let fed = ravel_loader::feed_files(
        &mut loader,
        &paths,
        InputFormat::Parquet,
        TsvOptions::default(),
        |_, _| {},
    )
    .await;
    if let Err(e) = fed {
        return Err(loader.abandon(e).await.into());
    }
    result.cost.read_bytes = job_share_bytes(job, step);
    if loader.rows() > 0 {
        let p = loader.prepare().await?;
        fill(&mut result, &p);
        p.release().await;
    }
    let paths = TablePaths::new(&job.table)?;
    put_json(store, &split_result(&paths, &job.id, share), &result).await?;
    Ok(result)
}

/// The share's files as the step reads them: each one's size and rows (by its footer).
async fn inputs_read(files: &[String]) -> Result<Vec<InputRead>, CompactError> {
    let files = files.to_vec();
    let read = tokio::task::spawn_blocking(move || files.iter().map(|f| input_read(f)).collect());
    let read: Result<Vec<InputRead>, JobError> = read.await.map_err(|e| {
        CompactError::Load(ravel_loader::LoadError::internal(
            "reading the inputs' footers",
        )(e))
    })?;
    Ok(read?)
}

fn input_read(name: &str) -> Result<InputRead, JobError> {
    let path = std::path::Path::new(name);
    let failed = |source| JobError::Input {
        input: name.to_string(),
        source,
    };
    let size = std::fs::metadata(path).map_err(|e| failed(e.into()))?.len();
    let rows = super::sample::parquet_rows(path).map_err(|e| match e {
        JobError::Sample { source, .. } => failed(source),
        other => other,
    })?;
    Ok(InputRead {
        name: name.to_string(),
        size,
        rows,
    })
}

fn job_share_bytes(job: &Job, step: usize) -> u64 {
    match &job.steps[step].work {
        StepWork::Split { bytes, .. } => *bytes,
        StepWork::Merge { bytes, .. } => *bytes,
    }
}

/// Copies what a prepared load stored into a step's result.
fn fill(result: &mut StepResult, p: &Prepared) {
    result.objects = p.manifest.objects.clone();
    result.blooms = p.manifest.blooms.clone();
    result.schema = Some(p.manifest.schema.clone());
    result.rows = p.report.rows;
    result.cost.written_bytes =
        p.report.stored_bytes + p.manifest.blooms.as_ref().map_or(0, |b| b.bytes);
    result.cost.peak_budget_bytes = p.report.peak_budget_bytes;
}

/// Merges the rows of `window`: of every split step's runs (a load), or of overlapping set
/// `set` (a merge).
async fn merge(
    store: &Store,
    job: &Job,
    step: usize,
    set: Option<usize>,
    window: &Window,
) -> Result<StepResult, CompactError> {
    let mut result = empty_result(job, step, StepKind::Merge);
    let (chains, schema) = match set {
        None => split_chains(store, job).await?,
        Some(i) => set_chains(store, job, i).await?,
    };
    let Some(schema) = schema else {
        return Ok(result);
    };
    let layout = LayoutStore::new(store, &job.table)?.load().await?;
    let order = ClusteringOrder::try_new(&layout, &schema)?
        .ok_or_else(|| CompactError::NotClustered(job.table.clone()))?;
    let opts = CompactOptions {
        load: job.geometry.load_options(),
        fan_in: None,
        max_input_bytes: None,
        dry_run: false,
        max_steps: None,
    };
    let geometry = Geometry::new(&opts, &schema, chains.len());
    let mut load = opts.load.clone();
    load.load_budget = (opts.load.load_budget / 2).max(load.object_bytes);
    let mut w = Writer::new(store, &job.table, load, order, geometry)?;
    // A load's objects are named as a single-machine load names them: by its inputs too, so
    // a copy of its inputs under other names makes other objects, a rerun the same ones.
    if job.operation == super::JobOperation::Load {
        let consumed = ravel_log::Consumed {
            inputs: job.inputs.clone(),
            reload: false,
        };
        w.name_objects_by(consumed.object_salt(job.layout_generation, job.read_version));
    }
    let whole = !window.is_bounded();
    let sorted_all = chains.iter().all(|c| c.sorted);
    let work: Vec<Work> = chains
        .into_iter()
        .map(|c| Work {
            objects: c
                .objects
                .into_iter()
                .filter(|o| whole || crate::window::within(&o.entry, window))
                .collect(),
            intermediate: false,
        })
        .filter(|c| !c.objects.is_empty())
        .collect();
    result.cost.read_bytes = work
        .iter()
        .flat_map(|c| &c.objects)
        .map(|o| o.entry.bytes)
        .sum();
    let merged = if whole && !sorted_all {
        merge_whole(&mut w, set.map(|i| &job.sets[i])).await
    } else {
        w.merge_range(work, window).await
    };
    w.drop_intermediates().await;
    if let Some((mut p, passes)) = merged? {
        for o in &mut p.manifest.objects {
            o.run = 0;
        }
        fill(&mut result, &p);
        let metrics = w.metrics();
        result.cost.written_bytes = metrics.written_bytes;
        let merge_bytes = geometry.merge_bytes(geometry.fan_in);
        result.cost.peak_budget_bytes = metrics.peak_loader_bytes + merge_bytes;
        result.cost.passes = passes;
        p.release().await;
    }
    Ok(result)
}

/// A whole set that one range merge cannot take (objects under an older layout, or more
/// chains than one pass holds): sorted again and merged in passes, as `compact` does.
async fn merge_whole(
    w: &mut Writer<'_>,
    set: Option<&Vec<super::JobChain>>,
) -> Result<Option<(Prepared, usize)>, CompactError> {
    let chains: Vec<crate::Chain> = set
        .map(|s| s.iter().map(super::JobChain::chain).collect())
        .unwrap_or_default();
    let sorted = w.sort_unsorted(&chains).await?;
    Ok(Some(w.merge_all(sorted).await?))
}

/// A chain a merge step reads.
struct StepChain {
    objects: Vec<InputObject>,
    sorted: bool,
}

/// The runs of every split step, share by share (each share's runs in order), and the schema
/// of their rows; every split step must have finished.
async fn split_chains(
    store: &Store,
    job: &Job,
) -> Result<(Vec<StepChain>, Option<Schema>), CompactError> {
    let paths = TablePaths::new(&job.table)?;
    let mut chains = Vec::new();
    let mut schema = None;
    for (index, share) in job.split_steps() {
        let key = split_result(&paths, &job.id, share);
        let r: StepResult = match get_json(store, &key, "a split step's result").await {
            Ok(r) => r,
            Err(JobError::Read {
                source: object_store::Error::NotFound { .. },
                ..
            }) => {
                return Err(JobError::SplitNotDone {
                    job: job.id.clone(),
                    step: index,
                    share,
                }
                .into());
            }
            Err(e) => return Err(e.into()),
        };
        schema = schema.or(r.schema.clone());
        let runs = crate::writer::runs_of_objects(&r.objects);
        chains.extend(runs.into_iter().map(|objects| StepChain {
            objects,
            sorted: true,
        }));
    }
    Ok((chains, schema))
}

/// The chains of overlapping set `set`, and the table's schema.
async fn set_chains(
    store: &Store,
    job: &Job,
    set: usize,
) -> Result<(Vec<StepChain>, Option<Schema>), CompactError> {
    let o = crate::run::open(store, &job.table).await?;
    let chains = job.sets.get(set).map(Vec::as_slice).unwrap_or_default();
    let chains = chains
        .iter()
        .map(|c| StepChain {
            objects: c.chain().objects,
            sorted: c.sorted,
        })
        .collect();
    Ok((chains, Some(o.schema)))
}

pub(crate) async fn put_json<T: serde::Serialize>(
    store: &Store,
    key: &object_store::path::Path,
    value: &T,
) -> Result<(), JobError> {
    let bytes = serde_json::to_vec_pretty(value).expect("a job's document serializes");
    store
        .object_store()
        .put(key, PutPayload::from(bytes))
        .await
        .map_err(|source| JobError::Write {
            key: key.to_string(),
            source,
        })?;
    Ok(())
}

pub(crate) async fn get_json<T: serde::de::DeserializeOwned>(
    store: &Store,
    key: &object_store::path::Path,
    what: &'static str,
) -> Result<T, JobError> {
    let read = |source| JobError::Read {
        key: key.to_string(),
        source,
    };
    let bytes = store
        .object_store()
        .get(key)
        .await
        .map_err(read)?
        .bytes()
        .await
        .map_err(read)?;
    serde_json::from_slice(&bytes).map_err(|source| JobError::Parse {
        what,
        key: key.to_string(),
        source,
    })
}
