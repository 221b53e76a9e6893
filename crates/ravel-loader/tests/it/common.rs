//! What the modules share.

use arrow::array::RecordBatch;
use arrow::compute::{sort_to_indices, take_record_batch};

/// The rows of `b` in WatchID order, so that loads' outputs compare row by row.
pub fn by_watch_id(b: &RecordBatch) -> RecordBatch {
    let idx = sort_to_indices(b.column_by_name("WatchID").unwrap(), None, None).unwrap();
    take_record_batch(b, &idx).unwrap()
}
