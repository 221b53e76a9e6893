//! A load that ends globally sorted, what `COPY … ORDER BY` gives, within the load budget.
//!
//! The input is sorted in runs as any load sorts it, but each run goes to *spill* objects
//! (LZ4, plain encoding, no statistics or Bloom filters: cheap to write, read back once); the
//! runs are then merged once, slice by slice, through the loader's own encoder, and only the
//! merge's objects are published, as one load whose objects form one sequence. The spill is
//! deleted after the commit (a killed load leaves it to `gc`, as it would its objects).
//! Rows already in the table are not merged with the new ones: `compact` does that.

use std::time::Instant;

use ravel_layout::ClusteringOrder;
use ravel_loader::{
    Committed, Files, LoadError, LoadMode, Loader, Prepared, Published, StageTimes,
};
use ravel_store::Store;
use serde::Serialize;

use crate::publish::Publisher;
use crate::scratch::Scratch;
use crate::writer::{Geometry, Writer, runs_of};
use crate::{CompactError, CompactOptions};

/// A load whose rows are published globally sorted (see the module docs): push rows into
/// [`SortedLoad::loader`], then [`SortedLoad::finish`].
pub struct SortedLoad<'a> {
    store: &'a Store,
    table: String,
    opts: CompactOptions,
    loader: Loader,
    /// Where the spill goes: a prefix of this load's own.
    scratch: Scratch,
    /// The rows were loaded by columns (see [`SortedLoad::feed`]): one run, published as it is.
    by_columns: bool,
    /// The version that consumed the inputs already (see [`SortedLoad::feed`]): nothing to do.
    published: Option<Published>,
    started: Instant,
}

/// What a sorted load did.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct SortedLoadReport {
    pub table: String,
    /// The version that published the rows: this load's, or the one that consumed its inputs
    /// already (`already_published`).
    pub version: Option<u64>,
    /// A version had consumed the inputs already (a rerun): nothing was read or published.
    pub already_published: bool,
    pub load_id: String,
    pub rows: u64,
    /// Sorted runs the input made (the budget's worth each), each spilled and merged.
    pub runs: u64,
    /// The rows were read and encoded a column at a time (see [`SortedLoad::feed`]): one
    /// run, nothing spilled to the store; `write` has the stages, and the bytes the encoded
    /// pages took in local files.
    pub by_columns: bool,
    pub spill_objects: usize,
    pub spill_bytes: u64,
    /// The published objects: one sequence in clustering order.
    pub objects: usize,
    pub stored_bytes: u64,
    pub passes: usize,
    pub fan_in: usize,
    /// Every byte stored (spill, earlier passes, objects) over `stored_bytes`.
    pub written_bytes: u64,
    pub write_amplification: f64,
    /// The spill pass's peak, or the merge's estimate plus its loader's, whichever is larger.
    pub peak_budget_bytes: u64,
    /// The spill pass: reading, sorting, gathering, encoding, uploading.
    pub spill: StageTimes,
    /// Merging and writing the objects (the loader's stages in `write`).
    pub merge_s: f64,
    pub write: StageTimes,
    pub commit_s: f64,
    pub wall_s: f64,
    /// Why Delta Lake readers get no view of the table (see [`ravel_log::no_delta_view`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_delta_view: Option<String>,
}

