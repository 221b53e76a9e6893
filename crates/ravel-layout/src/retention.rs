//! How long a table keeps what its newest version no longer needs: removed objects, the
//! identities of the inputs loads consumed, and log entries. Delta's own table properties
//! carry the three windows, so every Delta engine reads the same ones.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::LayoutError;

/// Delta's property for how long a removed object stays readable (and its tombstone stays in
/// checkpoints): time travel within it works, `vacuum` and `gc` delete it after.
pub const FILES_PROPERTY: &str = "delta.deletedFileRetentionDuration";
/// Delta's property for how long a writer's transaction identifiers (`txn`) are kept.
pub const INPUTS_PROPERTY: &str = "delta.setTransactionRetentionDuration";
/// Delta's property for how long log entries are kept once a checkpoint covers them.
pub const LOG_PROPERTY: &str = "delta.logRetentionDuration";

const DAY: u64 = 86_400;

/// The three windows, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// Removed objects (Delta's `deletedFileRetentionDuration`; default 7 days, Delta's).
    pub files_s: u64,
    /// Consumed inputs' identities (Delta's `setTransactionRetentionDuration`; default 30
    /// days: a load rerun within it publishes nothing).
    pub inputs_s: u64,
    /// Log entries a checkpoint covers (Delta's `logRetentionDuration`; default 30 days,
    /// Delta's).
    pub log_s: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            files_s: 7 * DAY,
            inputs_s: 30 * DAY,
            log_s: 30 * DAY,
        }
    }
}

/// One window as a Delta property: its name and its `interval N unit` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionProperty {
    pub name: &'static str,
    pub value: String,
}

impl Retention {
    pub fn is_default(&self) -> bool {
        *self == Retention::default()
    }

    /// Every window above zero seconds (a window of nothing would let a reader lose the
    /// version it is reading).
    pub fn validate(&self) -> Result<(), LayoutError> {
        let windows = [
            ("files", self.files_s),
            ("inputs", self.inputs_s),
            ("log", self.log_s),
        ];
        match windows.iter().find(|(_, s)| *s == 0) {
            Some((setting, _)) => Err(LayoutError::BadRetention {
                setting,
                value: "0s".into(),
                reason: "a retention must be above 0s".into(),
            }),
            None => Ok(()),
        }
    }

    /// The three windows as Delta table properties.
    pub fn properties(&self) -> [RetentionProperty; 3] {
        let p = |name, s| RetentionProperty {
            name,
            value: interval(s),
        };
        [
            p(FILES_PROPERTY, self.files_s),
            p(INPUTS_PROPERTY, self.inputs_s),
            p(LOG_PROPERTY, self.log_s),
        ]
    }
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, p) in ["files", "inputs", "log"].iter().zip(self.properties()) {
            writeln!(f, "{what}: {} ({})", p.value, p.name)?;
        }
        Ok(())
    }
}

/// Seconds in Delta's `interval N unit` form, in the largest unit that divides them exactly
/// (as Spark and delta-rs read it): `interval 7 days`, `interval 90 seconds`.
pub fn interval(seconds: u64) -> String {
    let units = [(DAY, "day"), (3_600, "hour"), (60, "minute"), (1, "second")];
    let (size, unit) = units
        .into_iter()
        .find(|(size, _)| seconds % size == 0 && seconds > 0)
        .unwrap_or((1, "second"));
    let n = seconds / size;
    let plural = if n == 1 { "" } else { "s" };
    format!("interval {n} {unit}{plural}")
}

/// Parses Delta's `interval N unit` (units from seconds to weeks, singular or plural) into
/// seconds; `None` when it is not that form or names a smaller unit.
pub fn parse_interval(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("interval") {
        return None;
    }
    let n: u64 = words.next()?.parse().ok()?;
    let unit = words.next()?.to_ascii_lowercase();
    let unit = unit.strip_suffix('s').unwrap_or(&unit);
    let size = match unit {
        "second" => 1,
        "minute" => 60,
        "hour" => 3_600,
        "day" => DAY,
        "week" => 7 * DAY,
        _ => return None,
    };
    match words.next() {
        Some(_) => None,
        None => n.checked_mul(size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_written_in_the_largest_exact_unit_and_read_back() {
        let cases = [
            (7 * DAY, "interval 7 days"),
            (DAY, "interval 1 day"),
            (90, "interval 90 seconds"),
            (7_200, "interval 2 hours"),
            (120, "interval 2 minutes"),
        ];
        for (seconds, text) in cases {
            assert_eq!(interval(seconds), text);
            assert_eq!(parse_interval(text), Some(seconds));
        }
        assert_eq!(parse_interval("interval 1 week"), Some(7 * DAY));
        assert_eq!(parse_interval("INTERVAL 3 Hours"), Some(10_800));
        for bad in [
            "7 days",
            "interval days",
            "interval 1 fortnight",
            "interval 1 day x",
        ] {
            assert_eq!(parse_interval(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_defaults_are_deltas_and_a_zero_window_is_refused() {
        let p = Retention::default().properties();
        let values: Vec<(&str, &str)> = p.iter().map(|p| (p.name, p.value.as_str())).collect();
        assert_eq!(
            values,
            [
                (FILES_PROPERTY, "interval 7 days"),
                (INPUTS_PROPERTY, "interval 30 days"),
                (LOG_PROPERTY, "interval 30 days"),
            ]
        );
        let zero = Retention {
            inputs_s: 0,
            ..Retention::default()
        };
        let e = zero.validate().unwrap_err().to_string();
        assert!(e.contains("inputs"), "{e}");
    }
}
