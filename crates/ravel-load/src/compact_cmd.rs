//! `ravel-load compact`: merges a table's overlapping objects into one sequence in clustering
//! order and commits the swap as a table version.

use anyhow::{Context, Result};
use clap::Args;
use ravel_compact::{CompactOptions, CompactReport, compact};
use ravel_store::Store;
use ravel_tier::Tier;

use crate::flags::{GeometryFlags, TableArgs, checked};

#[derive(Args, Debug, Clone)]
pub struct CompactArgs {
    #[command(flatten)]
    pub table: TableArgs,
    #[command(flatten)]
    pub merge: MergeFlags,
    /// Input bytes one step merges at most: more overlapping input is merged one key range at
    /// a time, the most overlapping first, each committed as a version (default: no limit).
    #[arg(long)]
    pub max_input_bytes: Option<u64>,
    /// Plan and report only; write nothing. Objects other Delta writers added are taken in
    /// first, as the real run would, into a local temporary directory.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// How merges write: the flags `compact` and `maintain` share.
#[derive(Args, Debug, Clone)]
pub struct MergeFlags {
    #[command(flatten)]
    pub geometry: GeometryFlags,
    /// Runs merged at once, at most (default: as many as half the budget holds); more merge in
    /// passes.
    #[arg(long)]
    pub fan_in: Option<usize>,
}

fn options(args: &CompactArgs, tier: &Tier) -> Result<CompactOptions> {
    let mut opts = args.merge.options(tier)?;
    opts.max_input_bytes = args.max_input_bytes;
    opts.dry_run = args.dry_run;
    Ok(opts)
}

impl MergeFlags {
    /// The options these flags give over the tier's defaults; unusable values are bad input.
    pub fn options(&self, tier: &Tier) -> Result<CompactOptions> {
        let args = self;
        let load = checked(args.geometry.over(tier))?;
        let opts = CompactOptions {
            load,
            fan_in: args.fan_in,
            max_input_bytes: None,
            dry_run: false,
            max_steps: None,
        };
        opts.validate()?;
        Ok(opts)
    }
}

pub fn run(args: CompactArgs) -> Result<CompactReport> {
    let tier = Tier::detect()?;
    let opts = options(&args, &tier)?;
    let store = Store::open(&args.table.store)?;
    let report = crate::runtime()?
        .block_on(compact(&store, &args.table.name, &opts))
        .with_context(|| {
            format!(
                "compacting table {:?} in {}",
                args.table.name, args.table.store
            )
        })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(report)
}

pub fn print_report(r: &CompactReport) {
    let read = r.read_version.map_or("-".to_string(), |v| v.to_string());
    let what = if r.policy.is_some() {
        "maintain"
    } else {
        "compact"
    };
    if r.input_objects == 0 {
        println!(
            "table {}: nothing to {what} at version {read}: {} ({} object(s) left as they are, overlap depth {}); nothing written",
            r.table, r.reason, r.untouched_objects, r.depth_before
        );
        print_totals(r);
        return;
    }
    if r.dry_run {
        println!(
            "table {} version {read}: would merge {} object(s) ({} bytes, {} rows) of {} run(s), overlap depth {}; {} object(s) left as they are; dry run, nothing written",
            r.table,
            r.input_objects,
            r.input_bytes,
            r.input_rows,
            r.chains,
            r.depth_before,
            r.untouched_objects
        );
        return;
    }
    let version = r.version.map_or("-".to_string(), |v| v.to_string());
    println!(
        "table {}: version {read} -> {version}: merged {} object(s) ({} bytes, {} rows) of {} run(s) into {} object(s) ({} bytes, {} rows) in {} step(s) of {} pass(es) of at most {} runs; {} object(s) left as they are",
        r.table,
        r.input_objects,
        r.input_bytes,
        r.input_rows,
        r.chains,
        r.output_objects,
        r.output_bytes,
        r.output_rows,
        r.steps,
        r.passes,
        r.fan_in,
        r.untouched_objects
    );
    let s = &r.stages;
    println!("chosen: {}", r.reason);
    print_totals(r);
    println!(
        "overlap depth {} -> {} (bound {}); {} bytes written ({:.2}x the output); peak budget {} bytes; plan {:.2} s, merge and write {:.2} s (sort {:.2}, gather {:.2}, encode {:.2}, upload {:.2}), commit {:.2} s; wall {:.2} s",
        r.depth_before,
        r.depth_after,
        r.depth_bound.map_or("none".to_string(), |d| d.to_string()),
        r.written_bytes,
        r.written_over_output,
        r.peak_budget_bytes,
        s.plan_s,
        s.merge_s,
        s.write.sort_s,
        s.write.gather_s,
        s.write.encode_s,
        s.write.upload_s,
        s.commit_s,
        r.wall_s
    );
}

/// What keeping the table clustered has cost since its last full compaction.
fn print_totals(r: &CompactReport) {
    println!(
        "since the last full compaction: {} bytes loaded, {} bytes written merging: write amplification {:.2} (written over loaded)",
        r.loaded_since_full_bytes, r.written_since_full_bytes, r.write_amplification
    );
}
