//! One table the service keeps: its landing prefix, what of it is pending, its log as last
//! read, its figures. The service loop decides which table works next; a table does the work.

mod failures;
mod work;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use ravel_ingest::IngestOptions;
use ravel_loader::InputFile;
use ravel_log::{LogError, Snapshot, TableLog};
use ravel_store::{Store, TablePaths};

use self::failures::{Backoff, Standing};
use crate::config::TableConfig;
use crate::landing::{Landed, Landing, format_of};
use crate::metrics::Metrics;
use crate::status::{Decision, FailedFile, ReplacedFile, TableStatus};

/// A table, its landing prefix and what the service knows of both.
pub struct Table {
    pub cfg: TableConfig,
    opened: Option<Opened>,
    pending: Vec<Landed>,
    /// Files seen changing (or first seen) at the last listing, younger than the settle time:
    /// taken once a listing finds them as the one before did.
    settling: Vec<Landed>,
    /// Each file's identity at the last listing, by name.
    last_listed: BTreeMap<String, InputFile>,
    /// The last listing's entries that are not files to read, and its files the pattern left out.
    skipped: Vec<crate::landing::Skipped>,
    unmatched: usize,
    /// A batch failed naming no file: batches of one file until one loads, so the file at
    /// fault fails alone.
    isolate: bool,
    /// Files that failed, by `appId`: left out until their content changes.
    failed: BTreeMap<String, FailedFile>,
    replaced: BTreeMap<String, ReplacedFile>,
    /// Files the inputs window may have forgotten a load of, at the last listing.
    beyond_window: usize,
    pub status: TableStatus,
    /// The maintenance policy's next step on the newest version, as a dry run planned it.
    maintenance: Option<Planned>,
    last_load: Option<SystemTime>,
    pub last_maintained: Option<Instant>,
    next_gc: Option<Instant>,
    /// Every pending file makes a batch, whatever the batching (`serve --once`).
    drain: bool,
    /// After a load that failed as a whole (the store, the table): no batch before it allows.
    load_retry: Backoff,
    /// After a maintenance that failed: no merge before it allows.
    merge_retry: Backoff,
    errors: Standing,
}

/// What failed: a standing error of one kind is cleared when a step of that kind succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Poll,
    Load,
    Merge,
    Gc,
}

/// The store and logs once they opened.
struct Opened {
    store: Store,
    landing: Landing,
    /// With `cursor_lookback`: where listings start.
    cursor: Option<crate::cursor::Cursor>,
    log: TableLog,
    snapshot: Option<Snapshot>,
    /// When the log was last looked at.
    log_checked: Option<Instant>,
}

/// A dry run's plan of the next maintenance step.
#[derive(Debug, Clone)]
pub struct Planned {
    pub merge: bool,
    pub reason: String,
    pub depth: usize,
    pub bound: Option<usize>,
}

impl Planned {
    /// How far the table is over its depth bound (0 within it).
    pub fn over_bound(&self) -> usize {
        self.depth.saturating_sub(self.bound.unwrap_or(usize::MAX))
    }
}

/// What the service asks of a table's work.
pub struct Work<'a> {
    pub ingest: &'a IngestOptions,
    pub tsv: &'a ravel_loader::TsvOptions,
    pub metrics: &'a Metrics,
    /// Shadow mode: nothing is written, moved or deleted.
    pub dry_run: bool,
}

impl Table {
    /// The table `cfg` configures; with `drain`, every pending file makes a batch.
    pub fn new(cfg: TableConfig, drain: bool) -> Table {
        let status = TableStatus {
            name: cfg.name.clone(),
            store: cfg.store.clone(),
            landing: cfg.landing.clone(),
            next: Decision::new("wait", "not polled yet"),
            ..TableStatus::default()
        };
        Table {
            cfg,
            opened: None,
            pending: Vec::new(),
            settling: Vec::new(),
            last_listed: BTreeMap::new(),
            skipped: Vec::new(),
            unmatched: 0,
            isolate: false,
            failed: BTreeMap::new(),
            replaced: BTreeMap::new(),
            beyond_window: 0,
            status,
            maintenance: None,
            last_load: None,
            last_maintained: None,
            next_gc: None,
            drain,
            load_retry: Backoff::new(),
            merge_retry: Backoff::new(),
            errors: Standing::default(),
        }
    }

