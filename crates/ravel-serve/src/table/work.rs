//! A table's work: loading a batch, maintaining, collecting garbage, and how a failure of each
//! is recorded.

use std::time::{Instant, SystemTime};

use ravel_compact::{CompactError, CompactReport};
use ravel_ingest::IngestError;
use ravel_loader::{Files, LoadError};
use ravel_log::LogError;

use super::{Kind, Planned, Table, Work, format_chain, unchanged};
use crate::landing::{Landed, format_of};
use crate::status::FailedFile;

impl Table {
    /// Loads the next batch (the ingestion call, maintenance apart: the service schedules it).
    pub async fn load_batch(&mut self, work: &Work<'_>) {
        let batch = self.next_batch();
        if batch.is_empty() {
            return;
        }
        let started = Instant::now();
        let outcome = self.ingest(work, &batch).await;
        match outcome {
            Ok(report) => self.loaded(work, &batch, &report, started),
            Err(e) => self.load_failed(work, &batch, &e),
        }
        // The batch's files are consumed now, or failed, or wait for the next poll.
        self.pending.clear();
        if let Err(e) = self.read_log().await {
            self.failed_with(work, Kind::Poll, format_chain(&e));
        }
        self.plan_maintenance(work).await;
        self.refresh_status();
    }

    async fn ingest(
        &self,
        work: &Work<'_>,
        batch: &[Landed],
    ) -> Result<ravel_ingest::IngestReport, BatchFailure> {
        let o = self.opened();
        // A file that changed since it was listed waits until a listing finds it still.
        if let Some(i) = batch.iter().position(|f| !unchanged(f)) {
            return Err(BatchFailure {
                file: Some(i),
                ..BatchFailure::whole("changed since it was listed".into())
            });
        }
        let scratch = tempfile::tempdir().map_err(|e| BatchFailure::whole(e.into()))?;
        let paths = o
            .landing
            .local_paths(batch, scratch.path())
            .await
            .map_err(|e| BatchFailure::whole(e.into()))?;
        let files = Files {
            paths: &paths,
            format: format_of(&batch[0].identity.name),
            tsv: work.tsv.clone(),
            reload: false,
            identities: Some(batch.iter().map(|f| f.identity.clone()).collect()),
        };
        let opts = work.ingest.clone().maintain(false);
        let report = ravel_ingest::ingest(&o.store, &self.cfg.name, &files, &opts, |_, _| {}).await;
        report.map_err(|e| BatchFailure::of_load(e, &paths))
    }

    fn loaded(
        &mut self,
        work: &Work<'_>,
        batch: &[Landed],
        report: &ravel_ingest::IngestReport,
        started: Instant,
    ) {
        let now = SystemTime::now();
        tracing::info!(table = %self.cfg.name, files = batch.len(), rows = report.rows, version = ?report.version, already_published = report.already_published, wall_s = started.elapsed().as_secs_f64(), "loaded a batch");
        if !report.already_published {
            self.status.loads += 1;
            self.last_load = Some(now);
            work.metrics.loaded(&self.cfg.name, batch, report.rows, now);
        }
        self.errors.clear(Kind::Load);
        self.load_retry.succeeded();
        self.isolate = false;
    }

    fn load_failed(&mut self, work: &Work<'_>, batch: &[Landed], failure: &BatchFailure) {
        let error = format_chain(&*failure.error);
        if let Some(f) = failure.file.map(|i| &batch[i]) {
            // A file that changed or went while it was read is taken again once it is still.
            match unchanged(f) {
                true => self.file_failed(work, f, error),
                false => {
                    tracing::info!(table = %self.cfg.name, file = %f.identity.name, %error, "a landed file changed while it was read: nothing of it is published; taken again once it is still")
                }
            }
            return;
        }
        if failure.partly_consumed {
            // Another writer loaded some of these files meanwhile: the next poll leaves them out.
            tracing::info!(table = %self.cfg.name, %error, "another writer loaded part of the batch; cutting it again");
            return;
        }
        match (batch, failure.invalid_input) {
            // The one file of the batch is at fault.
            ([f], true) => return self.file_failed(work, f, error),
            ([_], false) => {}
            (_, invalid) => {
                tracing::info!(table = %self.cfg.name, files = batch.len(), %error, "a batch failed naming no file: loading its files one at a time");
                self.isolate = true;
                if invalid {
                    return;
                }
            }
        }
        self.load_retry.failed();
        self.failed_with(work, Kind::Load, error);
    }

