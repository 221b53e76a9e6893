//! What failures leave on a table: the standing error of each kind, until a step of that kind
//! succeeds, and the wait before the next try.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::Kind;

/// The standing error of each kind, and which came last.
#[derive(Debug, Clone, Default)]
pub(super) struct Standing {
    errors: BTreeMap<Kind, StandingError>,
    count: u64,
}

#[derive(Debug, Clone)]
struct StandingError {
    order: u64,
    message: String,
}

impl Standing {
    pub(super) fn set(&mut self, kind: Kind, message: String) {
        self.count += 1;
        let order = self.count;
        self.errors.insert(kind, StandingError { order, message });
    }

    pub(super) fn clear(&mut self, kind: Kind) {
        self.errors.remove(&kind);
    }

    /// The newest standing error.
    pub(super) fn last(&self) -> Option<String> {
        let newest = self.errors.values().max_by_key(|e| e.order)?;
        Some(newest.message.clone())
    }
}

/// The first wait after a failure, and the longest.
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Waits after failures: 1 s, then doubled after each failure up to 60 s; none after a success.
#[derive(Debug, Clone)]
pub(super) struct Backoff {
    until: Option<Instant>,
    next: Duration,
}

impl Backoff {
    pub(super) fn new() -> Backoff {
        Backoff {
            until: None,
            next: MIN_BACKOFF,
        }
    }

    pub(super) fn failed(&mut self) {
        self.until = Some(Instant::now() + self.next);
        self.next = (self.next * 2).min(MAX_BACKOFF);
    }

    pub(super) fn succeeded(&mut self) {
        *self = Backoff::new();
    }

    /// The time left to wait, if any.
    pub(super) fn left(&self) -> Option<Duration> {
        let left = self.until?.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }
}
