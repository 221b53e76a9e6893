//! `ravel-load maintain`: the table's maintenance policy, run on its own.

use anyhow::{Context, Result};
use clap::Args;
use ravel_compact::{CompactError, CompactOptions, CompactReport, maintain};
use ravel_store::Store;
use ravel_tier::Tier;

use crate::compact_cmd::{MergeFlags, print_report};

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

/// The maintenance step a load ends with: `None` when the table has no clustering key (its
/// objects keep arrival order; there is nothing to keep clustered). Two loads that end at
/// once may pick the same merge: the one that loses plans again from the newest version.
pub async fn after_load(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<Option<CompactReport>, CompactError> {
    match maintain_retrying(store, table, opts).await {
        Ok(r) => Ok(Some(r)),
        Err(CompactError::NotClustered(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// [`maintain`], planned again after a conflict, up to [`CONFLICT_RETRIES`] times.
async fn maintain_retrying(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<CompactReport, CompactError> {
    let mut tries = 0;
    loop {
        match maintain(store, table, opts).await {
            Err(e) if e.is_conflict() && tries < CONFLICT_RETRIES => {
                tracing::info!(error = %e, "another writer changed the table; planning again");
                tries += 1;
            }
            other => return other,
        }
    }
}
