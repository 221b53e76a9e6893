//! The writer of a compaction's objects: merges sorted chains (whole, in passes of at most
//! its fan-in, or one key range of them) through loaders, and keeps what they prepared until
//! the commit.

use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::{DataType, Schema};
use object_store::ObjectStore;
use ravel_layout::ClusteringOrder;
use ravel_loader::{LoadMode, LoadOptions, Loader, Prepared};
use ravel_log::ChainOrigin;
use ravel_manifest::ObjectEntry;
use ravel_store::{Store, TablePaths};

use crate::merge::Merge;
use crate::plan::{Chain, InputObject, Step};
use crate::publish::{Publish, Publisher, Ranks};
use crate::read::{ChainReader, SLICE_COPIES, Slices, Slicing};
use crate::scratch::Scratch;
use crate::{
    BATCH_ROWS, CHAIN_OVERHEAD_BYTES, CompactError, CompactOptions, CompactStages, SLICE_ROWS,
};

/// How many chains merge at once and how large their slices are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub(crate) fan_in: usize,
    /// Rows of a chain's first slice.
    pub(crate) slice_rows: usize,
    /// Bytes a chain's slices may take together (see [`SLICE_COPIES`]).
    slice_bytes: u64,
    /// Arrow bytes of a row, estimated from the schema.
    row_bytes: u64,
}

impl Geometry {
    /// Half the budget holds the merge: per chain, the slices it reads ahead and the one merged
    /// ([`SLICE_COPIES`] slices), and each open object's footer.
    pub(crate) fn new(opts: &CompactOptions, schema: &Schema, chains: usize) -> Geometry {
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
    pub(crate) fn merge_bytes(&self, chains: usize) -> u64 {
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
pub(crate) struct Work {
    pub(crate) objects: Vec<InputObject>,
    pub(crate) intermediate: bool,
}

/// A manifest's objects as chains, one per run, in run order; `intermediate` marks objects
/// written by this compaction.
pub(crate) fn runs_of(manifest: &ravel_manifest::Manifest, intermediate: bool) -> Vec<Work> {
    let mut runs: Vec<Work> = Vec::new();
    for o in &manifest.objects {
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
                intermediate,
            }),
        }
    }
    runs
}

/// Objects in manifest order as chains, one per run (consecutive objects of one run).
pub(crate) fn runs_of_objects(objects: &[ObjectEntry]) -> Vec<Vec<InputObject>> {
    let mut runs: Vec<Vec<InputObject>> = Vec::new();
    for o in objects {
        let object = InputObject {
            entry: o.clone(),
            order: 0,
        };
        match runs.last_mut() {
            Some(r) if r.last().is_some_and(|l| l.entry.run == o.run) => r.push(object),
            _ => runs.push(vec![object]),
        }
    }
    runs
}

/// Writes merged rows through loaders and keeps what they prepared until the commit.
pub(crate) struct Writer<'a> {
    store: &'a Store,
    table: &'a str,
    os: Arc<dyn ObjectStore>,
    load: LoadOptions,
    order: ClusteringOrder,
    pub(crate) geometry: Geometry,
    /// Prepared by earlier passes under the scratch prefix: never committed, their leases
    /// held to the end.
    intermediates: Vec<Prepared>,
    /// Where the intermediates are stored: a prefix of this compaction's own.
    scratch: Scratch,
    metrics: WriteMetrics,
    /// What the objects are named by besides their bytes: the load's whose rows a sorted
    /// load's merge publishes (see [`Writer::name_objects_by`]); `None` for a compaction.
    object_salt: Option<String>,
}

/// What a writer's loaders stored and how long its stages took: kept apart from any plan, and
/// summed over steps with [`WriteMetrics::add`].
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteMetrics {
    /// Bytes stored, intermediate objects included.
    pub(crate) written_bytes: u64,
    /// The largest budget one loader used.
    pub(crate) peak_loader_bytes: u64,
    /// Objects earlier passes wrote under the scratch prefix, deleted since.
    pub(crate) intermediate_objects: usize,
    /// The most passes one merge took.
    pub(crate) passes: usize,
    pub(crate) stages: CompactStages,
}

