//! A compaction from plan to commit.

use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::{DataType, Schema};
use object_store::ObjectStore;
use ravel_layout::{ClusteringOrder, Layout, LayoutStore};
use ravel_loader::{LoadOptions, Loader, Prepared};
use ravel_log::{Commit, Committed, Operation, TableLog};
use ravel_store::{Store, TablePaths};

use crate::merge::Merge;
use crate::plan::{Chain, InputObject, Plan, Step, max_depth, plan};
use crate::read::{ChainReader, SLICE_COPIES, Slicing};
use crate::{
    BATCH_ROWS, CHAIN_OVERHEAD_BYTES, CompactError, CompactOptions, CompactReport, CompactStages,
    SLICE_ROWS,
};

/// How many chains merge at once and how large their slices are.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    fan_in: usize,
    /// Rows of a chain's first slice.
    slice_rows: usize,
    /// Bytes a chain's slices may take together (see [`SLICE_COPIES`]).
    slice_bytes: u64,
    /// Arrow bytes of a row, estimated from the schema.
    row_bytes: u64,
}

impl Geometry {
    /// Half the budget holds the merge: per chain, the slices it reads ahead and the one merged
    /// ([`SLICE_COPIES`] slices), and each open object's footer.
    fn new(opts: &CompactOptions, schema: &Schema, chains: usize) -> Geometry {
        let row_bytes = row_bytes(schema);
        let merge_bytes = opts.load.load_budget / 2;
        let per_chain =
            *SLICE_ROWS.start() as u64 * row_bytes * SLICE_COPIES + CHAIN_OVERHEAD_BYTES;
        let fan_in = opts
            .fan_in
            .unwrap_or((merge_bytes / per_chain) as usize)
            .max(2);
        let k = chains.clamp(1, fan_in) as u64;
        let slice_bytes = (merge_bytes / k).saturating_sub(CHAIN_OVERHEAD_BYTES);
        let slice_rows = (slice_bytes / (row_bytes * SLICE_COPIES)) as usize;
        Geometry {
            fan_in,
            slice_rows: slice_rows.clamp(*SLICE_ROWS.start(), *SLICE_ROWS.end()),
            slice_bytes,
            row_bytes,
        }
    }

    /// The merge's share of the budget with `chains` open.
    fn merge_bytes(&self, chains: usize) -> u64 {
        let k = chains.min(self.fan_in) as u64;
        let least = *SLICE_ROWS.start() as u64 * self.row_bytes * SLICE_COPIES;
        k * (self.slice_bytes.max(least) + CHAIN_OVERHEAD_BYTES)
    }

    /// Slices of a chain: the first sized by the schema's estimate, the next by measure.
    fn slicing(&self) -> Slicing {
        Slicing {
            first: self.slice_rows,
            bytes: self.slice_bytes,
            rows: SLICE_ROWS,
        }
    }
}

/// Arrow bytes of one row: fixed widths, 64 for a variable-width value.
fn row_bytes(schema: &Schema) -> u64 {
    schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Boolean => 1,
            t => t.primitive_width().map_or(64, |w| w as u64),
        })
        .sum::<u64>()
        .max(8)
}

/// A chain to merge: objects in order, and whether an earlier pass wrote them.
#[derive(Debug, Clone)]
struct Work {
    objects: Vec<InputObject>,
    intermediate: bool,
}

/// Writes merged rows through loaders and keeps what they prepared until the commit.
struct Writer<'a> {
    store: &'a Store,
    table: &'a str,
    os: Arc<dyn ObjectStore>,
    load: LoadOptions,
    order: ClusteringOrder,
    geometry: Geometry,
    /// Prepared by earlier passes: never committed, their leases held to the end.
    intermediates: Vec<Prepared>,
    /// Sidecars of the version read (readers of it need them within gc's retention).
    protected: std::collections::HashSet<String>,
    written_bytes: u64,
    peak_loader_bytes: u64,
    stages: CompactStages,
}

