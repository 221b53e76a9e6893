//! `ravel-load plan`, `run-step` and `commit`: a load or a merge as a job whose steps any
//! engine runs (see `ravel_compact::job`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use ravel_compact::job::{
    Commit, CommitMode, CommitReport, Job, Merge, PlanOptions, StepGeometry, StepResult, StepWork,
    plan_compact, plan_load,
};
use ravel_store::Store;
use ravel_tier::Tier;

use crate::BadInput;
use crate::flags::{GeometryFlags, TableArgs, checked};

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(subcommand)]
    pub what: PlanWhat,
}

#[derive(Subcommand, Debug)]
pub enum PlanWhat {
    /// A globally sorted load of Parquet files: split steps (one per share of the files), then
    /// merge steps (one per key range, cut from a sample of the inputs' sort keys).
    Load {
        #[command(flatten)]
        common: PlanFlags,
        /// Input Parquet files or globs, read at the same paths by every worker.
        #[arg(long = "input", required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
    },
    /// `compact`'s merge of every overlapping object, as key-range steps.
    Compact {
        #[command(flatten)]
        common: PlanFlags,
    },
    /// The merge the table's maintenance policy chooses now, as key-range steps.
    Maintain {
        #[command(flatten)]
        common: PlanFlags,
    },
}

/// Flags every plan takes.
#[derive(Args, Debug)]
pub struct PlanFlags {
    #[command(flatten)]
    pub table: TableArgs,
    /// Merge steps (key ranges); a load also splits its files into as many shares. Cut to what
    /// the input fills (merge steps: its bytes over --object-bytes; shares: one per file), with
    /// a note in the plan.
    #[arg(long, default_value_t = 4)]
    pub steps: usize,
    /// Where the plan goes (JSON).
    #[arg(long)]
    pub out: PathBuf,
    /// Geometry and budget of each step (the budget is what one step may hold).
    #[command(flatten)]
    pub geometry: GeometryFlags,
}

#[derive(Args, Debug)]
pub struct RunStepArgs {
    /// The plan (`ravel-load plan`).
    #[arg(long)]
    pub plan: PathBuf,
    /// The step: its index in the plan, or within `--stage`.
    #[arg(long)]
    pub step: usize,
    /// Count `--step` within one stage (an engine that numbers each stage's tasks from 0,
    /// such as a Kubernetes Indexed Job).
    #[arg(long, value_enum)]
    pub stage: Option<Stage>,
    /// Where the step's result goes (JSON), for `commit`.
    #[arg(long)]
    pub out: PathBuf,
}

/// A stage of a job.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Stage {
    Split,
    Merge,
}