    /// Looks at the log (one HEAD, unless a version was committed) and the landing prefix
    /// (one listing), and works out what is pending. A failure is reported in the status.
    pub async fn poll(&mut self, work: &Work<'_>) {
        match self.try_poll(work).await {
            Ok(()) => self.errors.clear(Kind::Poll),
            Err(e) => self.failed_with(work, Kind::Poll, format_chain(&*e)),
        }
        self.refresh_status();
    }

    /// Brings the status's figures and next decision up to date.
    pub fn refresh_status(&mut self) {
        let next = self.next_decision(SystemTime::now());
        let s = &mut self.status;
        let snapshot = self.opened.as_ref().and_then(|o| o.snapshot.as_ref());
        // The figures change with the version only (rows are read from each object's stats).
        if let Some(snapshot) = snapshot.filter(|n| n.version != s.version || s.version.is_none()) {
            s.version = snapshot.version;
            s.objects = snapshot.files().len();
            s.stored_bytes = snapshot.files().values().map(|a| a.size).sum();
            s.rows = snapshot.files().values().map(rows_of).sum();
            s.write_amplification = snapshot
                .totals
                .as_ref()
                .map_or(0.0, |t| t.write_amplification());
        }
        s.polled = snapshot.is_some();
        s.last_error = self.errors.last();
        s.pending_files = self.pending.len();
        s.pending_bytes = self.pending.iter().map(|f| f.identity.size).sum();
        s.last_load_at = self.last_load.map(unix_secs);
        s.settling_files = self.settling.len();
        s.cursor = (self.opened.as_ref()).and_then(|o| o.cursor.as_ref()?.stored.after.clone());
        s.unmatched_files = self.unmatched;
        s.beyond_window_files = self.beyond_window;
        s.skipped_files = self.skipped.clone();
        s.failed_files = self.failed.values().cloned().collect();
        s.replaced_files = self.replaced.values().cloned().collect();
        s.next = next;
    }

    /// What the service does next on this table, and why.
    fn next_decision(&self, now: SystemTime) -> Decision {
        if self.opened.is_none() {
            let why = self.errors.last().unwrap_or_default();
            return Decision::new("wait", format!("the table cannot be opened: {why}"));
        }
        if let Some(oldest) = self.pending.first() {
            return self.batch_decision(now, oldest);
        }
        if !self.settling.is_empty() {
            return Decision::new(
                "wait",
                format!(
                    "{} file(s) changed since the last listing or landed less than {} s ago: taken once a listing finds them unchanged",
                    self.settling.len(),
                    self.cfg.settle.as_secs_f64()
                ),
            );
        }
        match &self.maintenance {
            Some(p) if p.merge => Decision::new("merge", p.reason.clone()),
            Some(p) => {
                let depth = match p.bound {
                    Some(b) => format!("depth {} within bound {b}", p.depth),
                    None => format!("depth {}, no bound", p.depth),
                };
                let said = format!("depth {}: ", p.depth);
                let why = p.reason.strip_prefix(&said).unwrap_or(&p.reason);
                let note = self.unmatched_note();
                Decision::new("nothing", format!("{depth}: {why}{note}"))
            }
            None => Decision::new(
                "nothing",
                format!(
                    "the table has no versions yet; no file is pending{}",
                    self.unmatched_note()
                ),
            ),
        }
    }

    /// Says how many landed files the pattern leaves out, when it leaves out any and matches
    /// none.
    fn unmatched_note(&self) -> String {
        match (self.unmatched, self.last_listed.is_empty()) {
            (0, _) | (_, false) => String::new(),
            (n, true) => format!(
                " ({n} file(s) in the landing prefix, none matching the pattern {:?})",
                self.cfg.pattern
            ),
        }
    }