impl<'a> SortedLoad<'a> {
    /// A sorted load into `table`, which must have a clustering key; `opts.load` is the
    /// geometry and budget of both passes.
    pub async fn new(
        store: &'a Store,
        table: &str,
        opts: &CompactOptions,
    ) -> Result<SortedLoad<'a>, CompactError> {
        opts.validate()?;
        let paths = ravel_store::TablePaths::new(table)?;
        let scratch = Scratch::new(store.object_store().clone(), paths);
        let mode = LoadMode::spill().in_scratch(scratch.operation());
        let loader = Loader::with_mode(store, table, opts.load.clone(), mode).await?;
        if loader.layout().clustering_key.is_none() {
            return Err(CompactError::NotClustered(table.to_string()));
        }
        loader.check_other_writers().await?;
        Ok(SortedLoad {
            store,
            scratch,
            table: table.to_string(),
            opts: opts.clone(),
            loader,
            by_columns: false,
            published: None,
            started: Instant::now(),
        })
    }

    /// The loader the rows go to (see [`ravel_loader::feed_files`]).
    pub fn loader(&mut self) -> &mut Loader {
        &mut self.loader
    }

    /// Reads `inputs` into the load. Parquet files too large for one run, whose order and
    /// widest column fit the budget, are loaded by columns, in one pass with no spill in the
    /// store (see [`ravel_loader::load_by_columns`]); other inputs, and any load given a run
    /// trigger (`target_bytes`), are pushed into [`SortedLoad::loader`]: rows that fit one run
    /// are published as it, more are sorted in runs, spilled and merged. `progress` is called with the rows read (once for a load by
    /// columns).
    ///
    /// Each file is loaded once (see [`ravel_loader::load_files_with`]): when a version
    /// consumed every input already, nothing is read, and [`SortedLoad::finish`] reports it.
    pub async fn feed(
        &mut self,
        files: &Files<'_>,
        mut progress: impl FnMut(u64, &Loader),
    ) -> Result<(), LoadError> {
        files.check()?;
        if let Some(p) = self.loader.consume(files.consumed()?).await? {
            self.published = Some(p);
            return Ok(());
        }
        // A run trigger given explicitly asks for runs of that size.
        let runs_asked = self.loader.options().target_bytes.is_some();
        if files.format == ravel_loader::InputFormat::Parquet && !runs_asked {
            let paths = ravel_loader::expand_inputs(files.paths)?;
            let plan = ravel_loader::ColumnPlan::open(&paths)?;
            let opts = self.loader.options();
            if !plan.fits_one_run(opts) && plan.fits(opts, self.loader.layout()) {
                self.loader.set_mode(LoadMode::table())?;
                self.by_columns = true;
                ravel_loader::load_by_columns(&mut self.loader, plan).await?;
                progress(self.loader.rows(), &self.loader);
                return Ok(());
            }
        }
        let (paths, format, tsv) = (files.paths, files.format, files.tsv.clone());
        ravel_loader::feed_files(&mut self.loader, paths, format, tsv, progress).await
    }

    /// Gives the load up after `error`: nothing is published.
    pub async fn abandon(self, error: LoadError) -> CompactError {
        CompactError::from(self.loader.abandon(error).await)
    }

    /// Merges the spilled runs, publishes the result and deletes the spill. Rows that fit
    /// one run (nothing spilled yet) are published as that run, like any load's.
    pub async fn finish(mut self) -> Result<SortedLoadReport, CompactError> {
        if let Some(p) = self.published.take() {
            let r = self.loader.published_already(p);
            return Ok(one_run(r, self.by_columns, self.started));
        }
        if self.loader.runs() == 0 || self.by_columns {
            return self.finish_as_one_run().await;
        }
        let spill = self.loader.prepare().await?;
        let mut report = spilled(&self.table, &spill);
        let result = merge_and_publish(self.store, &self.table, &self.opts, &spill, &mut report);
        let result = result.await;
        spill.release().await;
        self.scratch.clear().await;
        result?;
        report.wall_s = self.started.elapsed().as_secs_f64();
        Ok(report)
    }
}

impl SortedLoad<'_> {
    async fn finish_as_one_run(mut self) -> Result<SortedLoadReport, CompactError> {
        if !self.by_columns {
            self.loader.set_mode(LoadMode::table())?;
        }
        let (by_columns, started) = (self.by_columns, self.started);
        let r = self.loader.finish().await?;
        Ok(one_run(r, by_columns, started))
    }
}

/// The report of a sorted load that published its rows as one run (or found them published).
fn one_run(r: ravel_loader::LoadReport, by_columns: bool, started: Instant) -> SortedLoadReport {
    let stored = r.stored_bytes;
    SortedLoadReport {
        table: r.table,
        version: r.version,
        already_published: r.already_published,
        load_id: r.load_id,
        rows: r.rows,
        runs: r.runs,
        by_columns,
        spill_objects: 0,
        spill_bytes: 0,
        objects: r.objects.len(),
        stored_bytes: stored,
        passes: 0,
        fan_in: 0,
        written_bytes: stored,
        write_amplification: 1.0,
        peak_budget_bytes: r.peak_budget_bytes,
        spill: StageTimes::default(),
        merge_s: 0.0,
        write: r.stages,
        commit_s: 0.0,
        wall_s: started.elapsed().as_secs_f64(),
        no_delta_view: r.no_delta_view,
    }
}

