//! A compaction from plan to commit.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::{DataType, Schema};
use object_store::ObjectStore;
use ravel_layout::{ClusteringOrder, Layout, LayoutStore, Maintenance};
use ravel_loader::{LoadOptions, Loader, Prepared};
use ravel_log::{ChainOrigin, LiveManifest, TableLog};
use ravel_manifest::ObjectEntry;
use ravel_store::{Store, TablePaths};

use crate::merge::Merge;
use crate::plan::{Chain, InputObject, Plan, Step, max_depth, plan};
use crate::read::{ChainReader, SLICE_COPIES, Slices, Slicing};
use crate::scratch::Scratch;
use crate::{
    BATCH_ROWS, CHAIN_OVERHEAD_BYTES, CompactError, CompactOptions, CompactReport, CompactStages,
    SLICE_ROWS,
};

/// How many chains merge at once and how large their slices are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub(crate) fan_in: usize,
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
    geometry: Geometry,
    /// Prepared by earlier passes under the scratch prefix: never committed, their leases
    /// held to the end.
    intermediates: Vec<Prepared>,
    /// Where the intermediates are stored: a prefix of this compaction's own.
    scratch: Scratch,
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
    run_selected(store, table, opts, false).await
}

/// Runs `table`'s maintenance policy (see [`crate::maintenance`]): its merges, one after
/// another, each committed as a version, until it asks for none. `opts.max_input_bytes` does
/// not apply: the policy chooses whole runs.
pub async fn maintain(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<CompactReport, CompactError> {
    run_selected(store, table, opts, true).await
}

/// Which merges a run makes: `compact`'s (every overlapping set, or key ranges of it within
/// `max_input_bytes`), or the maintenance policy's.
#[derive(Debug, Clone)]
struct Selector {
    policy: Option<Maintenance>,
    max_input_bytes: Option<u64>,
}

/// A step chosen, whether it leaves the table one sequence, and why it was chosen.
struct Chosen {
    step: Step,
    full: bool,
    reason: String,
}

/// What the selector finds on a plan.
enum Selection {
    Merge(Chosen),
    /// Nothing to merge, and why.
    Nothing(String),
}

impl Selection {
    fn reason(&self) -> &str {
        match self {
            Selection::Merge(c) => &c.reason,
            Selection::Nothing(why) => why,
        }
    }
}

impl Selector {
    /// The next step on the version `plan` describes.
    fn next(&self, plan: &Plan, fan_in: usize) -> Selection {
        if let Some(policy) = &self.policy {
            let d = crate::maintenance::decide(plan, policy);
            tracing::debug!(
                depth = plan.depth_before,
                merge = d.step.is_some(),
                reason = %d.reason,
                "maintenance decision"
            );
            return match d.step {
                Some(step) => Selection::Merge(Chosen {
                    step,
                    full: d.full,
                    reason: d.reason,
                }),
                None => Selection::Nothing(d.reason),
            };
        }
        let step = match self.max_input_bytes {
            None => plan.steps.first().cloned(),
            Some(max) => bounded_step(plan, max, fan_in),
        };
        match step {
            Some(step) => Selection::Merge(Chosen {
                full: plan.steps.len() == 1 && !step.window.is_bounded(),
                reason: "compact merges every overlapping object".into(),
                step,
            }),
            None => Selection::Nothing("no two objects overlap".into()),
        }
    }

    /// The plan a report shows: all of `first` for `compact`, the chosen step for the policy.
    fn shown(&self, first: &Plan, selection: &Selection) -> Plan {
        if self.policy.is_none() {
            return first.clone();
        }
        Plan {
            steps: match selection {
                Selection::Merge(c) => vec![c.step.clone()],
                Selection::Nothing(_) => Vec::new(),
            },
            ..first.clone()
        }
    }
}

/// The deepest step of the plan, bounded by the largest input allowed (a range that would
/// merge more chains than one pass takes is merged whole, in passes).
fn bounded_step(plan: &Plan, max: u64, fan_in: usize) -> Option<Step> {
    let deepest = plan.steps.iter().max_by_key(|s| step_depth(s))?;
    let bounded = crate::window::bounded(deepest, max);
    if bounded.window.is_bounded() && bounded.chains.len() > fan_in {
        return Some(deepest.clone());
    }
    Some(bounded)
}

/// The table as a run finds it: its layout, the version read and what that version holds.
pub(crate) struct Opened {
    pub(crate) layout: Layout,
    paths: TablePaths,
    log: TableLog,
    pub(crate) read_version: u64,
    totals: ravel_log::Totals,
    pub(crate) live: Vec<LiveManifest>,
    /// Objects of the version other Delta writers added.
    pub(crate) foreign: usize,
    pub(crate) schema: Schema,
    order: ClusteringOrder,
}

pub(crate) async fn open(store: &Store, table: &str) -> Result<Opened, CompactError> {
    let layouts = LayoutStore::new(store, table)?;
    let layout = layouts.load().await?;
    let paths = layouts.table().clone();
    let log = TableLog::new(store.object_store().clone(), paths.clone());
    let snapshot = log.latest().await?;
    let Some(read_version) = snapshot.version else {
        return Err(CompactError::NoSuchTable(table.to_string()));
    };
    if layout.clustering_key.is_none() {
        return Err(CompactError::NotClustered(table.to_string()));
    }
    let totals = log.totals(&snapshot).await?;
    let live = log.manifests(&snapshot).await?;
    let foreign = snapshot.foreign(&paths).len();
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
    Ok(Opened {
        layout,
        paths,
        log,
        read_version,
        totals,
        live,
        foreign,
        schema,
        order,
    })
}

/// Takes in the objects other Delta writers added (see [`crate::adopt`]), then runs the
/// compaction (or maintenance) on the version that leaves. A dry run does both on an overlay
/// of the store ([`Store::overlay`]): it plans what the real run would, writing nothing.
#[tracing::instrument(
    name = "compact",
    skip_all,
    fields(
        table = %table,
        operation = %if maintain { "maintain" } else { "compact" },
        version = tracing::field::Empty
    )
)]
async fn run_selected(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
    maintain: bool,
) -> Result<CompactReport, CompactError> {
    opts.validate()?;
    let started = Instant::now();
    let o = open(store, table).await?;
    let (foreign, read_version) = (o.foreign, o.read_version);
    let overlay;
    let store = match foreign {
        0 => store,
        _ if opts.dry_run => {
            overlay = store.overlay()?;
            &overlay
        }
        _ => store,
    };
    let adopted = match foreign {
        0 => None,
        _ => crate::adopt(store, table, opts).await?,
    };
    let o = match adopted {
        Some(_) => open(store, table).await?,
        None => o,
    };
    let mut report = run_opened(store, table, opts, maintain, o, started).await?;
    report.foreign_objects = foreign;
    if let Some(a) = &adopted {
        report.read_version = Some(read_version);
        if !opts.dry_run {
            report.version = report.version.or(Some(a.version));
            report.written_bytes += a.written_bytes;
        }
    }
    report.adopted = adopted;
    if let Some(version) = report.version {
        tracing::Span::current().record("version", version);
    }
    tracing::info!(
        steps = report.steps,
        input_objects = report.input_objects,
        output_objects = report.output_objects,
        written_bytes = report.written_bytes,
        reason = %report.reason,
        "compaction finished"
    );
    Ok(report)
}

