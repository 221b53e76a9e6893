//! Where files land: a local directory or an S3 prefix, listed once a poll. A file's identity
//! is the one the log records for what a load consumed (`ravel_log::InputFile`): a local
//! file's canonical path, size and modification time; an object's URL, size and ETag.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::TryStreamExt;
use ravel_loader::{InputFile, InputFormat};
use ravel_store::{Store, StoreLocation};

use crate::config::AfterLoad;

/// A file found in the landing prefix.
#[derive(Debug, Clone)]
pub struct Landed {
    pub identity: InputFile,
    /// Its name below the landing prefix (`2026/12/07/a.parquet`): what listings sort and a
    /// cursor compares.
    pub key: String,
    /// When it landed (its modification time), for the batch's age and the latency figure.
    pub landed: SystemTime,
    /// Where it is read from: a local path, or an object's key in the landing store.
    pub location: Location,
}

/// One listing of a landing prefix.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The regular files whose names match, each once.
    pub files: Vec<Landed>,
    /// Entries whose names match but that are not files to read.
    pub skipped: Vec<Skipped>,
    /// Files whose names do not match the pattern.
    pub unmatched: usize,
}

/// An entry of the landing prefix left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// Why an entry that is not a regular file is left out.
fn not_regular(target: &std::fs::FileType) -> String {
    use std::os::unix::fs::FileTypeExt;
    let what = if target.is_dir() {
        "a directory"
    } else if target.is_fifo() {
        "a named pipe"
    } else if target.is_socket() {
        "a socket"
    } else if target.is_block_device() || target.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    };
    format!("{what}: only regular files are loaded")
}

/// Where a landed file is read.
#[derive(Debug, Clone)]
pub enum Location {
    /// A local file, by the path it was listed under (a symbolic link's, not its target's).
    Local(PathBuf),
    /// An object of the landing store, and the ETag it was listed with (when the store
    /// gives one).
    Object {
        key: object_store::path::Path,
        etag: Option<String>,
    },
}

/// Why the landing prefix could not be listed or a file fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandingError {
    #[error("listing the landing directory {path}")]
    ListDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the landing directory {path} does not exist (or is not a directory): create it, or correct `landing`"
    )]
    Missing { path: String },
    #[error(transparent)]
    Store(#[from] ravel_store::StoreError),
    #[error("pattern {pattern:?} is not a glob: {problem}")]
    Pattern { pattern: String, problem: String },
    #[error("listing the landing prefix {url}")]
    List {
        url: String,
        #[source]
        source: object_store::Error,
    },
    #[error("{action} the loaded file {name} (after_load)")]
    AfterLoad {
        action: &'static str,
        name: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
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
        let pattern = glob::Pattern::new(pattern).map_err(|e| LandingError::Pattern {
            pattern: pattern.to_string(),
            problem: e.to_string(),
        })?;
        let source = match StoreLocation::parse(url)? {
            StoreLocation::Local(dir) => Source::Local(dir),
            StoreLocation::S3 { .. } => Source::Store(Store::open(url)?),
        };
        Ok(Landing { source, pattern })
    }

    /// The landed files whose names match, in key order, with the entries left out; with
    /// `after`, only files whose keys sort after it. A local directory that does not exist is
    /// an error: the service waits for it.
    pub async fn list(&self, after: Option<&str>) -> Result<Listing, LandingError> {
        let mut listing = match &self.source {
            Source::Local(dir) => {
                let walk = Walk {
                    pattern: self.pattern.clone(),
                    root: dir.clone(),
                    after: after.map(str::to_string),
                };
                tokio::task::spawn_blocking(move || walk.list_local())
                    .await
                    .expect("listing does not panic")?
            }
            Source::Store(store) => self.list_store(store, after).await?,
        };
        listing.files.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(listing)
    }
}

/// A walk of a local landing directory.
struct Walk {
    pattern: glob::Pattern,
    root: PathBuf,
    /// Only keys after this one.
    after: Option<String>,
}

