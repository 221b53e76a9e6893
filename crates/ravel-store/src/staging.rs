//! Staging files of a local store. object_store's local store writes each object to
//! `<object>#<n>` and renames it into place once complete; a writer killed in between leaves
//! that file behind, and listing the store never shows it (it is not an object). Such a file
//! can be as large as an object, one per upload in flight.

use std::path::{Path as FsPath, PathBuf};

use chrono::{DateTime, Utc};
use object_store::path::Path;

use crate::Store;

/// A staging file left by a write that never completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagingFile {
    /// Its store path: the object's, then `#<n>`.
    pub key: String,
    pub bytes: u64,
    /// Its last write.
    pub modified: DateTime<Utc>,
}

impl Store {
    /// The staging files under `dir` (recursively); none for a store that is not a local
    /// directory. Files that vanish while listed are skipped.
    pub fn staging_files(&self, dir: &Path) -> std::io::Result<Vec<StagingFile>> {
        let Some(root) = &self.local_root else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        walk(root, &root.join(dir.as_ref()), &mut found)?;
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    /// The staging file `key` as it is now, `None` when it is gone (or this store keeps none).
    pub fn staging_file(&self, key: &str) -> std::io::Result<Option<StagingFile>> {
        let Some(root) = self.staging_path(key) else {
            return Ok(None);
        };
        match std::fs::metadata(&root) {
            Ok(meta) => Ok(Some(staging_file(key.to_string(), &meta))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes the staging file `key`; one already gone is no error.
    pub fn remove_staging_file(&self, key: &str) -> std::io::Result<()> {
        let Some(path) = self.staging_path(key) else {
            return Ok(());
        };
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The file of staging key `key`: only a name that is one (never an object's).
    fn staging_path(&self, key: &str) -> Option<PathBuf> {
        let root = self.local_root.as_ref()?;
        is_staging_name(key.rsplit('/').next()?).then(|| root.join(key))
    }
}

/// `<name>#<digits>`: object_store's local store stages a write in such a file, and its
/// listings skip them.
pub fn is_staging_name(name: &str) -> bool {
    match name.rsplit_once('#') {
        Some((object, n)) => {
            !object.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

fn walk(root: &FsPath, dir: &FsPath, found: &mut Vec<StagingFile>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            walk(root, &path, found)?;
            continue;
        }
        let name = entry.file_name();
        if !is_staging_name(&name.to_string_lossy()) {
            continue;
        }
        let Ok(relative) = path.strip_prefix(root) else {
            continue;
        };
        let key = relative
            .to_string_lossy()
            .replace(std::path::MAIN_SEPARATOR, "/");
        found.push(staging_file(key, &meta));
    }
    Ok(())
}

fn staging_file(key: String, meta: &std::fs::Metadata) -> StagingFile {
    StagingFile {
        key,
        bytes: meta.len(),
        modified: meta
            .modified()
            .map(DateTime::<Utc>::from)
            .unwrap_or_else(|_| Utc::now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names() {
        assert!(is_staging_name("abc.parquet#1"));
        assert!(is_staging_name("abc.parquet#12"));
        assert!(!is_staging_name("abc.parquet"));
        assert!(!is_staging_name("abc.parquet#"));
        assert!(!is_staging_name("abc#x1"));
        assert!(!is_staging_name("#1"));
    }

    #[test]
    fn lists_and_removes_only_staging_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().to_str().unwrap()).unwrap();
        let data = dir.path().join("t/data");
        std::fs::create_dir_all(data.join("sub")).unwrap();
        std::fs::write(data.join("a.parquet"), b"object").unwrap();
        std::fs::write(data.join("a.parquet#1"), b"part").unwrap();
        std::fs::write(data.join("sub/b.parquet#2"), b"parts").unwrap();
        let found = store.staging_files(&Path::from("t/data")).unwrap();
        let keys: Vec<_> = found.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["t/data/a.parquet#1", "t/data/sub/b.parquet#2"]);
        assert_eq!(found[1].bytes, 5);
        // An object's name is never taken for a staging file's.
        store.remove_staging_file("t/data/a.parquet").unwrap();
        assert!(data.join("a.parquet").exists());
        store.remove_staging_file("t/data/a.parquet#1").unwrap();
        assert!(!data.join("a.parquet#1").exists());
        assert_eq!(store.staging_file("t/data/a.parquet#1").unwrap(), None);
        assert!(
            store
                .staging_file("t/data/sub/b.parquet#2")
                .unwrap()
                .is_some()
        );
    }
}
