//! What the modules share.

use arrow::array::RecordBatch;
use arrow::compute::{sort_to_indices, take_record_batch};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use ravel_store::Store;

/// The rows of `b` in WatchID order, so that loads' outputs compare row by row.
pub fn by_watch_id(b: &RecordBatch) -> RecordBatch {
    let idx = sort_to_indices(b.column_by_name("WatchID").unwrap(), None, None).unwrap();
    take_record_batch(b, &idx).unwrap()
}

/// The bytes stored at `path`, which must be there.
pub async fn stored(store: &Store, path: &Path) -> bytes::Bytes {
    let got = store.object_store().get(path).await.unwrap();
    got.bytes().await.unwrap()
}
