//! `ravel-load gc`: reports a table's unreferenced objects and deletes the old ones, unless a
//! running load's lease blocks it.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use ravel_gc::{GcOptions, GcReport, gc};
use ravel_store::Store;

use crate::BadInput;

#[derive(Args)]
pub struct GcArgs {
    #[command(flatten)]
    pub table: crate::flags::TableArgs,
    /// Delete unreferenced objects last written, or removed by a compaction, longer ago than
    /// this (e.g. 24h, 7d, 0s): readers of older versions keep reading within it. By default
    /// the table's files retention (`layout retention`, 7 days unless set). While
    /// a load runs (it holds a lease under `<table>/_leases/`), gc deletes nothing and names
    /// the load and exits 3; a lease not rewritten for 10 minutes, dated more than 10 minutes
    /// ahead of the store's clock, or whose process on this host is gone, is stale and no
    /// longer blocks. Ages are by the store's clock (gc writes `_ravel/clock` to read it).
    /// The log's own files (entries, checksum files, checkpoints) go by the table's log window
    /// instead (`layout retention set --log`, 30 days unless set): those of the versions before
    /// the newest checkpoint older than it.
    #[arg(long)]
    pub older_than: Option<String>,
    /// Report only; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: GcArgs) -> Result<()> {
    let given = (args.older_than.as_ref())
        .map(|t| {
            ravel_layout::parse_seconds(t).map_err(|e| BadInput(format!("--older-than {t:?}: {e}")))
        })
        .transpose()?;
    let store = Store::open(&args.table.store)?;
    let report = crate::runtime()?
        .block_on(async {
            let secs = match given {
                Some(s) => s,
                None => files_retention(&store, &args.table.name).await?,
            };
            let opts = GcOptions::new(Duration::from_secs(secs), args.dry_run);
            Ok::<_, anyhow::Error>(gc(&store, &args.table.name, &opts).await?)
        })
        .with_context(|| {
            format!(
                "collecting table {:?} in {}",
                args.table.name, args.table.store
            )
        })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let shown = args.older_than.clone().unwrap_or_else(|| {
            let window = ravel_layout::interval(report.older_than_s);
            let window = window.trim_start_matches("interval ");
            format!("{window} (the table's files retention)")
        });
        print_report(&report, &shown);
    }
    if !report.dry_run && !report.blocked_by.is_empty() {
        return Err(Blocked(report.blocked_by.join(", ")).into());
    }
    Ok(())
}

/// The table's files retention (`layout retention`), in seconds: `gc`'s retention unless
/// `--older-than` is given.
async fn files_retention(store: &Store, table: &str) -> Result<u64> {
    let layout = ravel_layout::LayoutStore::new(store, table)?.load().await?;
    Ok(layout.retention.files_s)
}

/// A gc that running loads kept from deleting (exit 3, so that a scheduled gc notices).
#[derive(Debug, thiserror::Error)]
#[error(
    "a load is running (lease {0}): gc deleted nothing it had not deleted before the load started; run it again after the load"
)]
pub(crate) struct Blocked(String);

fn print_report(r: &GcReport, older_than: &str) {
    let bytes: u64 = r.unreferenced.iter().map(|u| u.bytes).sum();
    println!(
        "table {}: {} manifest(s), {} object(s), {} referenced, {} unreferenced ({} bytes)",
        r.table,
        r.manifests,
        r.objects,
        r.referenced,
        r.unreferenced.len(),
        bytes
    );
    for u in &r.unreferenced {
        let what = if u.deleted {
            "deleted"
        } else if !r.blocked_by.is_empty() && u.age_s >= r.older_than_s {
            "kept: a load is running"
        } else if r.dry_run && u.age_s >= r.older_than_s {
            "would delete"
        } else if u.age_s < r.older_than_s && u.removed {
            "kept: removed by a version younger than the retention"
        } else if u.age_s < r.older_than_s {
            "kept: younger than the retention"
        } else {
            "kept"
        };
        let age = if u.removed {
            "since its removal"
        } else {
            "old"
        };
        let staging = if u.staging { " (staging file)" } else { "" };
        println!(
            "  {}{staging} {} bytes, {} s {age}: {what}",
            u.key, u.bytes, u.age_s
        );
    }
    print_leases(r);
    print_log(r);
    println!(
        "{} deleted ({} bytes); retention {older_than}{}",
        r.deleted,
        r.deleted_bytes,
        if r.dry_run { "; dry run" } else { "" }
    );
}

/// The log files the log window expired: deleted, or why not.
fn print_log(r: &GcReport) {
    let l = &r.log;
    let window = ravel_layout::interval(l.window_s);
    let window = window.trim_start_matches("interval ");
    if let Some(why) = &l.refused {
        println!("  log: nothing deleted: {why}");
        return;
    }
    let Some(start) = l.starts_at else {
        println!("  log: no version before a checkpoint is older than the log window ({window})");
        return;
    };
    let what = if l.deleted > 0 || l.expired == 0 {
        format!("{} deleted ({} bytes)", l.deleted, l.deleted_bytes)
    } else if r.dry_run {
        "would delete".to_string()
    } else {
        "kept: a load is running".to_string()
    };
    println!(
        "  log: {} file(s) ({} bytes) of the versions before checkpoint {start}, older than the log window ({window}): {what}",
        l.expired, l.expired_bytes
    );
}

fn print_leases(r: &GcReport) {
    for l in &r.leases {
        let holder = match &l.lease {
            Some(lease) => format!("load on {} pid {}", lease.host, lease.pid),
            None => "unreadable lease".to_string(),
        };
        let state = if l.ahead_s > 0 && !l.live {
            let deleted = if l.deleted { ": deleted" } else { "" };
            format!(
                "stale, dated {} s ahead of the store's clock{deleted}",
                l.ahead_s
            )
        } else if l.live {
            "running: gc deletes nothing while it runs".into()
        } else if l.deleted {
            "stale: deleted".into()
        } else if l.holder_dead {
            "stale (its process is gone)".into()
        } else {
            "stale".into()
        };
        println!(
            "  lease {} ({holder}), last written {} s ago: {state}",
            l.key, l.age_s
        );
    }
}
