//! How well the table is clustered, exactly and as Snowflake's `SYSTEM$CLUSTERING_INFORMATION`
//! does (see [`ravel_manifest::clustering`]), over the objects of the newest load's sort key:
//! keys of different layouts do not compare.

use ravel_log::LiveManifest;
use ravel_manifest::{ClusteringInfo, clustering_info};

/// The depth figures of the objects whose load shares the newest load's sort key; `None` when
/// none has a key range.
pub(crate) fn newest_key_depth(live: &[LiveManifest]) -> Option<ClusteringInfo> {
    let objects = live
        .last()
        .map(|newest| {
            live.iter()
                .filter(|m| m.manifest.sort_key == newest.manifest.sort_key)
                .flat_map(|m| m.objects().map(|(_, o)| o))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    clustering_info(&objects)
}
