//! The maintenance step a load ends with, planned again after a conflict.

use ravel_compact::{CompactError, CompactOptions, CompactReport, maintain};
use ravel_store::Store;
use serde::Serialize;

/// What the maintenance after a load did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Maintained {
    /// Not asked for ([`crate::IngestOptions::maintain`] off).
    #[default]
    Skipped,
    /// The table has no clustering key: its objects keep arrival order; there is nothing to
    /// keep clustered.
    NotClustered,
    /// The policy ran (it may have found nothing to merge: see the report's `reason`).
    Ran(Box<CompactReport>),
}

impl Maintained {
    /// The maintenance report, when the policy ran.
    pub fn report(&self) -> Option<&CompactReport> {
        match self {
            Maintained::Ran(report) => Some(report),
            _ => None,
        }
    }
}

/// The table's maintenance policy after a load: [`Maintained::NotClustered`] for a table
/// without a clustering key; otherwise [`maintain_retrying`]. Two loads that end at once may
/// pick the same merge: the one that loses plans again from the newest version.
pub async fn maintain_after_load(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
    retries: usize,
) -> Result<Maintained, CompactError> {
    match maintain_retrying(store, table, opts, retries).await {
        Ok(report) => Ok(Maintained::Ran(Box::new(report))),
        Err(CompactError::NotClustered(_)) => Ok(Maintained::NotClustered),
        Err(e) => Err(e),
    }
}

/// [`maintain`], planned again from the newest version after a conflict (however deeply
/// wrapped: [`CompactError::is_conflict`]), up to `retries` times.
pub async fn maintain_retrying(
    store: &Store,
    table: &str,
    opts: &CompactOptions,
    retries: usize,
) -> Result<CompactReport, CompactError> {
    let mut tries = 0;
    loop {
        match maintain(store, table, opts).await {
            Err(e) if e.is_conflict() && tries < retries => {
                tracing::info!(error = %ravel_store::ErrorChain::new(&e), table, "another writer changed the table; planning again");
                tries += 1;
            }
            other => return other,
        }
    }
}
