//! `ravel-load maintain`: the table's maintenance policy, run on its own.

use anyhow::{Context, Result};
use clap::Args;
use ravel_compact::{CompactError, CompactOptions, CompactReport};
use ravel_store::Store;
use ravel_tier::Tier;

use crate::flags::MergeFlags;
use crate::merge_report::print_report;

#[derive(Args, Debug, Clone)]
pub struct MaintainArgs {
    #[command(flatten)]
    pub table: crate::flags::TableArgs,
    #[command(flatten)]
    pub merge: MergeFlags,
    /// Plan the next step and report it; write nothing. Objects other Delta writers added are
    /// taken in first, as the real run would, into a local temporary directory.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: MaintainArgs) -> Result<()> {
    let tier = Tier::detect()?;
    let mut opts = args.merge.options(&tier)?;
    opts.dry_run = args.dry_run;
    let store = Store::open(&args.table.store)?;
    let report = crate::runtime()?
        .block_on(maintain_retrying(&store, &args.table.name, &opts))
        .with_context(|| {
            format!(
                "maintaining table {:?} in {}",
                args.table.name, args.table.store
            )
        })?;
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&report)?),
        false => print_report(&report),
    }
    Ok(())
}

/// Times maintenance plans again from the newest version when a concurrent writer (another
/// load's maintenance, a compaction) removed one of its inputs.
const CONFLICT_RETRIES: usize = 3;

async fn maintain_retrying(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<CompactReport, CompactError> {
    ravel_ingest::maintain_retrying(store, table, opts, CONFLICT_RETRIES).await
}