impl Walk {
    fn list_local(&self) -> Result<Listing, LandingError> {
        if !self.root.is_dir() {
            return Err(LandingError::Missing {
                path: self.root.display().to_string(),
            });
        }
        let mut listing = Listing::default();
        self.list_dir(&self.root, &mut listing)?;
        // A file under two names (hard links) is one file, listed under its first name.
        listing.files.sort_by(|a, b| a.key.cmp(&b.key));
        let mut seen = std::collections::BTreeMap::new();
        let mut linked = Vec::new();
        listing.files.retain(|f| {
            let Some(inode) = inode(f) else { return true };
            match seen.entry(inode) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(f.key.clone());
                    true
                }
                std::collections::btree_map::Entry::Occupied(o) => {
                    linked.push(Skipped {
                        name: f.identity.name.clone(),
                        reason: format!("a hard link to {}, listed under that name once", o.get()),
                    });
                    false
                }
            }
        });
        listing.skipped.extend(linked);
        Ok(listing)
    }

    /// The matching regular files under `dir`, at any depth (a writer may partition by date).
    /// A symbolic link to a regular file is followed (the file is named by its target); links
    /// to directories, pipes, sockets and devices are left out, each with a note.
    fn list_dir(&self, dir: &Path, listing: &mut Listing) -> Result<(), LandingError> {
        let pattern = &self.pattern;
        let failed = |source| LandingError::ListDir {
            path: dir.display().to_string(),
            source,
        };
        let entries = match std::fs::read_dir(dir) {
            // A directory that went meanwhile holds nothing now.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => other.map_err(failed)?,
        };
        for entry in entries {
            let entry = entry.map_err(failed)?;
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let key = self.key(&path);
            if kind.is_dir() {
                if !self.wholly_before(&key) {
                    self.list_dir(&path, listing)?;
                }
                continue;
            }
            if self.after.as_ref().is_some_and(|after| key <= *after) {
                continue;
            }
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            // A symbolic link is never followed, whatever it names: it may lead back up (a
            // loop), nowhere, or into a store.
            if kind.is_symlink() {
                listing.skipped.push(Skipped {
                    name: path.display().to_string(),
                    reason: "a symbolic link: only regular files are loaded".into(),
                });
                continue;
            }
            if !pattern.matches(&name) {
                listing.unmatched += 1;
                continue;
            }
            if !kind.is_file() {
                listing.skipped.push(Skipped {
                    name: path.display().to_string(),
                    reason: not_regular(&kind),
                });
                continue;
            }
            if let Some(landed) = landed_local(&path, key) {
                listing.files.push(landed);
            }
        }
        Ok(())
    }

    /// `path`'s name below the root, `/`-separated.
    fn key(&self, path: &Path) -> String {
        let relative = path.strip_prefix(&self.root).unwrap_or(path);
        let parts: Vec<String> = (relative.components())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    }

    /// Whether every key below the directory `key` sorts at or before the cursor: its keys
    /// all start `key/`, and the cursor sorts after every such string without starting so.
    fn wholly_before(&self, key: &str) -> bool {
        let Some(after) = &self.after else {
            return false;
        };
        let dir = format!("{key}/");
        after.as_str() > dir.as_str() && !after.starts_with(&dir)
    }
}

/// The device and inode of a local landed file (`None` when it went).
fn inode(f: &Landed) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let Location::Local(path) = &f.location else {
        return None;
    };
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// A local file as landed, or `None` when it went between the listing and this look.
fn landed_local(path: &Path, key: String) -> Option<Landed> {
    let identity = ravel_loader::input_files(std::slice::from_ref(&path.to_path_buf())).ok()?;
    let identity = identity.into_iter().next().expect("one path, one identity");
    // The identity's version is the modification time in nanoseconds: no second stat.
    let nanos = identity.version.parse::<u64>().unwrap_or(0);
    let landed = UNIX_EPOCH + Duration::from_nanos(nanos);
    let location = Location::Local(path.to_path_buf());
    Some(Landed {
        identity,
        key,
        landed,
        location,
    })
}

