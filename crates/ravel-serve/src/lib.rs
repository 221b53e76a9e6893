//! The layout service: keeps tables loaded and clustered with no one driving. It lists each
//! table's landing prefix every poll, loads the files no version consumed yet (the log
//! records what each version consumed, so a restart holds no state and loads each file once
//! however it cuts its batches), maintains the tables fairly under one budget, runs `gc` on
//! an interval, and serves its decisions and figures over HTTP.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ravel_serve::Config::read("serve.toml".as_ref())?;
//! let tier = ravel_tier::Tier::detect()?;
//! let opts = ravel_serve::ServeOptions::new(ravel_ingest::IngestOptions::from_tier(&tier));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await?;
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! ravel_serve::serve(config, opts, listener, shutdown).await?;
//! # Ok(()) }
//! ```

mod config;
mod cursor;
mod http;
mod landing;
mod metrics;
mod overlap;
mod service;
mod status;
mod table;

pub use config::{
    AfterLoad, Config, ConfigError, DEFAULT_BATCH_AGE, DEFAULT_BATCH_BYTES, DEFAULT_GC_INTERVAL,
    DEFAULT_POLL, DEFAULT_SETTLE, TableConfig,
};
pub use http::router;
pub use landing::{Landed, Landing, LandingError, Listing, Skipped};
pub use service::{ServeOptions, Service, Shared};
pub use status::{Decision, FailedFile, ReplacedFile, TableStatus};

use tokio_util::sync::CancellationToken;

/// Why the service stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error("serving HTTP")]
    Http(#[source] std::io::Error),
}

/// Runs the service on `config` and its endpoints on `listener` until `shutdown` is
/// cancelled (or, with [`ServeOptions::once`], until the pending work is done). Returns the
/// tables' last statuses.
pub async fn serve(
    config: Config,
    opts: ServeOptions,
    listener: tokio::net::TcpListener,
    shutdown: CancellationToken,
) -> Result<Vec<TableStatus>, ServeError> {
    let service = Service::new(config, opts);
    let stop_http = CancellationToken::new();
    let app = router(service.shared());
    let stopped = stop_http.clone();
    let http = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stopped.cancelled().await })
            .await
    });
    let statuses = service.run(shutdown).await;
    stop_http.cancel();
    // A step dropped at shutdown releases its lease from a task of its own: let it run.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    match http.await {
        Ok(Ok(())) => Ok(statuses),
        Ok(Err(e)) => Err(ServeError::Http(e)),
        Err(join) => Err(ServeError::Http(std::io::Error::other(join))),
    }
}
