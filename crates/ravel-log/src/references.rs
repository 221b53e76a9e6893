//! What a version references, by store path: what its readers open, and what readers of the
//! versions before it may still open. `gc` keeps both (the second until its retention has
//! passed), `verify` tells them from orphans, and a compaction never deletes either.

use std::collections::{HashMap, HashSet};

use crate::{LiveManifest, LogError, Snapshot, TableLog};

/// What one version references, by store path (see [`TableLog::references`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// The objects, Bloom sidecars and manifests its readers open.
    pub live: HashSet<String>,
    /// What readers of earlier versions may still open: the objects it no longer holds, and
    /// the sidecars of manifests none of whose objects it holds. Each with the time it left
    /// the table (Unix milliseconds, as its log entry records it; a sidecar's is that of the
    /// last of its manifest's objects to leave).
    pub removed: HashMap<String, Option<i64>>,
}

impl References {
    /// Whether `key` is something the version or a reader of an earlier one may open.
    pub fn contains(&self, key: &str) -> bool {
        self.live.contains(key) || self.removed.contains_key(key)
    }
}

impl TableLog {
    /// What `snapshot` references; `live` are its manifests ([`TableLog::manifests`]).
    pub async fn references(
        &self,
        snapshot: &Snapshot,
        live: &[LiveManifest],
    ) -> Result<References, LogError> {
        let mut refs = References::default();
        refs.live
            .extend(snapshot.foreign(&self.table).into_iter().map(|f| f.key));
        for m in live {
            refs.live.insert(m.key.clone());
            refs.live.extend(m.objects().map(|(_, o)| o.key.clone()));
            refs.live
                .extend(m.manifest.blooms.iter().map(|b| b.key.clone()));
        }
        // Per manifest no longer live, the latest removal of its objects.
        let mut replaced: HashMap<String, Option<i64>> = HashMap::new();
        for (path, r) in snapshot.removed() {
            refs.removed
                .insert(self.table.absolute(path), r.deletion_timestamp);
            let Some(m) = r.manifest.as_ref().map(|m| self.table.absolute(m)) else {
                continue;
            };
            if !refs.live.contains(&m) {
                let at = replaced.entry(m).or_insert(r.deletion_timestamp);
                *at = (*at).max(r.deletion_timestamp);
            }
        }
        for (key, at) in replaced {
            if let Some(b) = self.sidecar_of(&key).await? {
                refs.removed.insert(b, at);
            }
        }
        Ok(refs)
    }

    /// The Bloom sidecar a manifest names, if any (a manifest that is gone names none).
    async fn sidecar_of(&self, key: &str) -> Result<Option<String>, LogError> {
        match ravel_manifest::read_manifest(self.store.as_ref(), key).await {
            Ok(m) => Ok(m.and_then(|m| m.blooms).map(|b| b.key)),
            Err(source) => Err(LogError::Manifest {
                key: key.to_string(),
                source,
            }),
        }
    }
}
