//! `ravel-load serve`: the layout service (see `ravel_serve`). The process's part: the
//! configuration, the listening socket, and SIGTERM and SIGINT, which stop it.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use ravel_serve::{Config, ServeOptions, TableStatus};
use ravel_tier::Tier;
use tokio_util::sync::CancellationToken;

use crate::BadInput;
use crate::flags::{GeometryFlags, checked};

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// The configuration: TOML, one [[table]] per table (see docs/service.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Address of the HTTP endpoints (/healthz, /metrics, /v1/tables); port 0 picks one.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub listen: String,
    /// Do the pending work (every pending file, whatever the batching, and the maintenance
    /// after it), print the tables' status as JSON and exit: 0 when no table failed.
    #[arg(long)]
    pub once: bool,
    /// Shadow mode: poll, plan and serve every decision; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub geometry: GeometryFlags,
}

/// `--once` ended with tables that failed (exit 1).
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} table(s) ended with an error, or with files not loaded: failed, replaced, or still changing (the status above names them)"
)]
pub struct Unfinished(usize);

pub fn run(args: ServeArgs) -> Result<()> {
    let config = Config::read(&args.config)
        .map_err(|e| BadInput(ravel_store::ErrorChain::new(&e).to_string()))?;
    let tier = Tier::detect()?;
    let load = checked(args.geometry.over(&tier))?;
    let mut opts = ServeOptions::new(ravel_ingest::IngestOptions::new(load));
    opts.once = args.once;
    opts.dry_run = args.dry_run;
    opts.tsv = crate::flags::hits_tsv(ravel_loader::BadRows::default());
    let runtime = crate::runtime()?;
    let statuses = runtime.block_on(serve(&args, config, opts));
    // Work still running on blocking threads (a sort dropped at shutdown) is not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    let statuses = statuses?;
    if args.once {
        let doc = serde_json::json!({ "tables": statuses });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        let failed = statuses.iter().filter(|s| ended_badly(s)).count();
        if failed > 0 {
            return Err(Unfinished(failed).into());
        }
    }
    Ok(())
}

async fn serve(args: &ServeArgs, config: Config, opts: ServeOptions) -> Result<Vec<TableStatus>> {
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| BadInput(format!("--listen {}: {e}", args.listen)))?;
    let addr = listener.local_addr()?;
    eprintln!("ravel-load serve: listening on http://{addr}");
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    ravel_serve::serve(config, opts, listener, shutdown)
        .await
        .context("serving")
}

/// Cancels `shutdown` on the first SIGTERM or SIGINT.
async fn stop_on_signal(shutdown: CancellationToken) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("stopping: a signal asked the service to stop");
    shutdown.cancel();
}

/// A table ended with an error, or with files it did not load: failed, replaced under a name
/// a version consumed, or still changing.
fn ended_badly(s: &TableStatus) -> bool {
    s.last_error.is_some()
        || !s.failed_files.is_empty()
        || !s.replaced_files.is_empty()
        || s.settling_files > 0
}