    /// Leaves `f` out of every batch until it changes, with its error in the status.
    fn file_failed(&mut self, work: &Work<'_>, f: &Landed, error: String) {
        tracing::warn!(table = %self.cfg.name, file = %f.identity.name, %error, "a landed file cannot be loaded: left out until it changes");
        self.failed.insert(
            f.identity.app_id(),
            FailedFile {
                name: f.identity.name.clone(),
                size: f.identity.size,
                error,
            },
        );
        work.metrics.failed(&self.cfg.name);
        self.status.failures += 1;
    }

    /// Applies the maintenance policy (planned again after conflicts).
    pub async fn maintain(&mut self, work: &Work<'_>) {
        let o = self.opened();
        // One merge step a turn: loads, and other tables' merges, come between two steps.
        let mut opts = work.ingest.compact_options();
        opts.max_steps = Some(1);
        let done = ravel_ingest::maintain_retrying(
            &o.store,
            &self.cfg.name,
            &opts,
            work.ingest.conflict_retries,
        )
        .await;
        self.last_maintained = Some(Instant::now());
        match done {
            Ok(r) => {
                tracing::info!(table = %self.cfg.name, steps = r.steps, reason = %r.reason, depth_before = r.depth_before, depth_after = r.depth_after, written_bytes = r.written_bytes, "maintained");
                self.status.merges += r.steps as u64;
                work.metrics
                    .merged(&self.cfg.name, r.steps as u64, r.written_bytes);
                self.errors.clear(Kind::Merge);
                // A plan that merged nothing would be planned again at once: wait as after a
                // failure.
                match r.steps {
                    0 => self.merge_retry.failed(),
                    _ => self.merge_retry.succeeded(),
                }
            }
            Err(e) => {
                self.merge_retry.failed();
                self.failed_with(work, Kind::Merge, format_chain(&e));
            }
        }
        if let Err(e) = self.read_log().await {
            self.failed_with(work, Kind::Poll, format_chain(&e));
        }
        self.plan_maintenance(work).await;
        self.refresh_status();
    }

    /// Plans the policy's next step on the newest version with a dry run (nothing written).
    pub(super) async fn plan_maintenance(&mut self, work: &Work<'_>) {
        let Some(o) = &self.opened else {
            return;
        };
        if o.snapshot.as_ref().is_none_or(|s| s.version.is_none()) {
            self.maintenance = None;
            return;
        }
        let mut opts = work.ingest.compact_options();
        opts.dry_run = true;
        self.maintenance = match ravel_compact::maintain(&o.store, &self.cfg.name, &opts).await {
            Ok(r) => Some(planned(&r)),
            Err(CompactError::NotClustered(_)) => Some(Planned {
                merge: false,
                reason: "the table has no clustering key: its objects keep arrival order".into(),
                depth: 0,
                bound: None,
            }),
            Err(e) => {
                let error = format!("planning maintenance: {}", format_chain(&e));
                self.failed_with(work, Kind::Merge, error);
                None
            }
        };
        if let Some(p) = &self.maintenance {
            self.status.depth = p.depth;
            self.status.depth_bound = p.bound;
        }
    }

