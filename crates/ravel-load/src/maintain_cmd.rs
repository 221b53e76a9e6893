//! `ravel-load maintain`: the table's maintenance policy, run on its own.

use anyhow::{Context, Result};
use clap::Args;
use ravel_compact::{CompactError, CompactOptions, CompactReport, maintain};
use ravel_store::Store;
use ravel_tier::Tier;

use crate::compact_cmd::{MergeFlags, print_report};

#[derive(Args, Debug, Clone)]
pub struct MaintainArgs {
    /// The store: a local directory or s3://bucket/prefix (S3 settings from AWS_* variables).
    #[arg(long, env = "RAVEL_STORE", default_value = "./ravel-store")]
    pub store: String,
    /// The table.
    #[arg(long)]
    pub table: String,
    #[command(flatten)]
    pub merge: MergeFlags,
    /// Plan the next step and report it; write nothing.
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
    let store = Store::open(&args.store)?;
    let report = crate::runtime()?
        .block_on(maintain(&store, &args.table, &opts))
        .with_context(|| format!("maintaining table {:?} in {}", args.table, args.store))?;
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&report)?),
        false => print_report(&report),
    }
    Ok(())
}

/// The maintenance step a load ends with: `None` when the table has no clustering key (its
/// objects keep arrival order; there is nothing to keep clustered).
pub async fn after_load(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
) -> Result<Option<CompactReport>, CompactError> {
    match maintain(store, table, opts).await {
        Ok(r) => Ok(Some(r)),
        Err(CompactError::NotClustered(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