impl WriteMetrics {
    pub(crate) fn add(&mut self, other: &WriteMetrics) {
        self.written_bytes += other.written_bytes;
        self.peak_loader_bytes = self.peak_loader_bytes.max(other.peak_loader_bytes);
        self.intermediate_objects += other.intermediate_objects;
        self.passes = self.passes.max(other.passes);
        self.stages.add(&other.stages);
    }
}

/// What [`Writer::run`] committed.
pub(crate) struct Outcome {
    prepared: Prepared,
    passes: usize,
    version: u64,
}

/// What a step committed: its version, the objects it added and what writing them cost.
pub(crate) struct Done {
    pub(crate) version: u64,
    pub(crate) objects: Vec<ObjectEntry>,
    pub(crate) metrics: WriteMetrics,
}

/// Rows of one input run that a bounded step wrote back: the loader's runs that hold them.
struct WrittenBack {
    runs: std::ops::Range<u64>,
    chain: ChainOrigin,
    order: u64,
}

/// A step's objects before the commit, and the runs among them written back.
struct Merged {
    prepared: Prepared,
    passes: usize,
    back: Vec<WrittenBack>,
}

impl<'a> Writer<'a> {
    /// A writer of objects of `table` with `load`'s geometry (half of it is the merge's).
    pub(crate) fn new(
        store: &'a Store,
        table: &'a str,
        load: LoadOptions,
        order: ClusteringOrder,
        geometry: Geometry,
    ) -> Result<Writer<'a>, CompactError> {
        let paths = TablePaths::new(table)?;
        Ok(Writer {
            store,
            table,
            os: store.object_store().clone(),
            load,
            order,
            geometry,
            intermediates: Vec::new(),
            scratch: Scratch::new(store.object_store().clone(), paths),
            metrics: WriteMetrics::default(),
            object_salt: None,
        })
    }

    /// Names the objects written from now on by `salt` and their bytes, as the load whose
    /// rows they publish names its own (see `ravel_loader::Prepared::object_salt`).
    pub(crate) fn name_objects_by(&mut self, salt: Option<String>) {
        self.object_salt = salt;
    }

    /// What the writer stored and spent so far.
    pub(crate) fn metrics(&self) -> &WriteMetrics {
        &self.metrics
    }

    /// Deletes the objects of earlier passes (never committed, under the scratch prefix) and
    /// gives up their leases.
    pub(crate) async fn drop_intermediates(&mut self) -> usize {
        let mut n = 0;
        for p in std::mem::take(&mut self.intermediates) {
            n += p.manifest.objects.len();
            p.release().await;
        }
        self.scratch.clear().await;
        self.metrics.intermediate_objects += n;
        n
    }

    /// A writer like this one with nothing written yet.
    pub(crate) fn fresh(&self) -> Writer<'a> {
        Writer {
            store: self.store,
            table: self.table,
            os: self.os.clone(),
            load: self.load.clone(),
            order: self.order.clone(),
            geometry: self.geometry,
            intermediates: Vec::new(),
            scratch: self.scratch.clone(),
            metrics: WriteMetrics::default(),
            object_salt: self.object_salt.clone(),
        }
    }

    /// Sorts, merges and commits; returns what it committed.
    pub(crate) async fn run(
        &mut self,
        step: &Step,
        publisher: &Publisher,
        full: bool,
    ) -> Result<Outcome, CompactError> {
        let t = Instant::now();
        let mut merged = if step.window.is_bounded() {
            self.merge_window(step).await?
        } else {
            let chains = self.sort_unsorted(&step.chains).await?;
            let (prepared, passes) = self.merge_all(chains).await?;
            Merged {
                prepared,
                passes,
                back: Vec::new(),
            }
        };
        let rank = step.input_objects().map(|o| o.order).max().unwrap_or(0);
        let ranks = place_runs(&mut merged, rank);
        self.metrics.stages.merge_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let prepared = merged.prepared;
        let publish = Publish {
            step,
            ranks,
            written_bytes: self.metrics.written_bytes,
            full,
        };
        let manifest = &prepared.manifest;
        let version = publisher.replace(manifest, publish.replacement()).await;
        self.metrics.stages.commit_s += t.elapsed().as_secs_f64();
        match version {
            Ok(committed) => Ok(Outcome {
                version: committed.version(),
                prepared,
                passes: merged.passes,
            }),
            Err(e) => {
                prepared.release().await;
                Err(e)
            }
        }
    }

    /// The rows of `chains` in `window`, merged into objects to publish (`None`: no row of
    /// theirs is in it). Rows outside the window are read and left (another step merges them).
    /// More chains than one pass holds merge in passes: each group's rows of the window go to
    /// the scratch prefix, and those merge as [`Writer::merge_all`] merges. Returns the
    /// prepared load and the passes.
    pub(crate) async fn merge_range(
        &mut self,
        chains: Vec<Work>,
        window: &crate::Window,
    ) -> Result<Option<(Prepared, usize)>, CompactError> {
        if chains.len() <= self.geometry.fan_in {
            let loader = self.loader(LoadMode::presorted()).await?;
            let p = self.range_into(chains, window, loader).await?;
            return Ok(p.map(|p| (p, 1)));
        }
        let mut next = Vec::new();
        for group in chains.chunks(self.geometry.fan_in) {
            let loader = self.loader(self.in_scratch(LoadMode::presorted())).await?;
            if let Some(p) = self.range_into(group.to_vec(), window, loader).await? {
                next.push(intermediate_work(&p));
                self.intermediates.push(p);
            }
        }
        if next.is_empty() {
            return Ok(None);
        }
        let (p, passes) = self.merge_all(next).await?;
        Ok(Some((p, passes + 1)))
    }

    /// One merge of the rows of `chains` in `window` through `loader`.
    async fn range_into(
        &mut self,
        chains: Vec<Work>,
        window: &crate::Window,
        mut loader: Loader,
    ) -> Result<Option<Prepared>, CompactError> {
        match self.fill_range(&mut loader, chains, window).await {
            Ok(()) if loader.rows() == 0 => Ok(None),
            Ok(()) => Ok(Some(self.prepared(loader).await?)),
            Err(CompactError::Load(e)) => Err(CompactError::from(loader.abandon(e).await)),
            Err(e) => Err(CompactError::from(loader.abandon(read_failed(e)).await)),
        }
    }

    async fn fill_range(
        &self,
        loader: &mut Loader,
        chains: Vec<Work>,
        window: &crate::Window,
    ) -> Result<(), CompactError> {
        let mut slices: Vec<Slices> = chains
            .into_iter()
            .map(|c| ChainReader::new(self.os.clone(), c.objects, self.geometry.slicing()).spawn())
            .collect();
        if let Some(lo) = &window.lo {
            for s in slices.iter_mut() {
                skip_below(s, &self.order, lo).await?;
            }
        }
        let hi = window.hi.clone();
        let mut merge = Merge::bounded(slices, self.order.clone(), BATCH_ROWS, hi);
        while let Some(b) = merge.next_batch().await? {
            push(loader, b).await?;
        }
        if loader.rows() > 0 {
            loader.end_run().await?;
        }
        Ok(())
    }

    /// A bounded step: per chain, its rows below the range (written back), then the merge of
    /// the range, then per chain its rows above (written back), each sequence a run of its own.
    #[tracing::instrument(level = "debug", skip_all, fields(chains = step.chains.len()))]
    async fn merge_window(&mut self, step: &Step) -> Result<Merged, CompactError> {
        let mut loader = self.loader(LoadMode::presorted()).await?;
        match self.fill_window(&mut loader, step).await {
            Ok(back) => Ok(Merged {
                prepared: self.prepared(loader).await?,
                passes: 1,
                back,
            }),
            Err(CompactError::Load(e)) => Err(CompactError::from(loader.abandon(e).await)),
            Err(e) => Err(CompactError::from(loader.abandon(read_failed(e)).await)),
        }
    }

    async fn fill_window(
        &self,
        loader: &mut Loader,
        step: &Step,
    ) -> Result<Vec<WrittenBack>, CompactError> {
        let mut slices: Vec<Slices> = step
            .chains
            .iter()
            .map(|c| {
                ChainReader::new(self.os.clone(), c.objects.clone(), self.geometry.slicing())
                    .spawn()
            })
            .collect();
        let mut back = Vec::new();
        if let Some(lo) = &step.window.lo {
            for (c, s) in step.chains.iter().zip(slices.iter_mut()) {
                let from = loader.runs();
                if push_below(loader, s, &self.order, lo).await? > 0 {
                    loader.end_run().await?;
                    back.push(written_back(c, from..loader.runs()));
                }
            }
        }
        let hi = step.window.hi.clone();
        let mut merge = Merge::bounded(slices, self.order.clone(), BATCH_ROWS, hi);
        while let Some(b) = merge.next_batch().await? {
            push(loader, b).await?;
        }
        loader.end_run().await?;
        for (c, mut s) in step.chains.iter().zip(merge.into_rest()) {
            let from = loader.runs();
            let mut rows = 0;
            while let Some(b) = s.next().await.map_err(crate::merge::read_error)? {
                rows += b.num_rows();
                push(loader, b).await?;
            }
            if rows > 0 {
                loader.end_run().await?;
                back.push(written_back(c, from..loader.runs()));
            }
        }
        Ok(back)
    }

    /// The chains as sorted sequences: chains of an older layout (consecutive ones together)
    /// go through a loader, whose runs become chains in their place.
    #[tracing::instrument(level = "debug", skip_all, fields(chains = chains.len()))]
    pub(crate) async fn sort_unsorted(
        &mut self,
        chains: &[Chain],
    ) -> Result<Vec<Work>, CompactError> {
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
            let mut loader = self.loader(self.in_scratch(LoadMode::table())).await?;
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
            out.extend(runs_of(&prepared.manifest, true));
            self.intermediates.push(prepared);
            i = end;
        }
        Ok(out)
    }

    /// Merges `chains` in passes of at most `fan_in`: consecutive chains (rank order) merge
    /// into one, until one merge takes them all. Returns its prepared load and the passes.
    pub(crate) async fn merge_all(
        &mut self,
        mut chains: Vec<Work>,
    ) -> Result<(Prepared, usize), CompactError> {
        let mut passes = 0;
        loop {
            passes += 1;
            if chains.len() <= self.geometry.fan_in {
                if chains.len() == 1 && chains[0].intermediate {
                    // The sort already wrote the result (one run of objects sorted again).
                    let mut p = self.intermediates.pop().expect("an intermediate chain");
                    if let Err(e) = self.scratch.promote(&mut p).await {
                        p.release().await;
                        return Err(e.into());
                    }
                    return Ok((p, passes - 1));
                }
                let loader = self.loader(LoadMode::presorted()).await?;
                let p = self.merge(chains, loader).await?;
                return Ok((p, passes));
            }
            let mut next = Vec::new();
            for group in chains.chunks(self.geometry.fan_in) {
                if group.len() == 1 {
                    next.push(group[0].clone());
                    continue;
                }
                let loader = self.loader(self.in_scratch(LoadMode::presorted())).await?;
                let p = self.merge(group.to_vec(), loader).await?;
                next.push(intermediate_work(&p));
                self.intermediates.push(p);
            }
            chains = next;
        }
    }

    /// One merge of `chains` through `loader`.
    #[tracing::instrument(level = "debug", skip_all, fields(chains = chains.len()))]
    async fn merge(
        &mut self,
        chains: Vec<Work>,
        mut loader: Loader,
    ) -> Result<Prepared, CompactError> {
        let readers = chains
            .into_iter()
            .map(|c| ChainReader::new(self.os.clone(), c.objects, self.geometry.slicing()))
            .collect();
        let mut merge = Merge::new(readers, self.order.clone(), BATCH_ROWS);
        loop {
            match merge.next_batch().await {
                Ok(Some(b)) => push(&mut loader, b).await?,
                Ok(None) => break,
                Err(e) => return Err(CompactError::from(loader.abandon(read_failed(e)).await)),
            }
        }
        self.prepared(loader).await
    }

    /// A loader of a merge's objects, made as `mode` says.
    async fn loader(&self, mode: LoadMode) -> Result<Loader, CompactError> {
        let mode = mode.for_purpose(ravel_loader::Writing::Merge);
        let load = self.load.clone();
        let mut loader = Loader::with_mode(self.store, self.table, load, mode).await?;
        loader.set_object_salt(self.object_salt.clone());
        Ok(loader)
    }

    /// `mode` for objects that only this compaction reads back (see [`Scratch`]).
    fn in_scratch(&self, mode: LoadMode) -> LoadMode {
        mode.in_scratch(self.scratch.operation())
    }

    /// Prepares `loader`'s objects and counts what it wrote.
    async fn prepared(&mut self, loader: Loader) -> Result<Prepared, CompactError> {
        let p = loader.prepare().await?;
        let m = &mut self.metrics;
        m.written_bytes += p.report.stored_bytes;
        m.peak_loader_bytes = m.peak_loader_bytes.max(p.report.peak_budget_bytes);
        m.stages.write.add(&p.report.stages);
        Ok(p)
    }

    /// Gives up the leases and deletes the intermediate objects. Returns what the step
    /// committed and what writing it cost.
    pub(crate) async fn finish(
        mut self,
        result: Result<Outcome, CompactError>,
    ) -> Result<Done, CompactError> {
        self.drop_intermediates().await;
        let o = result?;
        self.metrics.passes = self.metrics.passes.max(o.passes);
        let objects = o.prepared.manifest.objects.clone();
        o.prepared.release().await;
        Ok(Done {
            version: o.version,
            objects,
            metrics: self.metrics,
        })
    }
}