    /// Runs `gc` when its interval has passed since the last run (the first run one interval
    /// after the service started).
    pub async fn gc_if_due(&mut self, work: &Work<'_>) {
        let (Some(o), false) = (&self.opened, self.cfg.gc_interval.is_zero()) else {
            return;
        };
        let now = Instant::now();
        let due = *self.next_gc.get_or_insert(now + self.cfg.gc_interval);
        if now < due {
            return;
        }
        self.next_gc = Some(now + self.cfg.gc_interval);
        let retention = match self.cfg.gc_retention {
            Some(r) => Ok(r),
            None => files_retention(&o.store, &self.cfg.name).await,
        };
        let done = match retention {
            Ok(r) => ravel_gc::gc(
                &o.store,
                &self.cfg.name,
                &ravel_gc::GcOptions::new(r, false),
            )
            .await
            .map_err(|e| format_chain(&e)),
            Err(e) => Err(format_chain(&e)),
        };
        match done {
            Ok(r) => {
                tracing::info!(table = %self.cfg.name, deleted = r.deleted, deleted_bytes = r.deleted_bytes, log_deleted = r.log.deleted, log_deleted_bytes = r.log.deleted_bytes, blocked_by = r.blocked_by.len(), "gc")
            }
            Err(e) => self.failed_with(work, Kind::Gc, format!("gc: {e}")),
        }
    }

    pub(super) fn failed_with(&mut self, work: &Work<'_>, kind: Kind, error: String) {
        tracing::warn!(table = %self.cfg.name, ?kind, %error, "failed");
        self.status.failures += 1;
        self.errors.set(kind, error);
        work.metrics.failed(&self.cfg.name);
    }
}

/// The table's files retention (its layout's), `gc`'s retention unless the configuration
/// sets one.
async fn files_retention(
    store: &ravel_store::Store,
    table: &str,
) -> Result<std::time::Duration, ravel_layout::LayoutError> {
    let layout = ravel_layout::LayoutStore::new(store, table)?.load().await?;
    Ok(std::time::Duration::from_secs(layout.retention.files_s))
}

/// Why a batch failed, and the file it failed on when one file did.
struct BatchFailure {
    error: Box<dyn std::error::Error + Send + Sync>,
    /// The index in the batch of the file the error is about.
    file: Option<usize>,
    /// Another writer consumed some of the batch's files first.
    partly_consumed: bool,
    /// The inputs are at fault (not the store or the process): trying again will not help.
    invalid_input: bool,
}

impl BatchFailure {
    fn whole(error: Box<dyn std::error::Error + Send + Sync>) -> BatchFailure {
        BatchFailure {
            error,
            file: None,
            partly_consumed: false,
            invalid_input: false,
        }
    }

    /// `e` from a load of `paths` (the batch's files, or their local copies).
    fn of_load(e: IngestError, paths: &[std::path::PathBuf]) -> BatchFailure {
        let file = e
            .failed_input()
            .and_then(|input| paths.iter().position(|p| p.display().to_string() == input));
        let partly_consumed = is_partly_consumed(&e);
        let invalid_input = e.is_invalid_input();
        BatchFailure {
            error: Box::new(e),
            file,
            partly_consumed,
            invalid_input,
        }
    }
}

/// Whether the load refused because a version consumed some of its inputs already (however
/// the error is wrapped).
fn is_partly_consumed(e: &IngestError) -> bool {
    match e {
        IngestError::Load(c) | IngestError::TakeIn(c) => compact_partly_consumed(c),
        _ => false,
    }
}

fn compact_partly_consumed(e: &CompactError) -> bool {
    match e {
        CompactError::Log(l) => matches!(l, LogError::PartlyConsumed { .. }),
        CompactError::Load(l) => load_partly_consumed(l),
        _ => false,
    }
}

fn load_partly_consumed(e: &LoadError) -> bool {
    match e {
        LoadError::Log(l) => matches!(l, LogError::PartlyConsumed { .. }),
        LoadError::Failed { source, .. } => load_partly_consumed(source),
        _ => false,
    }
}

fn planned(r: &CompactReport) -> Planned {
    Planned {
        merge: r.input_objects > 0,
        reason: r.reason.clone(),
        depth: r.depth_before,
        bound: r.depth_bound,
    }
}