/// Runs the compaction `opts` asks for on `table` (see the crate docs).
pub async fn compact(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<CompactReport, CompactError> {
    let started = Instant::now();
    let layouts = LayoutStore::new(store, table)?;
    let layout = layouts.load().await?;
    let paths = layouts.table().clone();
    let os = store.object_store().clone();
    let log = TableLog::new(os.clone(), paths.clone());
    let snapshot = log.latest().await?;
    let Some(read_version) = snapshot.version else {
        return Err(CompactError::NoSuchTable(table.to_string()));
    };
    if layout.clustering_key.is_none() {
        return Err(CompactError::NotClustered(table.to_string()));
    }
    let live = log.manifests(&snapshot).await?;
    let plan = plan(&live, &layout.sort_key_names());
    let schema = match layouts.schema().await? {
        Some(s) => s,
        None => live
            .iter()
            .map(|m| m.manifest.schema.clone())
            .reduce(|a, b| ravel_manifest::widen(&a, &b))
            .unwrap_or_else(Schema::empty),
    };
    let order = ClusteringOrder::try_new(&layout, &schema)?
        .ok_or_else(|| CompactError::NotClustered(table.to_string()))?;
    let widest = plan.steps.iter().map(|s| s.chains.len()).max().unwrap_or(0);
    let geometry = Geometry::new(opts, &schema, widest);
    let mut report = planned(table, read_version, &plan, geometry, opts.dry_run);
    report.stages.plan_s = started.elapsed().as_secs_f64();
    if plan.is_empty() || opts.dry_run {
        report.wall_s = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    store
        .require_conditional_create("compacting a table")
        .await?;
    let mut load = opts.load.clone();
    load.load_budget = (opts.load.load_budget / 2).max(load.object_bytes);
    let mut written = 0;
    let protected: std::collections::HashSet<String> = live
        .iter()
        .filter_map(|m| m.manifest.blooms.as_ref().map(|b| b.key.clone()))
        .collect();
    for step in &plan.steps {
        let mut w = Writer {
            store,
            table,
            os: os.clone(),
            load: load.clone(),
            order: order.clone(),
            geometry,
            intermediates: Vec::new(),
            protected: protected.clone(),
            written_bytes: 0,
            peak_loader_bytes: 0,
            stages: std::mem::take(&mut report.stages),
        };
        let result = w.run(step, &log, &paths, &layout).await;
        written += w.written_bytes;
        report.peak_budget_bytes = report
            .peak_budget_bytes
            .max(w.peak_loader_bytes + geometry.merge_bytes(step.chains.len()));
        let done = w.finish(result, step, &log, &mut report).await?;
        report.version = Some(done);
    }
    report.write_amplification = written as f64 / report.output_bytes.max(1) as f64;
    report.depth_after = depth_now(&log, &layout).await?;
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The deepest overlap of the newest version's objects of the current layout, in chains (a
/// compaction's objects are one chain).
async fn depth_now(log: &TableLog, layout: &Layout) -> Result<usize, CompactError> {
    let live = log.manifests(&log.latest().await?).await?;
    let objects: Vec<(usize, &ravel_manifest::ObjectEntry)> = live
        .iter()
        .enumerate()
        .filter(|(_, m)| m.manifest.sort_key == layout.sort_key_names())
        .flat_map(|(i, m)| {
            m.objects()
                .map(move |(_, o)| ((i << 32) | o.run as usize, o))
        })
        .collect();
    Ok(max_depth(&objects))
}

/// The report of `plan` before anything is written.
fn planned(
    table: &str,
    read_version: u64,
    plan: &Plan,
    geometry: Geometry,
    dry_run: bool,
) -> CompactReport {
    let inputs: Vec<&InputObject> = plan.input_objects().collect();
    CompactReport {
        table: table.to_string(),
        read_version: Some(read_version),
        version: None,
        input_objects: inputs.len(),
        input_bytes: inputs.iter().map(|o| o.entry.bytes).sum(),
        input_rows: inputs.iter().map(|o| o.entry.rows).sum(),
        output_objects: 0,
        output_bytes: 0,
        output_rows: 0,
        untouched_objects: plan.untouched.len(),
        chains: plan.chains(),
        passes: 0,
        fan_in: geometry.fan_in,
        slice_rows: geometry.slice_rows,
        write_amplification: 0.0,
        intermediate_objects: 0,
        depth_before: plan.depth_before,
        depth_after: plan.depth_before,
        peak_budget_bytes: 0,
        stages: CompactStages::default(),
        wall_s: 0.0,
        dry_run,
    }
}

/// What [`Writer::run`] committed.
struct Outcome {
    prepared: Prepared,
    passes: usize,
    version: u64,
}

impl Writer<'_> {
    /// Sorts, merges and commits; returns what it committed.
    async fn run(
        &mut self,
        step: &Step,
        log: &TableLog,
        paths: &TablePaths,
        layout: &Layout,
    ) -> Result<Outcome, CompactError> {
        let t = Instant::now();
        let chains = self.sort_unsorted(&step.chains).await?;
        let (mut prepared, passes) = self.merge_all(chains).await?;
        // Its runs follow each other in key order: one sequence, one chain.
        for o in &mut prepared.manifest.objects {
            o.run = 0;
        }
        self.stages.merge_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let version = commit(self.os.clone(), log, paths, layout, step, &prepared).await;
        self.stages.commit_s += t.elapsed().as_secs_f64();
        match version {
            Ok(version) => Ok(Outcome {
                prepared,
                passes,
                version,
            }),
            Err(e) => {
                prepared.release().await;
                Err(e)
            }
        }
    }

    /// The chains as sorted sequences: chains of an older layout (consecutive ones together)
    /// go through a loader, whose runs become chains in their place.
    async fn sort_unsorted(&mut self, chains: &[Chain]) -> Result<Vec<Work>, CompactError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < chains.len() {
            if chains[i].sorted {
                out.push(Work {
                    objects: chains[i].objects.clone(),
                    intermediate: false,
                });
                i += 1;
                continue;
            }
            let end = (i..chains.len())
                .find(|&j| chains[j].sorted)
                .unwrap_or(chains.len());
            let mut loader = self.loader().await?;
            // Their rows in rank order, as a load would take them.
            let objects = chains[i..end]
                .iter()
                .flat_map(|c| c.objects.iter().cloned());
            let reader =
                ChainReader::new(self.os.clone(), objects.collect(), self.geometry.slicing());
            let mut slices = reader.spawn();
            while let Some(b) = slices.next().await.map_err(crate::merge::read_error)? {
                push(&mut loader, b).await?;
            }
            let prepared = self.prepared(loader).await?;
            let mut runs: Vec<Work> = Vec::new();
            for o in &prepared.manifest.objects {
                let object = InputObject {
                    entry: o.clone(),
                    order: 0,
                };
                match runs.last_mut() {
                    Some(w) if w.objects.last().is_some_and(|l| l.entry.run == o.run) => {
                        w.objects.push(object)
                    }
                    _ => runs.push(Work {
                        objects: vec![object],
                        intermediate: true,
                    }),
                }
            }
            out.extend(runs);
            self.intermediates.push(prepared);
            i = end;
        }
        Ok(out)
    }

    /// Merges `chains` in passes of at most `fan_in`: consecutive chains (rank order) merge
    /// into one, until one merge takes them all. Returns its prepared load and the passes.
    async fn merge_all(
        &mut self,
        mut chains: Vec<Work>,
    ) -> Result<(Prepared, usize), CompactError> {
        let mut passes = 0;
        loop {
            passes += 1;
            if chains.len() <= self.geometry.fan_in {
                if chains.len() == 1 && chains[0].intermediate {
                    // The sort already wrote the result (one run of objects sorted again).
                    let p = self.intermediates.pop().expect("an intermediate chain");
                    return Ok((p, passes - 1));
                }
                let p = self.merge(chains).await?;
                return Ok((p, passes));
            }
            let mut next = Vec::new();
            for group in chains.chunks(self.geometry.fan_in) {
                if group.len() == 1 {
                    next.push(group[0].clone());
                    continue;
                }
                let p = self.merge(group.to_vec()).await?;
                next.push(Work {
                    objects: p
                        .manifest
                        .objects
                        .iter()
                        .map(|o| InputObject {
                            entry: o.clone(),
                            order: 0,
                        })
                        .collect(),
                    intermediate: true,
                });
                self.intermediates.push(p);
            }
            chains = next;
        }
    }

    /// One merge of `chains` through a loader.
    async fn merge(&mut self, chains: Vec<Work>) -> Result<Prepared, CompactError> {
        let readers = chains
            .into_iter()
            .map(|c| ChainReader::new(self.os.clone(), c.objects, self.geometry.slicing()))
            .collect();
        let mut merge = Merge::new(readers, self.order.clone(), BATCH_ROWS);
        let mut loader = self.loader().await?;
        loop {
            match merge.next_batch().await {
                Ok(Some(b)) => push(&mut loader, b).await?,
                Ok(None) => break,
                Err(e) => return Err(CompactError::from(loader.abandon(read_failed(e)).await)),
            }
        }
        self.prepared(loader).await
    }

    async fn loader(&self) -> Result<Loader, CompactError> {
        Ok(Loader::new(self.store, self.table, self.load.clone()).await?)
    }

    /// Prepares `loader`'s objects and counts what it wrote.
    async fn prepared(&mut self, loader: Loader) -> Result<Prepared, CompactError> {
        let p = loader.prepare().await?;
        self.written_bytes += p.report.stored_bytes;
        self.peak_loader_bytes = self.peak_loader_bytes.max(p.report.peak_budget_bytes);
        self.stages.write.add(&p.report.stages);
        Ok(p)
    }

    /// Adds the step to the report, gives up the leases and deletes the intermediate objects.
    /// Returns the version the step committed.
    async fn finish(
        mut self,
        result: Result<Outcome, CompactError>,
        step: &Step,
        log: &TableLog,
        report: &mut CompactReport,
    ) -> Result<u64, CompactError> {
        report.stages = std::mem::take(&mut self.stages);
        let keep = self.referenced_now(&result, log).await;
        let intermediates = std::mem::take(&mut self.intermediates);
        report.intermediate_objects += intermediates
            .iter()
            .map(|p| p.manifest.objects.len())
            .sum::<usize>();
        for p in intermediates {
            let doomed: Vec<String> = p
                .manifest
                .objects
                .iter()
                .map(|o| o.key.clone())
                .chain(p.manifest.blooms.iter().map(|b| b.key.clone()))
                .filter(|k| !keep.contains(k) && !step.input_objects().any(|i| &i.entry.key == k))
                .collect();
            p.release().await;
            delete_all(self.os.as_ref(), &doomed).await;
        }
        let o = result?;
        let m = &o.prepared.manifest;
        report.passes = report.passes.max(o.passes);
        report.output_objects += m.objects.len();
        report.output_bytes += m.objects.iter().map(|e| e.bytes).sum::<u64>();
        report.output_rows += m.objects.iter().map(|e| e.rows).sum::<u64>();
        o.prepared.release().await;
        Ok(o.version)
    }
}

impl Writer<'_> {
    /// What an intermediate object must not be deleted as: the step's output and everything
    /// the newest version's manifests name (a sidecar of equal filters has an equal name).
    /// Nothing is deleted when the newest version cannot be read.
    async fn referenced_now(
        &self,
        result: &Result<Outcome, CompactError>,
        log: &TableLog,
    ) -> std::collections::HashSet<String> {
        let mut keep = self.protected.clone();
        if let Ok(o) = result {
            let m = &o.prepared.manifest;
            keep.extend(m.objects.iter().map(|e| e.key.clone()));
            keep.extend(m.blooms.iter().map(|b| b.key.clone()));
        }
        let live = match log.latest().await {
            Ok(newest) => log.manifests(&newest).await,
            Err(e) => Err(e),
        };
        match live {
            Ok(live) => {
                for m in live {
                    keep.extend(m.manifest.objects.iter().map(|e| e.key.clone()));
                    keep.extend(m.manifest.blooms.iter().map(|b| b.key.clone()));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the newest version could not be read: intermediate objects are left to gc");
                for p in &self.intermediates {
                    keep.extend(p.manifest.objects.iter().map(|e| e.key.clone()));
                    keep.extend(p.manifest.blooms.iter().map(|b| b.key.clone()));
                }
            }
        }
        keep
    }
}

async fn delete_all(os: &dyn ObjectStore, keys: &[String]) {
    use object_store::ObjectStoreExt;
    for k in keys {
        if let Err(e) = os.delete(&object_store::path::Path::from(k.as_str())).await {
            tracing::warn!(key = %k, error = %e, "an intermediate object was not deleted; gc collects it");
        }
    }
}

async fn push(loader: &mut Loader, batch: arrow::array::RecordBatch) -> Result<(), CompactError> {
    Ok(loader.push_from(batch, "the compaction's merge").await?)
}

fn read_failed(e: CompactError) -> ravel_loader::LoadError {
    ravel_loader::LoadError::Internal {
        task: "merging the compaction's inputs".into(),
        message: e.to_string(),
    }
}

/// Checks the output is stored, writes its manifest and commits the version that replaces the
/// inputs with it. Returns the version.
async fn commit(
    os: Arc<dyn ObjectStore>,
    log: &TableLog,
    paths: &TablePaths,
    layout: &Layout,
    step: &Step,
    prepared: &Prepared,
) -> Result<u64, CompactError> {
    let committer = ravel_loader::Committer::new(os, paths.clone());
    committer.check_stored(&prepared.manifest).await?;
    let key = committer.put_manifest(&prepared.manifest).await?;
    let rank = step.input_objects().map(|o| o.order).max().unwrap_or(0);
    let commit = Commit {
        operation: Operation::Compaction,
        manifest_key: key.to_string(),
        manifest: &prepared.manifest,
        orders: vec![Some(rank); prepared.manifest.objects.len()],
        removes: step.input_objects().map(|o| o.entry.key.clone()).collect(),
        configuration: layout.table_properties(),
    };
    match log.commit(&commit).await? {
        Committed::Version(v) => Ok(v),
        Committed::AlreadyLive { version } => Ok(version),
    }
}