async fn run_opened(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
    maintain: bool,
    o: Opened,
    started: Instant,
) -> Result<CompactReport, CompactError> {
    let first = plan(&o.live, &o.layout.sort_key_names());
    let selector = Selector {
        policy: maintain.then_some(o.layout.maintenance),
        max_input_bytes: opts.max_input_bytes,
    };
    let widest = first.steps.iter().map(|s| s.chains.len()).max();
    let geometry = Geometry::new(opts, &o.schema, widest.unwrap_or(0));
    let selection = selector.next(&first, geometry.fan_in);
    let shown = selector.shown(&first, &selection);
    let mut report = planned(table, o.read_version, &shown, geometry, opts.dry_run);
    report.depth_before = depth_of(&o.live, &o.layout);
    report.depth_after = report.depth_before;
    report.policy = selector.policy;
    report.depth_bound = selector.policy.as_ref().map_or(Some(1), crate::depth_bound);
    report.reason = selection.reason().to_string();
    report.stages.plan_s = started.elapsed().as_secs_f64();
    if matches!(selection, Selection::Nothing(_)) || opts.dry_run {
        add_totals(&mut report, o.totals);
        report.wall_s = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    // Probed before the first write (and recorded): whether creates need claims.
    store.capabilities().await?;
    let mut load = opts.load.clone();
    load.load_budget = (opts.load.load_budget / 2).max(load.object_bytes);
    let writer = Writer::new(store, table, load, o.order.clone(), geometry)?;
    let steps = Steps {
        log: &o.log,
        paths: &o.paths,
        layout: &o.layout,
        selector,
        max_steps: opts.max_steps,
        // Only the objects of the version read, and what this compaction writes: loads
        // committed meanwhile stay untouched.
        allowed: o
            .live
            .iter()
            .flat_map(|m| m.objects().map(|(_, o)| o.key.clone()))
            .collect(),
    };
    steps.run(writer, first, &mut report).await?;
    add_totals(&mut report, o.totals);
    report.depth_after = depth_now(&o.log, &o.layout).await?;
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The steps of a compaction, each merged and committed in turn; after each, the next is
/// planned from the newest version.
struct Steps<'a> {
    log: &'a TableLog,
    paths: &'a TablePaths,
    layout: &'a Layout,
    selector: Selector,
    allowed: HashSet<String>,
    /// Steps to commit at most (see [`CompactOptions::max_steps`]).
    max_steps: Option<usize>,
}

/// The totals of the log before the run, with what the run wrote (see [`CompactReport`]).
fn add_totals(report: &mut CompactReport, before: ravel_log::Totals) {
    report.loaded_since_full_bytes = before.loaded_since_full_bytes;
    report.written_since_full_bytes = before.written_since_full_bytes + report.written_bytes;
    report.write_amplification = ravel_log::ratio(
        report.written_since_full_bytes,
        report.loaded_since_full_bytes,
    );
    report.loaded_bytes_total = before.loaded_bytes;
    report.written_bytes_total = before.written_bytes + report.written_bytes;
}

/// What the steps of a run have done so far.
#[derive(Default)]
struct Progress {
    /// Bytes stored, intermediate objects included.
    written: u64,
    /// Objects the steps wrote, by key: a step may write an object another step wrote (the
    /// same rows written back again are the same content, the same name).
    ours: BTreeMap<String, ObjectEntry>,
    /// Objects of the version read that steps replaced.
    replaced: BTreeMap<String, ObjectEntry>,
    /// The last step's inputs.
    previous: Option<Vec<String>>,
    /// A load committed meanwhile: no step leaves the table one sequence.
    others: bool,
}

impl Steps<'_> {
    async fn run(
        mut self,
        template: Writer<'_>,
        first: Plan,
        report: &mut CompactReport,
    ) -> Result<(), CompactError> {
        // The version read's objects: a step's input among them is one the compaction replaced.
        let originals = self.allowed.clone();
        let (mut plan, mut done) = (first, Progress::default());
        let most = self.max_steps.unwrap_or(usize::MAX);
        while let Selection::Merge(chosen) = self.selector.next(&plan, template.geometry.fan_in) {
            if report.steps >= most {
                break;
            }
            report.reason = chosen.reason.clone();
            self.step(&template, chosen, &originals, &mut done, report)
                .await?;
            plan = self.replan(&mut done).await?;
        }
        fill_report(report, &plan, &done);
        Ok(())
    }

    /// Merges and commits one step.
    #[tracing::instrument(
        skip_all,
        fields(
            step = report.steps,
            chains = chosen.step.chains.len(),
            input_objects = chosen.step.input_objects().count(),
            input_bytes = chosen.step.input_bytes(),
            version = tracing::field::Empty
        )
    )]
    async fn step(
        &mut self,
        template: &Writer<'_>,
        chosen: Chosen,
        originals: &HashSet<String>,
        done: &mut Progress,
        report: &mut CompactReport,
    ) -> Result<(), CompactError> {
        let step = chosen.step;
        let inputs: Vec<String> = step.input_objects().map(|o| o.entry.key.clone()).collect();
        if done.previous.as_ref() == Some(&inputs) {
            return Err(CompactError::NoProgress);
        }
        let mut w = template.fresh(std::mem::take(&mut report.stages));
        let full = chosen.full && !done.others;
        let result = w.run(&step, self.paths, self.layout, full).await;
        done.written += w.written_bytes;
        report.peak_budget_bytes = report
            .peak_budget_bytes
            .max(w.peak_loader_bytes + w.geometry.merge_bytes(step.chains.len()));
        let committed = w.finish(result, report).await?;
        tracing::Span::current().record("version", committed.version);
        tracing::info!(
            version = committed.version,
            objects = committed.objects.len(),
            bytes = committed.objects.iter().map(|o| o.bytes).sum::<u64>(),
            reason = %report.reason,
            "step committed"
        );
        done.replaced.extend(
            step.input_objects()
                .filter(|o| originals.contains(&o.entry.key))
                .map(|o| (o.entry.key.clone(), o.entry.clone())),
        );
        self.allowed
            .extend(committed.objects.iter().map(|o| o.key.clone()));
        done.ours
            .extend(committed.objects.into_iter().map(|o| (o.key.clone(), o)));
        report.version = Some(committed.version);
        report.steps += 1;
        done.previous = Some(inputs);
        Ok(())
    }

    /// The plan of the newest version, over the objects this run may touch.
    async fn replan(&self, done: &mut Progress) -> Result<Plan, CompactError> {
        let live = self.log.manifests(&self.log.latest().await?).await?;
        done.others |= live
            .iter()
            .flat_map(|m| m.objects())
            .any(|(_, o)| !self.allowed.contains(&o.key));
        Ok(plan_of(only(live, &self.allowed), self.layout))
    }
}

