//! What a load reports and what it hands over unpublished.

use serde::Serialize;

use super::*;

/// Seconds spent per stage, and the bytes a stage kept in local files.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StageTimes {
    /// Waiting for input (measured by the caller's source; see [`Loader::add_read_time`]).
    pub read_s: f64,
    /// Computing the clustering order of the buffered rows (normalized keys, parallel sort).
    pub sort_s: f64,
    /// Taking every column of the buffered rows in that order (the sorted run's copy).
    pub gather_s: f64,
    /// Includes `blooms_s`.
    pub encode_s: f64,
    /// Collecting each object's Bloom filters for the sidecar (part of `encode_s`).
    pub blooms_s: f64,
    pub upload_s: f64,
    pub commit_s: f64,
    /// Bytes written to local files and read back (never to the store): a load by columns'
    /// encoded pages.
    pub local_spill_bytes: u64,
}

impl StageTimes {
    /// Adds `other`'s times to these (several loads of one job).
    pub fn add(&mut self, other: &StageTimes) {
        self.read_s += other.read_s;
        self.sort_s += other.sort_s;
        self.gather_s += other.gather_s;
        self.encode_s += other.encode_s;
        self.blooms_s += other.blooms_s;
        self.upload_s += other.upload_s;
        self.commit_s += other.commit_s;
        self.local_spill_bytes += other.local_spill_bytes;
    }

    /// Adds what encoding a run took.
    pub(super) fn add_run(&mut self, run: &EncodedRun) {
        self.read_s += run.read_s;
        self.local_spill_bytes += run.local_spill_bytes;
        self.sort_s += run.sort_s;
        self.gather_s += run.gather_s;
        self.encode_s += run.encode_s;
        self.blooms_s += run.blooms_s;
    }
}

/// What a load did.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub table: String,
    pub load_id: String,
    /// The load found its inputs, or an identical load's objects, published already (a rerun)
    /// and published nothing; `load_id` and `version` name the load and version that did.
    pub already_published: bool,
    /// The version that published the load's rows (`None` when it was only prepared).
    pub version: Option<u64>,
    pub layout: Layout,
    pub options: LoadOptions,
    pub flush_trigger_bytes: u64,
    pub rows: u64,
    pub runs: u64,
    pub stored_bytes: u64,
    pub objects: Vec<ObjectEntry>,
    pub stages: StageTimes,
    pub peak_budget_bytes: u64,
    pub wall_s: f64,
    /// Why Delta Lake readers get no view of the table: the columns with no Delta type (see
    /// [`ravel_log::no_delta_view`]). The load is published all the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_delta_view: Option<String>,
}

/// A load's stored objects and manifest, not committed (see [`Loader::prepare`]).
pub struct Prepared {
    pub manifest: Manifest,
    pub report: LoadReport,
    /// What the load consumes (see [`Loader::consume`]): the version that publishes its rows
    /// records it.
    pub consumed: ravel_log::Consumed,
    /// What the objects are named by besides their bytes (see [`Loader::consume`]); a merge
    /// that publishes the load's rows names its objects the same way
    /// ([`Loader::set_object_salt`]).
    pub object_salt: Option<String>,
    pub(super) lease: Option<ravel_store::HeldLease>,
}

impl Prepared {
    /// Gives up the lease that kept `gc` off the objects: after their commit, or when the
    /// caller abandons them (then they are orphans `gc` collects).
    pub async fn release(mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release().await;
        }
    }
}
