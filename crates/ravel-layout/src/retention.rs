//! How long a table keeps what its newest version no longer needs: removed objects, the
//! identities of the inputs loads consumed, and log entries. Delta's own table properties
//! carry the three windows, so every Delta engine reads the same ones.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::LayoutError;

pub use ravel_log::{
    FILES_PROPERTY, FORGOTTEN_PROPERTY, INPUTS_PROPERTY, LOG_PROPERTY, interval, parse_interval,
};

/// The longest window: a century.
pub const MAX_WINDOW_S: u64 = 36_500 * 86_400;

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
    /// Loads of files that changed before this moment (Unix milliseconds) may have been
    /// forgotten under a shorter inputs window the table had before: set when the window
    /// grows ([`Retention::set_inputs`]), so that a longer window never vouches for what a
    /// shorter one forgot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs_forgotten_before_ms: Option<i64>,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            files_s: ravel_log::DEFAULT_FILES_S,
            inputs_s: ravel_log::DEFAULT_INPUTS_S,
            log_s: ravel_log::DEFAULT_LOG_S,
            inputs_forgotten_before_ms: None,
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
    /// version it is reading) and at most [`MAX_WINDOW_S`] (Spark reads a window's days as a
    /// 32-bit count; a century keeps every engine's arithmetic whole).
    pub fn validate(&self) -> Result<(), LayoutError> {
        let windows = [
            ("files", self.files_s),
            ("inputs", self.inputs_s),
            ("log", self.log_s),
        ];
        let bad = |setting: &'static str, seconds: u64, reason: &str| LayoutError::BadRetention {
            setting,
            value: format!("{seconds}s"),
            reason: reason.into(),
        };
        for (setting, seconds) in windows {
            if seconds == 0 {
                return Err(bad(setting, seconds, "a retention must be above 0s"));
            }
            if seconds > MAX_WINDOW_S {
                return Err(bad(setting, seconds, "a retention must be at most 36500d"));
            }
        }
        Ok(())
    }

    /// Sets the inputs window to `seconds` at `now_ms`. A longer window than the table had
    /// records when the shorter one may have started forgetting
    /// ([`Retention::inputs_forgotten_before_ms`]).
    pub fn set_inputs(&mut self, seconds: u64, now_ms: i64) {
        if seconds > self.inputs_s {
            let old_ms = i64::try_from(self.inputs_s.saturating_mul(1000)).unwrap_or(i64::MAX);
            let start = now_ms.saturating_sub(old_ms);
            let before = self
                .inputs_forgotten_before_ms
                .map_or(start, |b| b.max(start));
            self.inputs_forgotten_before_ms = Some(before);
        }
        self.inputs_s = seconds;
    }

    /// The three windows as Delta table properties, and the moment before which a shorter
    /// inputs window may have forgotten loads, when the window grew ([`FORGOTTEN_PROPERTY`]).
    pub fn properties(&self) -> Vec<RetentionProperty> {
        let p = |name, s| RetentionProperty {
            name,
            value: interval(s),
        };
        let mut out = vec![
            p(FILES_PROPERTY, self.files_s),
            p(INPUTS_PROPERTY, self.inputs_s),
            p(LOG_PROPERTY, self.log_s),
        ];
        if let Some(before) = self.inputs_forgotten_before_ms {
            out.push(RetentionProperty {
                name: FORGOTTEN_PROPERTY,
                value: before.to_string(),
            });
        }
        out
    }
}

impl fmt::Display for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (what, p) in ["files", "inputs", "log"].iter().zip(self.properties()) {
            writeln!(f, "{what}: {} ({})", p.value, p.name)?;
        }
        if let Some(before) = self.inputs_forgotten_before_ms {
            let at = chrono::DateTime::from_timestamp_millis(before)
                .map_or_else(|| before.to_string(), |t| t.to_rfc3339());
            writeln!(
                f,
                "files changed before {at} are refused without --reload: a shorter inputs window may have forgotten their loads ({FORGOTTEN_PROPERTY})"
            )?;
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
        let huge = Retention {
            files_s: MAX_WINDOW_S + 1,
            ..Retention::default()
        };
        let e = huge.validate().unwrap_err().to_string();
        assert!(e.contains("files") && e.contains("36500d"), "{e}");
    }

    #[test]
    fn a_growing_inputs_window_records_when_the_shorter_one_began_to_forget() {
        let day_ms = 86_400_000;
        let mut r = Retention::default();
        r.set_inputs(86_400, 100 * day_ms);
        assert_eq!(
            r.inputs_forgotten_before_ms, None,
            "a shorter window forgets on its own"
        );
        r.set_inputs(10 * 86_400, 200 * day_ms);
        assert_eq!(r.inputs_forgotten_before_ms, Some(199 * day_ms));
        // Growing again later keeps the later of the two moments.
        r.set_inputs(20 * 86_400, 300 * day_ms);
        assert_eq!(r.inputs_forgotten_before_ms, Some(290 * day_ms));
        let names: Vec<&str> = r.properties().iter().map(|p| p.name).collect();
        assert!(names.contains(&FORGOTTEN_PROPERTY), "{names:?}");
        let back: Retention = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