/// The report's inputs (objects of the version read that were replaced), outputs (objects
/// written that the table still holds) and bytes written.
fn fill_report(report: &mut CompactReport, plan: &Plan, done: &Progress) {
    let left: HashSet<&str> = plan_keys(plan);
    let (mut input, mut output) = (Totals::default(), Totals::default());
    input.add(done.replaced.values());
    output.add(done.ours.values().filter(|o| left.contains(o.key.as_str())));
    (report.input_objects, report.input_bytes, report.input_rows) =
        (input.objects, input.bytes, input.rows);
    (
        report.output_objects,
        report.output_bytes,
        report.output_rows,
    ) = (output.objects, output.bytes, output.rows);
    report.written_bytes = done.written;
    report.written_over_output = ravel_log::ratio(done.written, report.output_bytes);
}

/// Every object a plan names.
fn plan_keys(plan: &Plan) -> HashSet<&str> {
    plan.untouched
        .iter()
        .map(|o| o.key.as_str())
        .chain(plan.input_objects().map(|o| o.entry.key.as_str()))
        .collect()
}

/// Objects, bytes and rows, summed.
#[derive(Debug, Default)]
struct Totals {
    objects: usize,
    bytes: u64,
    rows: u64,
}

impl Totals {
    fn add<'a>(&mut self, objects: impl Iterator<Item = &'a ravel_manifest::ObjectEntry>) {
        for o in objects {
            self.objects += 1;
            self.bytes += o.bytes;
            self.rows += o.rows;
        }
    }
}