    fn batch_decision(&self, now: SystemTime, oldest: &Landed) -> Decision {
        let (files, bytes) = (self.pending.len(), self.pending_bytes());
        let waited = age(now, oldest.landed).as_secs_f64();
        if bytes >= self.cfg.batch_bytes {
            return Decision::new(
                "load",
                format!(
                    "{files} file(s), {bytes} bytes pending: the batch size {} is reached",
                    self.cfg.batch_bytes
                ),
            );
        }
        if let Some(left) = self.load_retry.left() {
            let after = left.as_secs_f64();
            return Decision::new(
                "wait",
                format!(
                    "{files} file(s), {bytes} bytes pending: the last load failed; trying again in {after:.0} s"
                ),
            );
        }
        if self.drain {
            return Decision::new(
                "load",
                format!("{files} file(s), {bytes} bytes pending: --once loads every pending file"),
            );
        }
        let limit = self.cfg.batch_age.as_secs_f64();
        if waited >= limit {
            return Decision::new(
                "load",
                format!(
                    "{files} file(s), {bytes} bytes pending: the oldest waited {waited:.0} s, the batch age is {limit:.0} s"
                ),
            );
        }
        Decision::new(
            "wait",
            format!(
                "{files} file(s), {bytes} bytes pending: a batch at {} bytes or in {:.0} s, when the oldest is {limit:.0} s old",
                self.cfg.batch_bytes,
                limit - waited
            ),
        )
    }