impl Landing {
    async fn list_store(
        &self,
        store: &Store,
        after: Option<&str>,
    ) -> Result<Listing, LandingError> {
        let objects = store.object_store();
        let listed = match after {
            // S3's StartAfter: the listing begins past the cursor.
            Some(after) => objects.list_with_offset(None, &object_store::path::Path::from(after)),
            None => objects.list(None),
        };
        let listed: Vec<object_store::ObjectMeta> =
            listed
                .try_collect()
                .await
                .map_err(|source| LandingError::List {
                    url: store.location().to_string(),
                    source,
                })?;
        let mut found = Listing::default();
        for meta in listed {
            let Some(name) = meta.location.filename() else {
                continue;
            };
            if !self.pattern.matches(name) {
                found.unmatched += 1;
                continue;
            }
            let landed = SystemTime::from(meta.last_modified);
            let version = meta
                .e_tag
                .clone()
                .unwrap_or_else(|| nanos(landed).to_string());
            found.files.push(Landed {
                key: meta.location.to_string(),
                identity: InputFile {
                    name: format!("{}/{}", store.location(), meta.location),
                    size: meta.size,
                    version,
                    modified_ms: Some(meta.last_modified.timestamp_millis()),
                },
                landed,
                location: Location::Object {
                    key: meta.location,
                    etag: meta.e_tag,
                },
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
                (Location::Object { key, etag }, Source::Store(store)) => {
                    let name = key.filename().unwrap_or("object");
                    let path = scratch.join(format!("{i:06}-{name}"));
                    copy_object(store, key, etag.clone(), &path)
                        .await
                        .map_err(|source| LandingError::Fetch {
                            name: f.identity.name.clone(),
                            path: path.display().to_string(),
                            source,
                        })?;
                    paths.push(path);
                }
                (Location::Object { .. }, Source::Local(_)) => {
                    unreachable!("objects are listed from a store only")
                }
            }
        }
        Ok(paths)
    }
}

impl Landing {
    /// Does what `after` says with `f`, which a version consumed: nothing, delete it, or move
    /// it (to the same name below `to` as below the landing prefix). A file gone already is
    /// done with.
    pub async fn dispose(&self, f: &Landed, after: &AfterLoad) -> Result<(), LandingError> {
        let (action, done) = match after {
            AfterLoad::Keep => return Ok(()),
            AfterLoad::Delete => ("deleting", self.delete(f).await),
            AfterLoad::Move(to) => ("moving", self.move_to(f, to).await),
        };
        done.map_err(|source| LandingError::AfterLoad {
            action,
            name: f.identity.name.clone(),
            source,
        })
    }

    async fn delete(&self, f: &Landed) -> Result<(), BoxError> {
        match (&f.location, &self.source) {
            (Location::Local(path), _) => match std::fs::remove_file(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                done => Ok(done?),
            },
            (Location::Object { key, .. }, Source::Store(store)) => {
                match object_store::ObjectStoreExt::delete(store.object_store(), key).await {
                    Err(object_store::Error::NotFound { .. }) => Ok(()),
                    done => Ok(done?),
                }
            }
            (Location::Object { .. }, Source::Local(_)) => unreachable!("objects come from stores"),
        }
    }

    async fn move_to(&self, f: &Landed, to: &str) -> Result<(), BoxError> {
        match (&f.location, &self.source) {
            (Location::Local(path), Source::Local(root)) => {
                let relative = path.strip_prefix(root).unwrap_or(path);
                let target = Path::new(to).join(relative);
                move_local(path, &target)
            }
            (Location::Object { key, etag }, Source::Store(store)) => {
                let target = Store::open(to)?;
                copy_between(store, &target, key, etag.clone()).await?;
                self.delete(f).await
            }
            _ => unreachable!("local files come from directories, objects from stores"),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Renames `from` to `to` (its directories made), or copies and deletes it across file
/// systems. A file gone already was moved by an earlier try.
fn move_local(from: &Path, to: &Path) -> Result<(), BoxError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            std::fs::copy(from, to)?;
            Ok(std::fs::remove_file(from)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Copies the object `key` of `from`, as listed (`etag`), to the same key of `to`.
async fn copy_between(
    from: &Store,
    to: &Store,
    key: &object_store::path::Path,
    etag: Option<String>,
) -> Result<(), BoxError> {
    use tokio::io::AsyncWriteExt;
    let options = object_store::GetOptions {
        if_match: etag,
        ..Default::default()
    };
    let got = match from.object_store().get_opts(key, options).await {
        // Gone: an earlier try moved it.
        Err(object_store::Error::NotFound { .. }) => return Ok(()),
        got => got?,
    };
    let mut body = got.into_stream();
    let mut out = object_store::buffered::BufWriter::new(to.object_store().clone(), key.clone());
    while let Some(chunk) = body.try_next().await? {
        out.write_all(&chunk).await?;
    }
    out.shutdown().await?;
    Ok(())
}

/// The input format a file name gives, Parquet unless it ends in `.tsv`.
pub fn format_of(name: &str) -> InputFormat {
    InputFormat::from_path(Path::new(name)).unwrap_or(InputFormat::Parquet)
}

/// Copies the object `key` as it was listed (`etag`: a changed object fails the copy; the
/// next listing names its new content) to the local file `to`.
async fn copy_object(
    store: &Store,
    key: &object_store::path::Path,
    etag: Option<String>,
    to: &Path,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use tokio::io::AsyncWriteExt;
    let options = object_store::GetOptions {
        if_match: etag,
        ..Default::default()
    };
    let got = store.object_store().get_opts(key, options).await?;
    let mut body = got.into_stream();
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