fn plan_of(live: Vec<LiveManifest>, layout: &Layout) -> Plan {
    plan(&live, &layout.sort_key_names())
}

/// The deepest overlap among a step's objects, in chains.
fn step_depth(step: &Step) -> usize {
    let objects: Vec<crate::Ranged> = step
        .chains
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.objects.iter().map(move |o| (i, &o.entry)))
        .collect();
    max_depth(&objects)
}

/// `live` reduced to the objects named in `allowed`.
fn only(live: Vec<LiveManifest>, allowed: &HashSet<String>) -> Vec<LiveManifest> {
    live.into_iter()
        .filter_map(|mut m| {
            m.live
                .retain(|l| allowed.contains(&m.manifest.objects[l.position].key));
            (!m.live.is_empty()).then_some(m)
        })
        .collect()
}

/// The depth of the newest version as `verify` reports it (the most objects that hold one key,
/// touching ends counted once), over the objects of the current layout.
async fn depth_now(log: &TableLog, layout: &Layout) -> Result<usize, CompactError> {
    let live = log.manifests(&log.latest().await?).await?;
    Ok(depth_of(&live, layout))
}

fn depth_of(live: &[LiveManifest], layout: &Layout) -> usize {
    let objects: Vec<&ObjectEntry> = live
        .iter()
        .filter(|m| m.manifest.sort_key == layout.sort_key_names())
        .flat_map(|m| m.objects().map(|(_, o)| o))
        .collect();
    ravel_manifest::clustering::clustering_info(&objects).map_or(0, |c| c.max_depth)
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
        steps: 0,
        chains: plan.chains(),
        passes: 0,
        fan_in: geometry.fan_in,
        slice_rows: geometry.slice_rows,
        written_bytes: 0,
        written_over_output: 0.0,
        loaded_since_full_bytes: 0,
        written_since_full_bytes: 0,
        write_amplification: 0.0,
        loaded_bytes_total: 0,
        written_bytes_total: 0,
        intermediate_objects: 0,
        depth_before: plan.depth_before,
        depth_after: plan.depth_before,
        policy: None,
        depth_bound: Some(1),
        reason: String::new(),
        peak_budget_bytes: 0,
        stages: CompactStages::default(),
        wall_s: 0.0,
        dry_run,
        foreign_objects: 0,
        adopted: None,
    }
}