#[derive(Args, Debug)]
pub struct CommitArgs {
    /// The plan (`ravel-load plan`).
    #[arg(long)]
    pub plan: PathBuf,
    /// The steps' results (`ravel-load run-step --out`).
    pub results: Vec<PathBuf>,
    /// Commit each group of merge steps that share no input object on its own, once its steps
    /// have results; groups missing one are reported (exit 1). Not for loads.
    #[arg(long)]
    pub per_step: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What a plan is of.
enum Planned {
    Load(Vec<PathBuf>),
    Merge(Merge),
}

pub fn plan(args: PlanArgs) -> Result<()> {
    let (common, work) = match args.what {
        PlanWhat::Load { common, inputs } => (common, Planned::Load(inputs)),
        PlanWhat::Compact { common } => (common, Planned::Merge(Merge::Compact)),
        PlanWhat::Maintain { common } => (common, Planned::Merge(Merge::Maintain)),
    };
    if common.steps == 0 {
        return Err(BadInput("--steps must be at least 1".into()).into());
    }
    let tier = Tier::detect()?;
    let load = checked(common.geometry.over(&tier))?;
    let opts = PlanOptions {
        steps: common.steps,
        geometry: StepGeometry::from_load(&load),
    };
    let store = Store::open(&common.table.store)?;
    let table = &common.table.name;
    let job = crate::runtime()?
        .block_on(async {
            match &work {
                Planned::Load(inputs) => plan_load(&store, table, inputs, &opts).await,
                Planned::Merge(merge) => plan_compact(&store, table, &opts, *merge).await,
            }
        })
        .with_context(|| format!("planning table {table:?} in {}", common.table.store))?;
    write_json(&common.out, &job)?;
    let splits = job
        .steps
        .iter()
        .filter(|s| matches!(s.work, StepWork::Split { .. }));
    println!(
        "job {} ({}): {} split steps, {} merge steps, read at version {}: {}",
        job.id,
        job.operation.name(),
        splits.count(),
        job.merge_steps().count(),
        job.read_version.map_or("none".into(), |v| v.to_string()),
        job.reason
    );
    for note in &job.notes {
        println!("note: {note}");
    }
    Ok(())
}

pub fn run_step(args: RunStepArgs) -> Result<()> {
    let job: Job = read_json(&args.plan, "plan")?;
    let step = match args.stage {
        None => args.step,
        Some(stage) => stage_step(&job, stage, args.step)?,
    };
    let store = Store::open(&job.store)?;
    let result = crate::runtime()?
        .block_on(ravel_compact::job::run_step(&store, &job, step))
        .with_context(|| format!("running step {step} of job {}", job.id))?;
    write_json(&args.out, &result)?;
    println!(
        "step {step} of job {}: {} rows, {} objects, {} bytes written in {:.1} s",
        job.id,
        result.rows,
        result.objects.len(),
        result.cost.written_bytes,
        result.cost.wall_s
    );
    Ok(())
}

/// The index in the plan of the `i`-th step of `stage`.
fn stage_step(job: &Job, stage: Stage, i: usize) -> Result<usize> {
    let of_stage: Vec<usize> = job
        .steps
        .iter()
        .filter(|s| match stage {
            Stage::Split => matches!(s.work, StepWork::Split { .. }),
            Stage::Merge => matches!(s.work, StepWork::Merge { .. }),
        })
        .map(|s| s.index)
        .collect();
    of_stage.get(i).copied().ok_or_else(|| {
        BadInput(format!(
            "job {} has {} {stage:?} steps, no step {i} of them",
            job.id,
            of_stage.len()
        ))
        .into()
    })
}

pub fn commit(args: CommitArgs) -> Result<()> {
    let job: Job = read_json(&args.plan, "plan")?;
    let results = args
        .results
        .iter()
        .map(|p| read_json::<StepResult>(p, "step result"))
        .collect::<Result<Vec<_>>>()?;
    let mode = match args.per_step {
        true => CommitMode::PerStep,
        false => CommitMode::Whole,
    };
    let store = Store::open(&job.store)?;
    let c = Commit {
        job: &job,
        results,
        mode,
    };
    let report = crate::runtime()?
        .block_on(ravel_compact::job::commit(&store, c))
        .with_context(|| format!("committing job {} to table {:?}", job.id, job.table))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    match report.failed_groups() {
        0 => Ok(()),
        n => Err(anyhow::anyhow!(
            "{n} group(s) of steps were not committed: a step had no result (run it, then commit again)"
        )),
    }
}

fn print_report(r: &CommitReport) {
    let version = r.version.map_or("none".into(), |v| v.to_string());
    if r.already_published {
        println!("job {}: already published in version {version}", r.job);
        return;
    }
    println!(
        "job {} ({}): version {version}, {} objects, {} rows, {} bytes stored, {} written, {} removed, log entries {} bytes, published in {:.2} s ({:.2} s with the scratch cleared)",
        r.job,
        r.operation.name(),
        r.objects,
        r.rows,
        r.stored_bytes,
        r.written_bytes,
        r.removed_objects,
        r.entry_bytes,
        r.published_s,
        r.wall_s
    );
    for g in r.groups.iter().filter(|g| !g.missing.is_empty()) {
        println!(
            "  steps {:?}: not committed, no result for {:?}",
            g.steps, g.missing
        );
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let bytes = std::fs::read(path)
        .map_err(|e| BadInput(format!("cannot read the {what} {}: {e}", path.display())))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| BadInput(format!("the {what} {} does not parse: {e}", path.display())).into())
}

/// Writes `value` to `path` whole: a temporary file beside it, renamed over it.
fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let json = serde_json::to_vec_pretty(value)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, json).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