/// The report of a spill pass.
fn spilled(table: &str, spill: &Prepared) -> SortedLoadReport {
    let r = &spill.report;
    SortedLoadReport {
        table: table.to_string(),
        version: None,
        already_published: false,
        load_id: String::new(),
        rows: r.rows,
        runs: r.runs,
        by_columns: false,
        spill_objects: spill.manifest.objects.len(),
        spill_bytes: r.stored_bytes,
        objects: 0,
        stored_bytes: 0,
        passes: 0,
        fan_in: 0,
        written_bytes: r.stored_bytes,
        write_amplification: 0.0,
        peak_budget_bytes: r.peak_budget_bytes,
        spill: r.stages.clone(),
        merge_s: 0.0,
        write: StageTimes::default(),
        commit_s: 0.0,
        wall_s: 0.0,
        no_delta_view: r.no_delta_view.clone(),
    }
}

#[tracing::instrument(
    name = "merge_spill",
    skip_all,
    fields(
        table = %table,
        runs = spill.report.runs,
        spill_objects = spill.manifest.objects.len(),
        version = tracing::field::Empty
    )
)]
async fn merge_and_publish(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
    spill: &Prepared,
    report: &mut SortedLoadReport,
) -> Result<(), CompactError> {
    let t = Instant::now();
    let schema = &spill.manifest.schema;
    let layout = &spill.report.layout;
    let order = ClusteringOrder::try_new(layout, schema)?
        .ok_or_else(|| CompactError::NotClustered(table.to_string()))?;
    // The spill's runs, in run order (ties keep input order).
    let chains = runs_of(&spill.manifest, false);
    let geometry = Geometry::new(opts, schema, chains.len());
    let mut load = opts.load.clone();
    load.load_budget = (opts.load.load_budget / 2).max(load.object_bytes);
    let mut w = Writer::new(store, table, load, order, geometry)?;
    // Named as the load names its objects: a copy of its inputs under other names makes
    // other objects, a rerun of it the same ones.
    w.name_objects_by(spill.object_salt.clone());
    let k = chains.len();
    let merged = w.merge_all(chains).await;
    w.drop_intermediates().await;
    let (mut prepared, passes) = merged?;
    // The merge's runs follow each other in key order: one sequence.
    for o in &mut prepared.manifest.objects {
        o.run = 0;
    }
    report.merge_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let paths = ravel_layout::LayoutStore::new(store, table)?
        .table()
        .clone();
    // Everything stored besides the published objects: the spill and any intermediate pass.
    let stored: u64 = prepared.manifest.objects.iter().map(|o| o.bytes).sum();
    let spilled = (report.written_bytes + w.metrics().written_bytes).saturating_sub(stored);
    let committed = Publisher::new(store.object_store().clone(), paths, layout)
        .load(&prepared.manifest, spilled, spill.consumed.clone())
        .await;
    report.commit_s = t.elapsed().as_secs_f64();
    let m = &prepared.manifest;
    let metrics = w.metrics();
    report.version = committed.as_ref().ok().map(Committed::version);
    report.load_id = match &committed {
        Ok(Committed::AlreadyLive(p)) => {
            report.already_published = true;
            p.load_id.clone()
        }
        _ => m.load_id.clone(),
    };
    report.objects = m.objects.len();
    report.stored_bytes = m.objects.iter().map(|o| o.bytes).sum();
    report.passes = passes;
    report.fan_in = geometry.fan_in;
    report.written_bytes += metrics.written_bytes;
    report.write_amplification = report.written_bytes as f64 / report.stored_bytes.max(1) as f64;
    let peak = metrics.peak_loader_bytes + geometry.merge_bytes(k);
    report.peak_budget_bytes = report.peak_budget_bytes.max(peak);
    report.write = metrics.stages.write.clone();
    if let (Some(version), false) = (report.version, report.already_published) {
        tracing::Span::current().record("version", version);
        tracing::info!(
            version,
            objects = report.objects,
            bytes = report.stored_bytes,
            passes,
            "sorted load committed"
        );
    }
    prepared.release().await;
    committed?;
    Ok(())
}
