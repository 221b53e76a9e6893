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

/// The tiny tier's geometry (objects of ~24 MB, pipeline depth 16, a 1.2 GB budget), which
/// any machine of 3 GB or more holds; [`LoadOptions::from_tier`] with
/// [`Tier::detect`] gives the machine's own.
impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            object_bytes: 24_000_000,
            target_bytes: None,
            pipeline_depth: 16,
            load_budget: 1_200_000_000,
            max_flush_delay: Duration::from_secs(60),
            zstd_level: 3,
        }
    }
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

    /// Checks that a load can run with these options: a positive object size, pipeline depth
    /// and run trigger, a zstd level of 1 to 22, and a budget that holds at least one object.
    /// [`crate::Loader::new`] calls it; the error names the field and its value.
    pub fn validate(&self) -> Result<(), InvalidOptions> {
        let bad = |field: &'static str, value: String, reason: String| {
            Err(InvalidOptions {
                field,
                value,
                reason,
            })
        };
        if self.object_bytes == 0 {
            return bad("object_bytes", "0".into(), "must be positive".into());
        }
        if self.pipeline_depth == 0 {
            return bad("pipeline_depth", "0".into(), "must be at least 1".into());
        }
        if self.target_bytes == Some(0) {
            return bad("target_bytes", "0".into(), "must be positive".into());
        }
        if !ZSTD_LEVELS.contains(&self.zstd_level) {
            return bad(
                "zstd_level",
                self.zstd_level.to_string(),
                "zstd levels are 1 to 22".into(),
            );
        }
        if self.load_budget < self.object_bytes {
            return bad(
                "load_budget",
                self.load_budget.to_string(),
                format!(
                    "must hold at least one object of object_bytes ({})",
                    self.object_bytes
                ),
            );
        }
        Ok(())
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

/// The zstd levels an object may be compressed at.
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// A [`LoadOptions`] field a load cannot run with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("load option {field} = {value}: {reason}")]
pub struct InvalidOptions {
    /// The field, as [`LoadOptions`] names it.
    pub field: &'static str,
    pub value: String,
    pub reason: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Options a small test load runs with.
    pub(crate) fn good() -> LoadOptions {
        LoadOptions {
            object_bytes: 1_000_000,
            target_bytes: None,
            pipeline_depth: 2,
            load_budget: 100_000_000,
            max_flush_delay: Duration::from_secs(60),
            zstd_level: 3,
        }
    }

    #[test]
    fn the_default_is_the_tiny_tiers_geometry_and_valid() {
        let tiny = Tier::for_memory(3_100_000_000, ravel_tier::MemorySource::MemTotal);
        let d = LoadOptions::default();
        assert_eq!(d, LoadOptions::from_tier(&tiny));
        assert_eq!(d.validate(), Ok(()));
    }

    #[test]
    fn validate_names_the_field_and_value_a_load_cannot_run_with() {
        assert_eq!(good().validate(), Ok(()));
        /// A change that makes the options unusable, and the field and value it sets.
        type Case = (fn(&mut LoadOptions), &'static str, &'static str);
        let cases: Vec<Case> = vec![
            (|o| o.object_bytes = 0, "object_bytes", "0"),
            (|o| o.pipeline_depth = 0, "pipeline_depth", "0"),
            (|o| o.target_bytes = Some(0), "target_bytes", "0"),
            (|o| o.zstd_level = 0, "zstd_level", "0"),
            (|o| o.zstd_level = 23, "zstd_level", "23"),
            (|o| o.zstd_level = -5, "zstd_level", "-5"),
            (|o| o.load_budget = 999_999, "load_budget", "999999"),
        ];
        for (change, field, value) in cases {
            let mut o = good();
            change(&mut o);
            let err = o.validate().unwrap_err();
            assert_eq!((err.field, err.value.as_str()), (field, value), "{err}");
            assert!(
                err.to_string().contains(&format!("{field} = {value}")),
                "{err}"
            );
        }
        // The edges that are allowed.
        let mut o = good();
        o.zstd_level = 22;
        o.load_budget = o.object_bytes;
        o.target_bytes = Some(1);
        assert_eq!(o.validate(), Ok(()));
    }
}