    async fn try_poll(
        &mut self,
        work: &Work<'_>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if self.opened.is_none() {
            self.opened = Some(self.open().await?);
        }
        let changed = self.read_log().await?;
        if changed || self.maintenance.is_none() {
            self.plan_maintenance(work).await;
        }
        let o = self.opened();
        let after = o.cursor.as_ref().and_then(|c| c.stored.after.clone());
        let listing = o.landing.list(after.as_deref()).await?;
        self.skipped = listing.skipped;
        self.unmatched = listing.unmatched;
        let listed = listing.files;
        let still = self.still(listed.clone());
        let consumed = self.sort_landed(work, still);
        if !work.dry_run {
            self.after_load(consumed).await?;
            self.advance_cursor(&listed).await?;
        }
        Ok(())
    }

    /// Moves the landing cursor past the leading listed keys versions consumed longer than
    /// the lookback ago.
    async fn advance_cursor(
        &mut self,
        listed: &[Landed],
    ) -> Result<(), crate::cursor::CursorError> {
        let Some(lookback) = self.cfg.cursor_lookback else {
            return Ok(());
        };
        let o = self.opened.as_mut().expect("opened");
        let (Some(cursor), Some(snapshot)) = (o.cursor.as_mut(), o.snapshot.as_ref()) else {
            return Ok(());
        };
        cursor.advance(&o.store, listed, snapshot, lookback).await?;
        Ok(())
    }

    async fn open(&self) -> Result<Opened, Box<dyn std::error::Error + Send + Sync>> {
        let store = Store::open(&self.cfg.store)?;
        let layout = ravel_layout::LayoutStore::new(&store, &self.cfg.name)?
            .load()
            .await?;
        if layout.generation == 0 {
            return Err(format!(
                "table {:?} has no layout yet: set one (`ravel-load layout set --table {} …`) before the service loads it",
                self.cfg.name, self.cfg.name
            )
            .into());
        }
        let log = TableLog::new(
            store.object_store().clone(),
            TablePaths::new(&self.cfg.name)?,
        );
        let landing = Landing::open(&self.cfg.landing, &self.cfg.pattern)?;
        let table = TablePaths::new(&self.cfg.name)?;
        let cursor = match self.cfg.cursor_lookback {
            Some(_) => Some(crate::cursor::Cursor::read(&store, &table, &self.cfg.landing).await?),
            None => None,
        };
        Ok(Opened {
            store,
            landing,
            cursor,
            log,
            snapshot: None,
            log_checked: None,
        })
    }

    fn opened(&self) -> &Opened {
        self.opened.as_ref().expect("polled after opening")
    }

    /// Reads versions committed since the last look (by this service or any other writer).
    /// Returns whether there were any.
    ///
    /// One HEAD of the next entry tells, as long as the last look is younger than half the
    /// log window: the log window cannot have cleaned an entry committed since. After a
    /// longer pause (a step that ran long, a suspended process, a window of seconds) the log
    /// is listed from the next version, and a snapshot the window left behind is read again
    /// from the checkpoint the log starts at.
    async fn read_log(&mut self) -> Result<bool, LogError> {
        let o = self.opened.as_mut().expect("opened");
        let last = o.log_checked.replace(Instant::now());
        let Some(s) = &mut o.snapshot else {
            o.snapshot = Some(o.log.latest().await?);
            return Ok(true);
        };
        let half_window = ravel_log::log_window_ms(s.metadata.as_ref()) / 2;
        let recent = last.is_some_and(|t| (t.elapsed().as_millis() as i64) < half_window);
        if recent && !o.log.entry_stored(s.next_version()).await? {
            return Ok(false);
        }
        let before = s.version;
        // A snapshot the window left behind moves with no entry of its own: it is read
        // again from the checkpoint the cleaned log starts at.
        let entries = o.log.catch_up(s).await?;
        // What a checkpoint would leave out leaves the kept snapshot too: it holds the
        // windows, not every load since the service started.
        s.forget_expired(ravel_log::now_ms());
        Ok(!entries.is_empty() || s.version != before)
    }

    /// The listed files that are still: listed as the last listing found them, or last changed
    /// longer than the settle time ago. The others wait in `settling` for the next listing.
    fn still(&mut self, listed: Vec<Landed>) -> Vec<Landed> {
        let now = SystemTime::now();
        let before = std::mem::take(&mut self.last_listed);
        self.settling.clear();
        let mut still = Vec::with_capacity(listed.len());
        for f in listed {
            self.last_listed
                .insert(f.identity.name.clone(), f.identity.clone());
            let unchanged = before.get(&f.identity.name) == Some(&f.identity);
            match unchanged || age(now, f.landed) >= self.cfg.settle {
                true => still.push(f),
                false => self.settling.push(f),
            }
        }
        still
    }

    /// Whether files wait to be found unchanged by the next listing.
    pub fn settling(&self) -> bool {
        !self.settling.is_empty()
    }

    /// Splits the listing into pending files, files consumed already, files that failed
    /// before (unchanged), and files replaced under a consumed name.
    /// Does the table's `after_load` with `consumed` (files a committed version consumed): a
    /// file a killed process left behind is dealt with at the next poll. Every file is tried;
    /// the first failure is returned.
    async fn after_load(&mut self, consumed: Vec<Landed>) -> Result<(), crate::LandingError> {
        let o = self.opened();
        let mut first = None;
        for f in &consumed {
            if let Err(e) = o.landing.dispose(f, &self.cfg.after_load).await {
                tracing::warn!(table = %self.cfg.name, error = %format_chain(&e), "after_load");
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Returns the listed files a version consumed.
    fn sort_landed(&mut self, work: &Work<'_>, listed: Vec<Landed>) -> Vec<Landed> {
        // Files gone from the landing prefix leave the failed and replaced lists.
        let ids: std::collections::BTreeSet<String> =
            listed.iter().map(|f| f.identity.app_id()).collect();
        let names: std::collections::BTreeSet<&str> =
            listed.iter().map(|f| f.identity.name.as_str()).collect();
        self.failed.retain(|id, _| ids.contains(id));
        self.replaced
            .retain(|name, _| names.contains(name.as_str()));
        let snapshot = self.opened().snapshot.as_ref().expect("read");
        let (consumed, unconsumed): (Vec<Landed>, Vec<Landed>) = listed
            .into_iter()
            .partition(|f| snapshot.consumed_by(&f.identity).is_some());
        let now = ravel_log::now_ms();
        let standing: Vec<(Landed, FileStanding)> = unconsumed
            .into_iter()
            .filter(|f| !self.failed.contains_key(&f.identity.app_id()))
            .map(|f| {
                let standing = standing(snapshot, &f, now);
                (f, standing)
            })
            .collect();
        self.pending.clear();
        let mut beyond = Vec::new();
        for (f, standing) in standing {
            match standing {
                FileStanding::New => self.pending.push(f),
                FileStanding::Replaced { version } => self.note_replaced(work, &f, version),
                FileStanding::BeyondWindow => beyond.push(f.identity.name),
            }
        }
        if beyond.len() > self.beyond_window {
            tracing::info!(table = %self.cfg.name, files = beyond.len(), first = %beyond[0], "files older than the inputs window that no remembered version consumed: not loaded");
        }
        self.beyond_window = beyond.len();
        self.pending
            .sort_by_key(|f| (f.landed, f.identity.name.clone()));
        consumed
    }

    /// A file changed under a name `version` consumed: its rows will never load (a writer
    /// changed it after its version consumed it), a failure once.
    fn note_replaced(&mut self, work: &Work<'_>, f: &Landed, version: u64) {
        if !self.replaced.contains_key(&f.identity.name) {
            self.status.failures += 1;
            work.metrics.failed(&self.cfg.name);
            tracing::warn!(table = %self.cfg.name, file = %f.identity.name, consumed_by = version, "a file replaced under a name the table consumed: not loaded again");
        }
        self.replaced.insert(
            f.identity.name.clone(),
            ReplacedFile {
                name: f.identity.name.clone(),
                size: f.identity.size,
                consumed_by: version,
            },
        );
    }

    /// Whether a batch is due: its bytes reach the batch size, its oldest file waited the
    /// batch age, or (`drain`) anything is pending at all; not while a failed load waits.
    pub fn batch_due(&self, now: SystemTime) -> bool {
        let Some(oldest) = self.pending.first() else {
            return false;
        };
        if self.load_retry.left().is_some() {
            return false;
        }
        self.drain
            || self.pending_bytes() >= self.cfg.batch_bytes
            || age(now, oldest.landed) >= self.cfg.batch_age
    }

    /// When the next batch may be due: the oldest pending file comes of batch age, and any
    /// wait after a failed load is over.
    pub fn batch_due_in(&self, now: SystemTime) -> Option<Duration> {
        let oldest = self.pending.first()?;
        let age_left = match self.drain {
            true => Duration::ZERO,
            false => self.cfg.batch_age.saturating_sub(age(now, oldest.landed)),
        };
        Some(age_left.max(self.load_retry.left().unwrap_or_default()))
    }

    fn pending_bytes(&self) -> u64 {
        self.pending.iter().map(|f| f.identity.size).sum()
    }

    /// The oldest pending file's landing time (loads go oldest first across tables).
    pub fn oldest_pending(&self) -> Option<SystemTime> {
        self.pending.first().map(|f| f.landed)
    }

    /// The pending files of the next batch: oldest first, up to the batch size (at least one),
    /// all of the oldest file's format (a pattern may take Parquet and TSV).
    fn next_batch(&self) -> Vec<Landed> {
        let mut bytes = 0;
        let mut batch: Vec<Landed> = Vec::new();
        let Some(format) = self.pending.first().map(|f| format_of(&f.identity.name)) else {
            return batch;
        };
        for f in self
            .pending
            .iter()
            .filter(|f| format_of(&f.identity.name) == format)
        {
            let full = bytes + f.identity.size > self.cfg.batch_bytes || self.isolate;
            if !batch.is_empty() && full {
                break;
            }
            bytes += f.identity.size;
            batch.push(f.clone());
        }
        batch
    }

    /// The maintenance step planned, when it merges (not while a failed one waits).
    pub fn planned_merge(&self) -> Option<&Planned> {
        if self.merge_retry.left().is_some() {
            return None;
        }
        self.maintenance.as_ref().filter(|p| p.merge)
    }
}

/// How a listed file no version consumed stands to the table.
enum FileStanding {
    /// To load.
    New,
    /// A name a version consumed with other content: the snapshot's name records say so.
    Replaced { version: u64 },
    /// Older than the inputs window, on a table older than it: a version may have loaded it
    /// and forgotten it.
    BeyondWindow,
}

fn standing(snapshot: &ravel_log::Snapshot, f: &Landed, now_ms: i64) -> FileStanding {
    if let Some(version) = snapshot.name_consumed_by(&f.identity) {
        return FileStanding::Replaced { version };
    }
    let one = ravel_loader::Consumed::once(vec![f.identity.clone()]);
    match snapshot.check_window(&one, now_ms) {
        Ok(()) => FileStanding::New,
        Err(_) => FileStanding::BeyondWindow,
    }
}

fn age(now: SystemTime, landed: SystemTime) -> Duration {
    now.duration_since(landed).unwrap_or(Duration::ZERO)
}

/// An error and its causes, each message once (see [`ravel_store::ErrorChain`]).
pub fn format_chain(e: &(dyn std::error::Error + 'static)) -> String {
    ravel_store::ErrorChain::new(e).to_string()
}

/// An object's rows, from its Delta statistics.
fn rows_of(add: &ravel_log::Add) -> u64 {
    add.stats
        .as_deref()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .and_then(|v| v["numRecords"].as_u64())
        .unwrap_or(0)
}

/// Seconds since the Unix epoch.
pub fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Whether a landed file is still what was listed: a local file with the same identity; an
/// object, always (it was read at the listed ETag).
fn unchanged(f: &Landed) -> bool {
    match &f.location {
        crate::landing::Location::Local(path) => {
            ravel_loader::input_files(std::slice::from_ref(path))
                .is_ok_and(|now| now.first() == Some(&f.identity))
        }
        crate::landing::Location::Object { .. } => true,
    }
}
