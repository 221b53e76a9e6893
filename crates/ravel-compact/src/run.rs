//! A compaction from plan to commit: the table opened, other writers' objects adopted, the
//! steps run ([`crate::steps`]) and the report.

use std::time::Instant;

use arrow::datatypes::Schema;
use ravel_layout::{ClusteringOrder, Layout, LayoutStore};
use ravel_log::{LiveManifest, TableLog};
use ravel_store::{Store, TablePaths};

use crate::plan::{InputObject, Plan, plan};
use crate::publish::Publisher;
use crate::selection::{Selection, Selector, depth_now, depth_of};
use crate::steps::{Ran, Steps, add_totals};
use crate::writer::{Geometry, Writer};
use crate::{CompactError, CompactOptions, CompactReport, CompactStages};

/// Runs the compaction `opts` asks for on `table` (see the crate docs).
pub async fn compact(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<CompactReport, CompactError> {
    run_selected(store, table, opts, Merge::Compact).await
}

/// Runs `table`'s maintenance policy (see [`crate::maintenance`]): its merges, one after
/// another, each committed as a version, until it asks for none. `opts.max_input_bytes` does
/// not apply: the policy chooses whole runs.
pub async fn maintain(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<CompactReport, CompactError> {
    run_selected(store, table, opts, Merge::Maintain).await
}

/// Which merge a run (or a job, [`crate::job::plan_compact`]) makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Every overlapping object (or key ranges of them), as `compact` merges them.
    Compact,
    /// The merge the table's maintenance policy chooses now, as `maintain` runs it.
    Maintain,
}

impl Merge {
    fn operation(self) -> &'static str {
        match self {
            Merge::Compact => "compact",
            Merge::Maintain => "maintain",
        }
    }
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
        operation = %merge.operation(),
        version = tracing::field::Empty
    )
)]
async fn run_selected(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
    merge: Merge,
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
    let mut report = run_opened(store, table, opts, merge, o, started).await?;
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
    merge: Merge,
    o: Opened,
    started: Instant,
) -> Result<CompactReport, CompactError> {
    let first = plan(&o.live, &o.layout.sort_key_names());
    let selector = Selector {
        policy: (merge == Merge::Maintain).then_some(o.layout.maintenance),
        max_input_bytes: opts.max_input_bytes,
    };
    let widest = first.steps.iter().map(|s| s.chains.len()).max();
    let geometry = Geometry::new(opts, &o.schema, widest.unwrap_or(0));
    let selection = selector.next(&first, geometry.fan_in);
    let facts = PlanFacts {
        table,
        read_version: o.read_version,
        shown: selector.shown(&first, &selection),
        geometry,
        dry_run: opts.dry_run,
        depth_before: depth_of(&o.live, &o.layout),
        policy: selector.policy,
        reason: selection.reason().to_string(),
        plan_s: started.elapsed().as_secs_f64(),
    };
    if matches!(selection, Selection::Nothing(_)) || opts.dry_run {
        let depth = facts.depth_before;
        return Ok(assemble(facts, None, o.totals, depth, started));
    }
    // Probed before the first write (and recorded): whether creates need claims.
    store.capabilities().await?;
    let mut load = opts.load.clone();
    load.load_budget = (opts.load.load_budget / 2).max(load.object_bytes);
    let writer = Writer::new(store, table, load, o.order.clone(), geometry)?;
    let publisher = Publisher::new(store.object_store().clone(), o.paths.clone(), &o.layout);
    let steps = Steps {
        publisher: &publisher,
        layout: &o.layout,
        selector,
        max_steps: opts.max_steps,
        allowed: o
            .live
            .iter()
            .flat_map(|m| m.objects().map(|(_, o)| o.key.clone()))
            .collect(),
    };
    let ran = steps.run(writer, first).await?;
    let depth_after = depth_now(&o.log, &o.layout).await?;
    Ok(assemble(facts, Some(&ran), o.totals, depth_after, started))
}

/// What the plan says before anything is written: the report's plan half.
struct PlanFacts<'a> {
    table: &'a str,
    read_version: u64,
    /// The plan the report shows (see [`Selector::shown`]).
    shown: Plan,
    geometry: Geometry,
    dry_run: bool,
    depth_before: usize,
    policy: Option<ravel_layout::Maintenance>,
    /// Why the first step was chosen, or why none was.
    reason: String,
    plan_s: f64,
}

/// The report, assembled in one place: the plan's facts, what the steps did (`None`: nothing
/// ran), the log's totals before the run and the depth the run left.
fn assemble(
    facts: PlanFacts<'_>,
    ran: Option<&Ran>,
    totals: ravel_log::Totals,
    depth_after: usize,
    started: Instant,
) -> CompactReport {
    let mut report = planned(facts);
    if let Some(ran) = ran {
        ran.fill(&mut report);
    }
    add_totals(&mut report, totals);
    report.depth_after = depth_after;
    report.wall_s = started.elapsed().as_secs_f64();
    report
}

/// The report of the plan before anything is written.
fn planned(f: PlanFacts<'_>) -> CompactReport {
    let inputs: Vec<&InputObject> = f.shown.input_objects().collect();
    CompactReport {
        table: f.table.to_string(),
        read_version: Some(f.read_version),
        version: None,
        input_objects: inputs.len(),
        input_bytes: inputs.iter().map(|o| o.entry.bytes).sum(),
        input_rows: inputs.iter().map(|o| o.entry.rows).sum(),
        output_objects: 0,
        output_bytes: 0,
        output_rows: 0,
        untouched_objects: f.shown.untouched.len(),
        steps: 0,
        chains: f.shown.chains(),
        passes: 0,
        fan_in: f.geometry.fan_in,
        slice_rows: f.geometry.slice_rows,
        written_bytes: 0,
        written_over_output: 0.0,
        loaded_since_full_bytes: 0,
        written_since_full_bytes: 0,
        write_amplification: 0.0,
        loaded_bytes_total: 0,
        written_bytes_total: 0,
        intermediate_objects: 0,
        depth_before: f.depth_before,
        depth_after: f.depth_before,
        policy: f.policy,
        depth_bound: f.policy.as_ref().map_or(Some(1), crate::depth_bound),
        reason: f.reason,
        peak_budget_bytes: 0,
        stages: CompactStages {
            plan_s: f.plan_s,
            ..CompactStages::default()
        },
        wall_s: 0.0,
        dry_run: f.dry_run,
        foreign_objects: 0,
        adopted: None,
    }
}
