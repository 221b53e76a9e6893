//! Load options: the tier's geometry, every field overridable.

use std::time::Duration;

use ravel_tier::Tier;
use serde::Serialize;

/// How a load is shaped. Defaults come from the machine's tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadOptions {
    /// Target stored size of one object; an object closes when the writer's encoded-size
    /// estimate reaches it.
    pub object_bytes: u64,
    /// Buffered bytes that trigger a run; `None` derives it from the budget (see
    /// [`LoadOptions::flush_trigger`]).
    pub target_bytes: Option<u64>,
    /// Objects being encoded or uploaded at once, at most.
    pub pipeline_depth: usize,
    /// Bytes the loader may hold at once: buffered batches, the sorted run, encoded objects
    /// awaiting upload.
    pub load_budget: u64,
    /// A buffer whose oldest row is this old is flushed on the next push.
    #[serde(serialize_with = "secs")]
    pub max_flush_delay: Duration,
    /// zstd level of the objects.
    pub zstd_level: i32,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl LoadOptions {
    /// The tier's geometry, zstd level 3.
    pub fn from_tier(tier: &Tier) -> LoadOptions {
        LoadOptions {
            object_bytes: tier.object_bytes,
            target_bytes: None,
            pipeline_depth: tier.pipeline_depth,
            load_budget: tier.load_budget,
            max_flush_delay: tier.max_flush_delay,
            zstd_level: 3,
        }
    }

    /// Bytes of encoded objects the pipeline may hold: the `pipeline_depth` uploads plus the
    /// object waiting for an upload slot and the one being encoded, but at most a quarter of
    /// the budget.
    pub fn in_flight_bytes(&self) -> u64 {
        (self.pipeline_depth as u64 + 2)
            .saturating_mul(self.object_bytes)
            .min(self.load_budget / 4)
    }

    /// What a buffered batch costs the budget: its memory plus the sort's scratch space for
    /// its rows ([`SORT_SCRATCH_PER_ROW`]).
    pub fn batch_cost(batch_bytes: u64, rows: u64) -> u64 {
        batch_bytes + rows * SORT_SCRATCH_PER_ROW
    }

    /// The buffered cost ([`LoadOptions::batch_cost`]) that triggers a run. Unless set: half
    /// of what the budget leaves after the objects in flight. A run is gathered into its sorted
    /// order column by column, each source column released as its copy is made, but the
    /// allocator does not reliably hand the freed batch buffers to the larger sorted columns:
    /// with the whole remainder as trigger, 20M hits rows under a 2 GB budget peaked at 3.2 GB
    /// RSS. Half keeps the buffer and a full sorted copy within the budget.
    pub fn flush_trigger(&self) -> u64 {
        self.target_bytes
            .unwrap_or((self.load_budget - self.in_flight_bytes()) / 2)
            .max(1)
    }
}

/// Sort scratch per buffered row, charged to the budget with the row: the normalized key and
/// its sort entries (hits' key is five words: about 90 bytes a row at the peak) and the
/// `(batch, row)` order (16 bytes).
pub const SORT_SCRATCH_PER_ROW: u64 = 128;
