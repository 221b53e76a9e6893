//! The service's loop: poll every table each interval, then work: a merge of a table over
//! its depth bound first, then loads (the table whose oldest pending file landed first), then
//! maintenance within the bound (the table furthest over its depth bound first, ties to the
//! one maintained longest ago), then `gc` when due. One step
//! runs at a time, so the whole process stays within one budget: the tier's, which every
//! step gets in full.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use ravel_ingest::IngestOptions;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::status::TableStatus;
use crate::table::{Table, Work, unix_secs};

/// How the service runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Geometry and budget of every load and merge (the ingestion call's options; its
    /// `maintain` is ignored: the service schedules maintenance itself).
    pub ingest: IngestOptions,
    /// How TSV files are read.
    pub tsv: ravel_loader::TsvOptions,
    /// Shadow mode: poll, plan and serve every decision; write nothing.
    pub dry_run: bool,
    /// Do the pending work (every pending file, whatever the batching, and the maintenance
    /// after it), then return.
    pub once: bool,
    /// How long a step in progress may run on after a shutdown is asked before it is
    /// abandoned (nothing of it is published then).
    pub grace: Duration,
}

impl ServeOptions {
    pub fn new(ingest: IngestOptions) -> ServeOptions {
        ServeOptions {
            ingest,
            tsv: ravel_loader::TsvOptions::default(),
            dry_run: false,
            once: false,
            grace: Duration::from_secs(25),
        }
    }
}

/// What the loop shares with the HTTP endpoints.
pub struct Shared {
    statuses: Mutex<Vec<TableStatus>>,
    metrics: Metrics,
}

impl Shared {
    /// Every table's status as last published, its age figures as of now.
    pub fn statuses(&self) -> Vec<TableStatus> {
        let now = unix_secs(SystemTime::now());
        let mut all = self.statuses.lock().expect("not poisoned").clone();
        for s in &mut all {
            s.seconds_since_last_load = s.last_load_at.map(|t| (now - t).max(0.0));
        }
        all
    }

    /// The metrics in the Prometheus text format, gauges set from the statuses.
    pub fn metrics_text(&self) -> String {
        self.metrics.set(&self.statuses());
        self.metrics.encode()
    }
}

/// The next piece of work.
enum Step {
    Load(usize),
    Maintain(usize),
}

/// The tables and the loop over them.
pub struct Service {
    tables: Vec<Table>,
    poll: Duration,
    opts: ServeOptions,
    shared: Arc<Shared>,
}

