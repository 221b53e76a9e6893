//! How long a table keeps what its newest version no longer needs: removed objects, the
//! identities of the inputs loads consumed, and log entries. Delta's own table properties
//! carry the three windows, so every Delta engine reads the same ones.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::LayoutError;

pub use ravel_log::{FILES_PROPERTY, INPUTS_PROPERTY, LOG_PROPERTY, interval, parse_interval};


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
            files_s: ravel_log::DEFAULT_FILES_S,
            inputs_s: ravel_log::DEFAULT_INPUTS_S,
            log_s: ravel_log::DEFAULT_LOG_S,
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

#[cfg(test)]
mod tests {
    use super::*;

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