/// The objects of an earlier pass, as a chain of the next.
fn intermediate_work(p: &Prepared) -> Work {
    let objects = p.manifest.objects.iter().map(|o| InputObject {
        entry: o.clone(),
        order: 0,
    });
    Work {
        objects: objects.collect(),
        intermediate: true,
    }
}

/// Numbers the runs of a step's objects: the merged rows are one sequence (run 0); each
/// written-back sequence a run of its own that keeps its input run's rank. The merged rows
/// rank with the highest of the inputs, so that rows loaded later keep sorting after them.
fn place_runs(merged: &mut Merged, rank: u64) -> Ranks {
    let mut ranks = Ranks {
        orders: Vec::new(),
        chains: Vec::new(),
    };
    for o in &mut merged.prepared.manifest.objects {
        match merged
            .back
            .iter()
            .enumerate()
            .find(|(_, b)| b.runs.contains(&o.run))
        {
            Some((i, b)) => {
                o.run = i as u64 + 1;
                ranks.orders.push(Some(b.order));
                ranks.chains.push(Some(b.chain.clone()));
            }
            None => {
                o.run = 0;
                ranks.orders.push(Some(rank));
                ranks.chains.push(None);
            }
        }
    }
    ranks
}

fn written_back(c: &Chain, runs: std::ops::Range<u64>) -> WrittenBack {
    WrittenBack {
        runs,
        chain: ChainOrigin {
            manifest: c.manifest.clone(),
            run: c.run,
        },
        order: c.order,
    }
}

