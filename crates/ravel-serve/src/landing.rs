//! Where files land: a local directory or an S3 prefix, listed once a poll. A file's identity
//! is the one the log records for what a load consumed (`ravel_log::InputFile`): a local
//! file's canonical path, size and modification time; an object's URL, size and ETag.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use ravel_loader::{InputFile, InputFormat};
use ravel_store::{Store, StoreLocation};

/// A file found in the landing prefix.
#[derive(Debug, Clone)]
pub struct Landed {
    pub identity: InputFile,
    /// When it landed (its modification time), for the batch's age and the latency figure.
    pub landed: SystemTime,
    /// Where it is read from: a local path, or an object's key in the landing store.
    pub location: Location,
}

/// Where a landed file is read.
#[derive(Debug, Clone)]
pub enum Location {
    Local(PathBuf),
    Object(object_store::path::Path),
}

/// Why the landing prefix could not be listed or a file fetched.
#[derive(Debug, thiserror::Error)]
pub enum LandingError {
    #[error("listing the landing directory {path}")]
    ListDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] ravel_store::StoreError),
    #[error("listing the landing prefix {url}")]
    List {
        url: String,
        #[source]
        source: object_store::Error,
    },
    #[error("copying landed object {name} to {path}")]
    Fetch {
        name: String,
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A landing prefix and the file names it takes.
pub struct Landing {
    source: Source,
    pattern: glob::Pattern,
}

enum Source {
    Local(PathBuf),
    Store(Store),
}

impl Landing {
    /// The landing `url` (a local directory or `s3://bucket/prefix`), taking the file names
    /// that match `pattern`.
    pub fn open(url: &str, pattern: &str) -> Result<Landing, LandingError> {
        let pattern = glob::Pattern::new(pattern).expect("checked with the configuration");
        let source = match StoreLocation::parse(url)? {
            StoreLocation::Local(dir) => Source::Local(dir),
            StoreLocation::S3 { .. } => Source::Store(Store::open(url)?),
        };
        Ok(Landing { source, pattern })
    }

    /// The landed files whose names match, in name order. A local directory that does not
    /// exist yet holds nothing.
    pub async fn list(&self) -> Result<Vec<Landed>, LandingError> {
        let mut found = match &self.source {
            Source::Local(dir) => self.list_dir(dir)?,
            Source::Store(store) => self.list_store(store).await?,
        };
        found.sort_by(|a, b| a.identity.name.cmp(&b.identity.name));
        Ok(found)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<Landed>, LandingError> {
        let failed = |source| LandingError::ListDir {
            path: dir.display().to_string(),
            source,
        };
        let entries = match std::fs::read_dir(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            other => other.map_err(failed)?,
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(failed)?;
            let name = entry.file_name();
            if !self.pattern.matches(&name.to_string_lossy()) {
                continue;
            }
            // A file that went between the listing and this look is not there.
            let Ok(meta) = std::fs::metadata(entry.path()) else {
                continue;
            };
            let Ok(canonical) = std::fs::canonicalize(entry.path()) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let landed = meta.modified().unwrap_or(UNIX_EPOCH);
            found.push(Landed {
                identity: InputFile {
                    name: canonical.display().to_string(),
                    size: meta.len(),
                    version: nanos(landed).to_string(),
                },
                landed,
                location: Location::Local(canonical),
            });
        }
        Ok(found)
    }

    async fn list_store(&self, store: &Store) -> Result<Vec<Landed>, LandingError> {
        let listed: Vec<object_store::ObjectMeta> = store
            .object_store()
            .list(None)
            .try_collect()
            .await
            .map_err(|source| LandingError::List {
                url: store.location().to_string(),
                source,
            })?;
        let mut found = Vec::new();
        for meta in listed {
            let Some(name) = meta.location.filename() else {
                continue;
            };
            // Only the prefix's own files, as a local directory's: not deeper keys.
            if meta.location.parts().count() != 1 || !self.pattern.matches(name) {
                continue;
            }
            let landed = SystemTime::from(meta.last_modified);
            let version = meta
                .e_tag
                .clone()
                .unwrap_or_else(|| nanos(landed).to_string());
            found.push(Landed {
                identity: InputFile {
                    name: format!("{}/{}", store.location(), meta.location),
                    size: meta.size,
                    version,
                },
                landed,
                location: Location::Object(meta.location),
            });
        }
        Ok(found)
    }

    /// Local paths to read `files` from: a local file is read where it is; an object is
    /// copied into `scratch` first (the log records the object, not the copy).
    pub async fn local_paths(
        &self,
        files: &[Landed],
        scratch: &Path,
    ) -> Result<Vec<PathBuf>, LandingError> {
        let mut paths = Vec::with_capacity(files.len());
        for (i, f) in files.iter().enumerate() {
            match (&f.location, &self.source) {
                (Location::Local(p), _) => paths.push(p.clone()),
                (Location::Object(key), Source::Store(store)) => {
                    let name = key.filename().unwrap_or("object");
                    let path = scratch.join(format!("{i:06}-{name}"));
                    copy_object(store, key, &path)
                        .await
                        .map_err(|source| LandingError::Fetch {
                            name: f.identity.name.clone(),
                            path: path.display().to_string(),
                            source,
                        })?;
                    paths.push(path);
                }
                (Location::Object(_), Source::Local(_)) => {
                    unreachable!("objects are listed from a store only")
                }
            }
        }
        Ok(paths)
    }
}

/// The input format a file name gives, Parquet unless it ends in `.tsv`.
pub fn format_of(name: &str) -> InputFormat {
    InputFormat::from_path(Path::new(name)).unwrap_or(InputFormat::Parquet)
}

async fn copy_object(
    store: &Store,
    key: &object_store::path::Path,
    to: &Path,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use tokio::io::AsyncWriteExt;
    let mut body = store.object_store().get(key).await?.into_stream();
    let mut file = tokio::fs::File::create(to).await?;
    while let Some(chunk) = body.try_next().await? {
        file.write_all(&chunk).await?;
    }
    file.flush().await?;
    Ok(())
}

fn nanos(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_nanos()
}
