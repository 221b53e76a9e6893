//! `ravel-load compact`: merges a table's overlapping objects into one sequence in clustering
//! order and commits the swap as a table version.

use anyhow::{Context, Result};
use clap::Args;
use ravel_compact::{CompactOptions, CompactReport, compact};
use ravel_store::Store;
use ravel_tier::Tier;

use crate::flags::{MergeFlags, TableArgs};
use crate::merge_report::print_report;

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

fn options(args: &CompactArgs, tier: &Tier) -> Result<CompactOptions> {
    let mut opts = args.merge.options(tier)?;
    opts.max_input_bytes = args.max_input_bytes;
    opts.dry_run = args.dry_run;
    Ok(opts)
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