/// What [`Writer::run`] committed.
struct Outcome {
    prepared: Prepared,
    passes: usize,
    version: u64,
}

/// What a step committed: its version and the objects it added.
struct Done {
    version: u64,
    objects: Vec<ravel_manifest::ObjectEntry>,
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
            written_bytes: 0,
            peak_loader_bytes: 0,
            stages: CompactStages::default(),
        })
    }

    /// Bytes stored so far, the loaders' largest peak and their stage times.
    pub(crate) fn written(&self) -> (u64, u64, &CompactStages) {
        (self.written_bytes, self.peak_loader_bytes, &self.stages)
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
        n
    }

    /// A writer like this one with nothing written yet.
    fn fresh(&self, stages: CompactStages) -> Writer<'a> {
        Writer {
            store: self.store,
            table: self.table,
            os: self.os.clone(),
            load: self.load.clone(),
            order: self.order.clone(),
            geometry: self.geometry,
            intermediates: Vec::new(),
            scratch: self.scratch.clone(),
            written_bytes: 0,
            peak_loader_bytes: 0,
            stages,
        }
    }

    /// Sorts, merges and commits; returns what it committed.
    async fn run(
        &mut self,
        step: &Step,
        paths: &TablePaths,
        layout: &Layout,
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
        self.stages.merge_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let prepared = merged.prepared;
        let publish = Publish {
            step,
            prepared: &prepared,
            ranks,
            written_bytes: self.written_bytes,
            full,
        };
        let version = commit(self.os.clone(), paths, layout, publish).await;
        self.stages.commit_s += t.elapsed().as_secs_f64();
        match version {
            Ok(version) => Ok(Outcome {
                prepared,
                passes: merged.passes,
                version,
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
            let loader = self.loader().await?;
            let p = self.range_into(chains, window, loader).await?;
            return Ok(p.map(|p| (p, 1)));
        }
        let mut next = Vec::new();
        for group in chains.chunks(self.geometry.fan_in) {
            let loader = self.scratch_loader().await?;
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
        loader.set_presorted()?;
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
        let mut loader = self.loader().await?;
        // Every sequence it is given (a chain's rows, the merge) is in order.
        loader.set_presorted()?;
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
            let mut loader = self.scratch_loader().await?;
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
                let loader = self.loader().await?;
                let p = self.merge(chains, loader).await?;
                return Ok((p, passes));
            }
            let mut next = Vec::new();
            for group in chains.chunks(self.geometry.fan_in) {
                if group.len() == 1 {
                    next.push(group[0].clone());
                    continue;
                }
                let loader = self.scratch_loader().await?;
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
        loader.set_presorted()?;
        loop {
            match merge.next_batch().await {
                Ok(Some(b)) => push(&mut loader, b).await?,
                Ok(None) => break,
                Err(e) => return Err(CompactError::from(loader.abandon(read_failed(e)).await)),
            }
        }
        self.prepared(loader).await
    }

    /// A loader of objects to publish.
    async fn loader(&self) -> Result<Loader, CompactError> {
        let mut loader = Loader::new(self.store, self.table, self.load.clone()).await?;
        loader.set_purpose(ravel_loader::Writing::Merge);
        Ok(loader)
    }

    /// A loader of objects that only this compaction reads back (see [`Scratch`]).
    async fn scratch_loader(&self) -> Result<Loader, CompactError> {
        let mut loader = self.loader().await?;
        loader.set_scratch(Some(self.scratch.operation()))?;
        Ok(loader)
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
        report: &mut CompactReport,
    ) -> Result<Done, CompactError> {
        report.stages = std::mem::take(&mut self.stages);
        report.intermediate_objects += self.drop_intermediates().await;
        let o = result?;
        let m = &o.prepared.manifest;
        report.passes = report.passes.max(o.passes);
        let objects = m.objects.clone();
        o.prepared.release().await;
        Ok(Done {
            version: o.version,
            objects,
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

/// Per object of a step's manifest, its rank and the run it continues.
struct Ranks {
    orders: Vec<Option<u64>>,
    chains: Vec<Option<ChainOrigin>>,
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

/// What a step commits: its output in place of its inputs, and what writing it cost.
struct Publish<'a> {
    step: &'a Step,
    prepared: &'a Prepared,
    ranks: Ranks,
    written_bytes: u64,
    /// The step leaves the table one sequence.
    full: bool,
}

/// Publishes the step's output as the version that replaces its inputs. Returns the version.
async fn commit(
    os: Arc<dyn ObjectStore>,
    paths: &TablePaths,
    layout: &Layout,
    publish: Publish<'_>,
) -> Result<u64, CompactError> {
    let manifest = &publish.prepared.manifest;
    let replacement = ravel_loader::Replacement {
        orders: publish.ranks.orders,
        chains: publish.ranks.chains,
        removes: publish
            .step
            .input_objects()
            .map(|o| o.entry.key.clone())
            .collect(),
        written_bytes: publish.written_bytes,
        full: publish.full,
        consumed: Default::default(),
    };
    let committed = ravel_loader::Committer::new(os, paths.clone())
        .replace(
            manifest,
            replacement,
            ravel_loader::table_configuration(layout, &manifest.schema),
        )
        .await
        .map_err(|e| match e {
            // A conflict is the compaction's to report (and its caller's to retry on).
            ravel_loader::LoadError::Log(e) => CompactError::Log(e),
            e => CompactError::from(e),
        })?;
    Ok(committed.version())
}
