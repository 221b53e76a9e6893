//! The table's retention windows as its Delta metadata records them (`interval N unit`
//! values of Delta's own properties), and what a checkpoint keeps under them.

use crate::Metadata;

/// Delta's property for how long a removed object stays readable (and its tombstone stays in
/// checkpoints).
pub const FILES_PROPERTY: &str = "delta.deletedFileRetentionDuration";
/// Delta's property for how long a writer's transaction identifiers (`txn`) are kept.
pub const INPUTS_PROPERTY: &str = "delta.setTransactionRetentionDuration";
/// Delta's property for how long log entries are kept once a checkpoint covers them.
pub const LOG_PROPERTY: &str = "delta.logRetentionDuration";

/// The moment (Unix milliseconds) before which the table may have forgotten loads under an
/// inputs window it had before (written when the window grows): loads of files older than it
/// are refused as those older than the window are.
pub const FORGOTTEN_PROPERTY: &str = "ravel.inputs.forgottenBefore";

/// Delta's default files window: 7 days.
pub const DEFAULT_FILES_S: u64 = 7 * 86_400;

/// The clock the windows are measured on: Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Seconds in Delta's `interval N unit` form, in the largest unit that divides them exactly
/// (as Spark and delta-rs read it): `interval 7 days`, `interval 90 seconds`.
pub fn interval(seconds: u64) -> String {
    let units = [
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ];
    let (size, unit) = units
        .into_iter()
        .find(|(size, _)| seconds.is_multiple_of(*size) && seconds > 0)
        .unwrap_or((1, "second"));
    let n = seconds / size;
    let plural = if n == 1 { "" } else { "s" };
    format!("interval {n} {unit}{plural}")
}

/// A span of `ms` milliseconds in words, in its largest whole unit: `2 days`, `117 seconds`.
pub(crate) fn span(ms: i64) -> String {
    let seconds = u64::try_from(ms / 1000).unwrap_or(0);
    let units = [
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ];
    let (size, unit) = units
        .into_iter()
        .find(|(size, _)| seconds >= *size)
        .unwrap_or((1, "second"));
    let n = seconds / size;
    let plural = if n == 1 { "" } else { "s" };
    format!("{n} {unit}{plural}")
}

/// Parses Delta's `interval N unit` (units from seconds to weeks, singular or plural) into
/// seconds; `None` when it is not that form.
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
        "day" => 86_400,
        "week" => 7 * 86_400,
        _ => return None,
    };
    match words.next() {
        Some(_) => None,
        None => n.checked_mul(size),
    }
}

/// Delta's default inputs window (`delta.setTransactionRetentionDuration`): 30 days.
pub const DEFAULT_INPUTS_S: u64 = 30 * 86_400;

/// Delta's default log window: 30 days.
pub const DEFAULT_LOG_S: u64 = 30 * 86_400;

/// The window `property` of `metadata`, in milliseconds: `default_s` when it records none (or
/// one that does not parse).
fn window_ms(metadata: Option<&Metadata>, property: &str, default_s: u64) -> i64 {
    let recorded = metadata
        .and_then(|m| m.configuration.get(property))
        .and_then(|v| parse_interval(v));
    let seconds = recorded.unwrap_or(default_s);
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// The files window `metadata` records, in milliseconds: Delta's default when it records none
/// (or one that does not parse).
pub fn files_window_ms(metadata: Option<&Metadata>) -> i64 {
    window_ms(metadata, FILES_PROPERTY, DEFAULT_FILES_S)
}

/// The inputs window `metadata` records, in milliseconds ([`DEFAULT_INPUTS_S`] when none).
pub fn inputs_window_ms(metadata: Option<&Metadata>) -> i64 {
    window_ms(metadata, INPUTS_PROPERTY, DEFAULT_INPUTS_S)
}

/// The log window `metadata` records, in milliseconds ([`DEFAULT_LOG_S`] when none).
pub fn log_window_ms(metadata: Option<&Metadata>) -> i64 {
    window_ms(metadata, LOG_PROPERTY, DEFAULT_LOG_S)
}

/// What a checkpoint written at one moment leaves out: tombstones older than the files window,
/// and `txn`s older than the inputs window when the table records one (Delta expires
/// transaction identifiers only when `delta.setTransactionRetentionDuration` is set).
/// An action with no time is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// Tombstones deleted before this moment (Unix milliseconds) are left out.
    pub tombstones_before: i64,
    /// `txn`s last updated before this moment are left out; `None`: every one is kept.
    pub txns_before: Option<i64>,
}

impl Expiry {
    /// The expiry of a checkpoint of a table with `metadata` written at `now_ms`.
    pub fn at(metadata: Option<&Metadata>, now_ms: i64) -> Expiry {
        let recorded = metadata.is_some_and(|m| m.configuration.contains_key(INPUTS_PROPERTY));
        Expiry {
            tombstones_before: now_ms.saturating_sub(files_window_ms(metadata)),
            txns_before: recorded.then(|| now_ms.saturating_sub(inputs_window_ms(metadata))),
        }
    }

    /// Whether a tombstone deleted at `deleted_ms` is kept.
    pub fn keeps_tombstone(&self, deleted_ms: Option<i64>) -> bool {
        deleted_ms.is_none_or(|t| t >= self.tombstones_before)
    }

    /// Files that last changed before this moment (Unix milliseconds) may have been loaded by
    /// a version whose `txn`s a checkpoint left out: the inputs window's start, or an earlier
    /// window's recorded in [`FORGOTTEN_PROPERTY`], whichever is later. `None` when the table
    /// records no inputs window (nothing expires), or when it was created after that moment
    /// (every load it saw is still remembered).
    pub fn forgotten_before(metadata: Option<&Metadata>, now_ms: i64) -> Option<i64> {
        let m = metadata?;
        let window = Expiry::at(Some(m), now_ms).txns_before?;
        let earlier = m
            .configuration
            .get(FORGOTTEN_PROPERTY)
            .and_then(|v| v.parse::<i64>().ok());
        let before = earlier.map_or(window, |e| e.max(window));
        let created = m.created_time.unwrap_or(i64::MIN);
        (created < before).then_some(before)
    }

    /// Whether a `txn` last updated at `updated_ms` is kept.
    pub fn keeps_txn(&self, updated_ms: Option<i64>) -> bool {
        match (self.txns_before, updated_ms) {
            (Some(before), Some(t)) => t >= before,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_written_in_the_largest_exact_unit_and_read_back() {
        let cases = [
            (7 * 86_400, "interval 7 days"),
            (86_400, "interval 1 day"),
            (90, "interval 90 seconds"),
            (7_200, "interval 2 hours"),
            (120, "interval 2 minutes"),
        ];
        for (seconds, text) in cases {
            assert_eq!(interval(seconds), text);
            assert_eq!(parse_interval(text), Some(seconds));
        }
        assert_eq!(parse_interval("interval 1 week"), Some(7 * 86_400));
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
}
