//! The load budget: the bytes a load may hold at once (buffered batches and their sort
//! scratch, the sorted run, encoded objects awaiting upload), as semaphore permits.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget counts in KiB so that tokio's u32 permit counts cover budgets up to 4 TiB.
const UNIT: u64 = 1024;

/// Budget units (KiB, rounded up) of `bytes`.
pub fn units(bytes: u64) -> u32 {
    bytes.div_ceil(UNIT).min(u32::MAX as u64) as u32
}

/// Bytes a load may hold at once, shared by its buffer and its uploads. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Budget {
    permits: Arc<Semaphore>,
    total_units: usize,
    /// The most bytes in use at once so far.
    peak: Arc<AtomicU64>,
}

impl Budget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: u64) -> Budget {
        let total_units = units(bytes).max(1) as usize;
        Budget {
            permits: Arc::new(Semaphore::new(total_units)),
            total_units,
            peak: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The whole budget in units.
    pub fn total_units(&self) -> usize {
        self.total_units
    }

    /// `units` of the budget if they are free now.
    pub fn try_acquire_units(&self, units: u32) -> Option<OwnedSemaphorePermit> {
        let permit = self.permits.clone().try_acquire_many_owned(units).ok()?;
        self.note_peak();
        Some(permit)
    }

    /// `units` of the budget, waiting until they are free.
    pub async fn acquire_units(&self, units: u32) -> OwnedSemaphorePermit {
        let permit = self
            .permits
            .clone()
            .acquire_many_owned(units)
            .await
            .expect("the budget is never closed");
        self.note_peak();
        permit
    }

    /// Bytes of the budget in use now.
    pub fn in_use(&self) -> u64 {
        (self.total_units - self.permits.available_permits()) as u64 * UNIT
    }

    /// The most bytes in use at once so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    fn note_peak(&self) {
        self.peak.fetch_max(self.in_use(), Ordering::Relaxed);
    }
}
