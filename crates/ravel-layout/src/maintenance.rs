//! The maintenance policy of a table: what every writer does after a load to keep the table
//! clustered as it grows, with bounded write amplification and bounded overlap depth.
//!
//! The policy is stored in the layout document, so that every writer applies the same one; the
//! planning itself lives beside compaction (`ravel_compact::maintenance`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::LayoutError;

/// Largest size ratio and depth bound accepted: beyond them a merge would open more runs at
/// once than a load's budget holds slices for.
pub const MAX_POLICY_RUNS: u32 = 64;

/// What a writer does after each load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaintenanceMode {
    /// Size-tiered runs under a depth bound (see [`Maintenance`]).
    Tiered,
    /// Merge every overlapping object after each load (`compact`): depth 1, every load
    /// rewrites whatever it overlaps.
    Full,
    /// Nothing: loads leave their runs, `compact` and `maintain` run only when asked.
    None,
}

impl FromStr for MaintenanceMode {
    type Err = LayoutError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tiered" => Ok(MaintenanceMode::Tiered),
            "full" => Ok(MaintenanceMode::Full),
            "none" => Ok(MaintenanceMode::None),
            other => Err(LayoutError::BadMaintenance {
                setting: "policy",
                value: other.to_string(),
                reason: "the policies are tiered, full and none".into(),
            }),
        }
    }
}

impl fmt::Display for MaintenanceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MaintenanceMode::Tiered => "tiered",
            MaintenanceMode::Full => "full",
            MaintenanceMode::None => "none",
        })
    }
}

/// The maintenance policy: sorted runs (a load's runs, a merge's output) kept in tiers by
/// size, as RocksDB's universal compaction and ClickHouse's merge selector keep them.
///
/// Among runs that overlap each other, in load order: `size_ratio` consecutive runs whose
/// sizes lie within a factor `size_ratio` of each other merge into one; when more than
/// `max_depth` runs overlap, the consecutive runs that cost least to merge are merged until
/// `max_depth` remain. A byte is rewritten about once per tier it climbs, so the write
/// amplification over the loaded bytes is about `log_size_ratio(table bytes / load bytes)`,
/// and the overlap depth never exceeds `max_depth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Maintenance {
    pub policy: MaintenanceMode,
    /// Runs of one tier that merge, and the size factor a tier spans (≥ 2).
    pub size_ratio: u32,
    /// Runs that may overlap at any key after maintenance (≥ `size_ratio`).
    pub max_depth: u32,
}

impl Default for Maintenance {
    fn default() -> Self {
        Maintenance {
            policy: MaintenanceMode::Tiered,
            size_ratio: 4,
            max_depth: 8,
        }
    }
}

impl Maintenance {
    pub fn is_default(&self) -> bool {
        *self == Maintenance::default()
    }

    /// Refuses settings no table can keep: a ratio below 2 (a tier of one run never merges),
    /// a depth bound below 2 (that is the `full` policy) or below the ratio (a tier would never
    /// fill before the bound merged it), and values past [`MAX_POLICY_RUNS`].
    pub fn validate(&self) -> Result<(), LayoutError> {
        let bad = |setting, value: u32, reason: String| LayoutError::BadMaintenance {
            setting,
            value: value.to_string(),
            reason,
        };
        let range = format!("it must be 2 to {MAX_POLICY_RUNS}");
        if !(2..=MAX_POLICY_RUNS).contains(&self.size_ratio) {
            return Err(bad("size-ratio", self.size_ratio, range));
        }
        if !(2..=MAX_POLICY_RUNS).contains(&self.max_depth) {
            return Err(bad("max-depth", self.max_depth, range));
        }
        if self.max_depth < self.size_ratio {
            return Err(bad(
                "max-depth",
                self.max_depth,
                format!(
                    "it is below size-ratio {}: a tier would never fill before the depth bound merged it; set max-depth to at least the size ratio",
                    self.size_ratio
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_settings_are_refused_naming_the_setting() {
        let cases = [
            (1, 8, "size-ratio"),
            (4, 1, "max-depth"),
            (4, 3, "max-depth"),
        ];
        for (size_ratio, max_depth, setting) in cases {
            let m = Maintenance {
                size_ratio,
                max_depth,
                ..Maintenance::default()
            };
            let e = m.validate().unwrap_err();
            assert!(e.to_string().contains(setting), "{e}");
            assert!(e.is_invalid_input());
        }
        Maintenance::default().validate().unwrap();
        assert!("sometimes".parse::<MaintenanceMode>().is_err());
    }
}
