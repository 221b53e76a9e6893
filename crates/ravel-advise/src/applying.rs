//! Storing a chosen layout's stream, time, clustering key and Bloom scope as the table's next
//! layout generation.

use ravel_layout::{Layout, LayoutStore};
use ravel_store::Store;
use serde::Serialize;

use crate::AdviseError;

/// What [`apply`] stored.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// The table's layout generation after it (the one before when nothing changed).
    pub generation: u64,
    /// Whether a new generation was stored; `false`: the layout was the table's already.
    pub changed: bool,
    /// Whether the clustering order changed, so that `compact` re-clusters every object.
    pub reorders: bool,
    /// Bytes `compact` will rewrite to re-cluster the table.
    pub rewrite_bytes: u64,
}

/// `base` with `layout`'s stream, time, clustering key and Bloom scope: the layout [`apply`]
/// stores (maintenance policy and fence stay as they are).
pub fn applied_to(base: &Layout, layout: &Layout) -> Layout {
    Layout {
        stream: layout.stream.clone(),
        time: layout.time.clone(),
        clustering_key: layout.clustering_key.clone(),
        bloom: layout.bloom.clone(),
        ..base.clone()
    }
}

/// Whether `next` over `base` gives the stored objects a new order for `compact` to restore.
/// A layout with no key leaves them as they are (compact has no order to restore), so only a
/// new, non-empty key does.
pub fn reorders(base: &Layout, next: &Layout) -> bool {
    !next.sort_key_names().is_empty() && next.sort_key_names() != base.sort_key_names()
}

/// Stores `layout`'s stream, time, clustering key and Bloom scope as `table`'s next layout
/// generation (see [`applied_to`]); stores nothing when they are the table's already.
pub async fn apply(
    store: &Store,
    table: &str,
    layout: &Layout,
    table_bytes: u64,
) -> Result<Applied, AdviseError> {
    let layouts = LayoutStore::new(store, table)?;
    let base = layouts.load().await?;
    let next = applied_to(&base, layout);
    let reorders = reorders(&base, &next);
    let updated = layouts.update_from(&base, next).await?;
    Ok(Applied {
        generation: updated.layout.generation,
        changed: updated.changed,
        reorders,
        rewrite_bytes: if reorders { table_bytes } else { 0 },
    })
}