/// Reads past the rows of `slices` below `key` (another step merges them).
async fn skip_below(
    slices: &mut Slices,
    order: &ClusteringOrder,
    key: &[serde_json::Value],
) -> Result<(), CompactError> {
    while let Some(b) = slices.next().await.map_err(crate::merge::read_error)? {
        let n = crate::merge::rows_below(order, &b, key)?;
        if n < b.num_rows() {
            slices.put_back(b.slice(n, b.num_rows() - n));
            break;
        }
    }
    Ok(())
}

/// Pushes the rows of `slices` below `key` and hands back the rest; returns the rows pushed.
async fn push_below(
    loader: &mut Loader,
    slices: &mut Slices,
    order: &ClusteringOrder,
    key: &[serde_json::Value],
) -> Result<usize, CompactError> {
    let mut rows = 0;
    while let Some(b) = slices.next().await.map_err(crate::merge::read_error)? {
        let n = crate::merge::rows_below(order, &b, key)?;
        if n > 0 {
            push(loader, b.slice(0, n)).await?;
            rows += n;
        }
        if n < b.num_rows() {
            slices.put_back(b.slice(n, b.num_rows() - n));
            break;
        }
    }
    Ok(rows)
}

async fn push(loader: &mut Loader, batch: arrow::array::RecordBatch) -> Result<(), CompactError> {
    Ok(loader.push_from(batch, "the compaction's merge").await?)
}

fn read_failed(e: CompactError) -> ravel_loader::LoadError {
    ravel_loader::LoadError::Internal {
        task: "merging the compaction's inputs".into(),
        source: Box::new(e),
    }
}