impl Service {
    pub fn new(config: Config, opts: ServeOptions) -> Service {
        let tables: Vec<Table> = (config.tables.into_iter())
            .map(|t| Table::new(t, opts.once))
            .collect();
        let shared = Arc::new(Shared {
            statuses: Mutex::new(tables.iter().map(|t| t.status.clone()).collect()),
            metrics: Metrics::new(),
        });
        Service {
            tables,
            poll: config.poll_interval,
            opts,
            shared,
        }
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Runs until `shutdown` is cancelled (or, with `once`, until no work is left). Returns
    /// the tables' last statuses.
    pub async fn run(mut self, shutdown: CancellationToken) -> Vec<TableStatus> {
        let shared = self.shared.clone();
        let opts = self.opts.clone();
        let work = Work {
            ingest: &opts.ingest,
            tsv: &opts.tsv,
            metrics: &shared.metrics,
            dry_run: opts.dry_run,
        };
        let mut next_poll = Instant::now();
        // `once` waits for files still changing no longer than the longest settle time and
        // two polls; files still changing then are reported.
        let settle = (self.tables.iter()).map(|t| t.cfg.settle).max();
        let give_up = Instant::now() + settle.unwrap_or_default() + 2 * self.poll;
        while !shutdown.is_cancelled() {
            if Instant::now() >= next_poll {
                self.poll_all(&work, &shutdown).await;
                next_poll = Instant::now() + self.poll;
            }
            match self.next_step() {
                Some(step) if !self.opts.dry_run => {
                    run_step(&mut self.tables, step, &work, &shutdown, opts.grace).await;
                    self.publish();
                    continue;
                }
                // Files still settling are taken at a later poll.
                _ if self.opts.once
                    && (!self.tables.iter().any(Table::settling) || Instant::now() > give_up) =>
                {
                    break;
                }
                _ => {}
            }
            if !self.opts.dry_run {
                self.gc_due(&work, &shutdown).await;
            }
            let wake = self.wake_in(next_poll);
            tokio::select! {
                _ = tokio::time::sleep(wake) => {}
                _ = shutdown.cancelled() => {}
            }
        }
        self.publish();
        self.shared.statuses()
    }

    /// Polls every table, each poll given up when a shutdown is asked; logs each table's
    /// next decision when it changes (in shadow mode, the decisions are the output).
    async fn poll_all(&mut self, work: &Work<'_>, shutdown: &CancellationToken) {
        for t in &mut self.tables {
            let before = t.status.next.clone();
            tokio::select! {
                _ = t.poll(work) => {}
                _ = shutdown.cancelled() => return,
            }
            let next = &t.status.next;
            if (next.action, &next.reason) != (before.action, &before.reason) {
                tracing::info!(table = %t.cfg.name, action = next.action, reason = %next.reason, dry_run = self.opts.dry_run, "decision");
            }
        }
        self.publish();
    }

    /// Runs `gc` on the tables whose interval has passed, given up when a shutdown is asked.
    async fn gc_due(&mut self, work: &Work<'_>, shutdown: &CancellationToken) {
        for t in &mut self.tables {
            tokio::select! {
                _ = t.gc_if_due(work) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }

    /// A merge of a table over its depth bound first: loads arriving faster than they are
    /// loaded would otherwise always have a batch due, and the table's depth would grow
    /// without end (its batches grow meanwhile, which loads them cheaper). Then loads: the
    /// table whose oldest due file landed first. Then maintenance within the bound. Among
    /// merges, the table furthest over its bound, ties to the one maintained longest ago.
    fn next_step(&self) -> Option<Step> {
        let now = SystemTime::now();
        let merge = (self.tables.iter().enumerate())
            .filter_map(|(i, t)| Some((i, t.planned_merge()?.over_bound(), t.last_maintained)))
            .max_by_key(|&(_, over, last)| (over, std::cmp::Reverse(last)));
        if let Some((i, over, _)) = merge
            && over > 0
        {
            return Some(Step::Maintain(i));
        }
        let load = (self.tables.iter().enumerate())
            .filter(|(_, t)| t.batch_due(now))
            .min_by_key(|(_, t)| t.oldest_pending());
        if let Some((i, _)) = load {
            return Some(Step::Load(i));
        }
        merge.map(|(i, _, _)| Step::Maintain(i))
    }

    /// How long to sleep: until the next poll, or until a pending batch comes of age (in
    /// shadow mode, which loads nothing, until the next poll).
    fn wake_in(&self, next_poll: Instant) -> Duration {
        let now = SystemTime::now();
        let poll = next_poll.saturating_duration_since(Instant::now());
        if self.opts.dry_run {
            return poll;
        }
        (self.tables.iter())
            .filter_map(|t| t.batch_due_in(now))
            .fold(poll, Duration::min)
            .max(Duration::from_millis(50))
    }

    fn publish(&mut self) {
        for t in &mut self.tables {
            t.refresh_status();
        }
        let statuses = self.tables.iter().map(|t| t.status.clone()).collect();
        *self.shared.statuses.lock().expect("not poisoned") = statuses;
    }
}

/// Runs `step`; when a shutdown is asked meanwhile, lets it run on for `grace`, then drops
/// it (a load or merge dropped before its commit publishes nothing; its objects are orphans
/// `gc` collects).
async fn run_step(
    tables: &mut [Table],
    step: Step,
    work: &Work<'_>,
    shutdown: &CancellationToken,
    grace: Duration,
) {
    let (i, what) = match step {
        Step::Load(i) => (i, "load"),
        Step::Maintain(i) => (i, "maintenance"),
    };
    let table = &mut tables[i];
    let span = tracing::info_span!("step", table = %table.cfg.name, step = what);
    let fut = async {
        match step {
            Step::Load(_) => {
                table.load_batch(work).await;
                table.poll(work).await;
            }
            Step::Maintain(_) => table.maintain(work).await,
        }
    }
    .instrument(span);
    tokio::pin!(fut);
    tokio::select! {
        _ = &mut fut => return,
        _ = shutdown.cancelled() => {}
    }
    tracing::info!(
        grace_s = grace.as_secs_f64(),
        "stopping: the step in progress may finish"
    );
    if tokio::time::timeout(grace, &mut fut).await.is_err() {
        tracing::warn!("stopping: abandoned the step in progress; nothing of it is published");
    }
}
