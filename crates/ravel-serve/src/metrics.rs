//! The figures `/metrics` serves, in the Prometheus text format (prometheus-client), labelled
//! by table. Gauges are set from each table's status before every scrape; counters and the
//! latency histogram count as the work happens.

use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::landing::Landed;
use crate::status::TableStatus;

/// The label every series carries.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabel {
    pub table: String,
}

type IntGauges = Family<TableLabel, Gauge>;
type FloatGauges = Family<TableLabel, Gauge<f64, AtomicU64>>;
type Counters = Family<TableLabel, Counter>;

/// Upper bounds, seconds, of the landing-to-visible latency histogram's buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 75.0, 90.0, 120.0, 180.0, 300.0, 600.0,
];

/// Every series the service exports.
pub struct Metrics {
    registry: Registry,
    rows: IntGauges,
    objects: IntGauges,
    stored_bytes: IntGauges,
    depth: IntGauges,
    depth_bound: IntGauges,
    write_amplification: FloatGauges,
    pending_files: IntGauges,
    pending_bytes: IntGauges,
    since_last_load: FloatGauges,
    loads: Counters,
    files_loaded: Counters,
    rows_loaded: Counters,
    merges: Counters,
    merge_written_bytes: Counters,
    failures: Counters,
    latency: Family<TableLabel, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let latency = Family::<TableLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(LATENCY_BUCKETS)
        });
        let mut m = Metrics {
            rows: IntGauges::default(),
            objects: IntGauges::default(),
            stored_bytes: IntGauges::default(),
            depth: IntGauges::default(),
            depth_bound: IntGauges::default(),
            write_amplification: FloatGauges::default(),
            pending_files: IntGauges::default(),
            pending_bytes: IntGauges::default(),
            since_last_load: FloatGauges::default(),
            loads: Counters::default(),
            files_loaded: Counters::default(),
            rows_loaded: Counters::default(),
            merges: Counters::default(),
            merge_written_bytes: Counters::default(),
            failures: Counters::default(),
            latency,
            registry: Registry::default(),
        };
        let mut registry = Registry::with_prefix("ravel");
        m.register(&mut registry);
        m.registry = registry;
        m
    }

    fn register(&self, r: &mut Registry) {
        self.register_gauges(r);
        self.register_counters(r);
    }

    /// The figures of each table's newest version and landing prefix.
    fn register_gauges(&self, r: &mut Registry) {
        r.register(
            "table_rows",
            "Rows in the table's newest version",
            self.rows.clone(),
        );
        r.register(
            "table_objects",
            "Objects in the table's newest version",
            self.objects.clone(),
        );
        r.register(
            "table_stored_bytes",
            "Bytes of the newest version's objects",
            self.stored_bytes.clone(),
        );
        r.register(
            "table_depth",
            "Deepest overlap of the table's objects",
            self.depth.clone(),
        );
        r.register(
            "table_depth_bound",
            "Deepest overlap the maintenance policy allows (-1: no bound)",
            self.depth_bound.clone(),
        );
        r.register(
            "table_write_amplification",
            "Bytes merges wrote over bytes loads published since the table was last one sequence",
            self.write_amplification.clone(),
        );
        r.register(
            "pending_files",
            "Landed files no version consumed yet",
            self.pending_files.clone(),
        );
        r.register(
            "pending_bytes",
            "Bytes of the pending landed files",
            self.pending_bytes.clone(),
        );
        r.register(
            "seconds_since_last_load",
            "Seconds since this process last published a load (-1: none yet)",
            self.since_last_load.clone(),
        );
    }

    /// What the service did, counted since it started.
    fn register_counters(&self, r: &mut Registry) {
        r.register("loads", "Batches published", self.loads.clone());
        r.register(
            "files_loaded",
            "Landed files published",
            self.files_loaded.clone(),
        );
        r.register(
            "rows_loaded",
            "Rows published by loads",
            self.rows_loaded.clone(),
        );
        r.register("merges", "Maintenance steps committed", self.merges.clone());
        r.register(
            "merge_written_bytes",
            "Bytes maintenance merges wrote",
            self.merge_written_bytes.clone(),
        );
        r.register(
            "failures",
            "Failed polls, loads, merges and gc runs, and files that failed",
            self.failures.clone(),
        );
        r.register(
            "landing_to_visible_seconds",
            "From a file's landing (its modification time) to the version that publishes it",
            self.latency.clone(),
        );
    }

    fn label(table: &str) -> TableLabel {
        TableLabel {
            table: table.to_string(),
        }
    }

    /// A batch of `files` published, `rows` rows, at `visible`.
    pub fn loaded(&self, table: &str, files: &[Landed], rows: u64, visible: SystemTime) {
        let l = Metrics::label(table);
        self.loads.get_or_create(&l).inc();
        self.files_loaded
            .get_or_create(&l)
            .inc_by(files.len() as u64);
        self.rows_loaded.get_or_create(&l).inc_by(rows);
        let h = self.latency.get_or_create(&l);
        for f in files {
            let secs = visible.duration_since(f.landed).unwrap_or_default();
            h.observe(secs.as_secs_f64());
        }
    }

    pub fn merged(&self, table: &str, steps: u64, written_bytes: u64) {
        let l = Metrics::label(table);
        self.merges.get_or_create(&l).inc_by(steps);
        self.merge_written_bytes
            .get_or_create(&l)
            .inc_by(written_bytes);
    }

    pub fn failed(&self, table: &str) {
        self.failures.get_or_create(&Metrics::label(table)).inc();
    }

    /// Sets the gauges from the tables' statuses. A table not polled yet (a service just
    /// started) has its counters, at 0, and no gauges, rather than zeros a scraper would take
    /// for an empty table.
    pub fn set(&self, tables: &[TableStatus]) {
        for t in tables {
            let l = Metrics::label(&t.name);
            let counters = [
                &self.loads,
                &self.merges,
                &self.failures,
                &self.files_loaded,
                &self.rows_loaded,
                &self.merge_written_bytes,
            ];
            for c in counters {
                let _ = c.get_or_create(&l);
            }
            if t.polled {
                self.set_gauges(&l, t);
            }
        }
    }

    fn set_gauges(&self, l: &TableLabel, t: &TableStatus) {
        let int = |g: &IntGauges, v: u64| {
            g.get_or_create(l).set(i64::try_from(v).unwrap_or(i64::MAX));
        };
        int(&self.rows, t.rows);
        int(&self.objects, t.objects as u64);
        int(&self.stored_bytes, t.stored_bytes);
        int(&self.depth, t.depth as u64);
        self.depth_bound
            .get_or_create(l)
            .set(t.depth_bound.map_or(-1, |b| b as i64));
        self.write_amplification
            .get_or_create(l)
            .set(t.write_amplification);
        int(&self.pending_files, t.pending_files as u64);
        int(&self.pending_bytes, t.pending_bytes);
        self.since_last_load
            .get_or_create(l)
            .set(t.seconds_since_last_load.unwrap_or(-1.0));
    }

    /// The text exposition of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
