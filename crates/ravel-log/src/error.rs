//! Why the log could not be read or written.

/// How a manifest disagrees with the log that names its objects (see
/// [`LogError::ManifestMismatch`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Mismatch {
    #[error("has {objects} objects, the log names position {position}")]
    NoPosition { objects: usize, position: usize },
    #[error("lists {object} with {listed} bytes, the log with {logged}")]
    Size {
        object: String,
        listed: u64,
        logged: u64,
    },
    #[error("lists {object} at position {position}, which the log names for another object")]
    OtherObject { object: String, position: usize },
}

/// Why a version could not be read or committed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    #[error("{what} {key}")]
    Store {
        what: &'static str,
        key: String,
        #[source]
        source: object_store::Error,
    },
    #[error("log entry {key} is not valid at line {line}")]
    Parse {
        key: String,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the table's log has no version {missing} (every version from 0, or from the checkpoint the log starts at when its window cleaned the entries before it, to {newest} must be there)"
    )]
    Gap { missing: u64, newest: u64 },
    #[error("the table has no version {0}")]
    NoSuchVersion(u64),
    /// The log window (`delta.logRetentionDuration`) cleaned the entries of the version.
    #[error(
        "version {version} can no longer be read: the table's log window (delta.logRetentionDuration) cleaned its log entries; the oldest version still readable is {oldest}"
    )]
    Cleaned { version: u64, oldest: u64 },
    #[error(
        "the table's log lost version {version}: its checksum file is there and its entry is not (deleted?); nothing is read or written until the entry is restored (a backup, the store's object versions)"
    )]
    LostEntry { version: u64 },
    /// A checksum file disagrees with the log, and nothing tells that the file is what is
    /// wrong ([`crate::Culprit`]).
    #[error(
        "{0}; nothing is read or written until that is resolved: restore the lost entry (a backup, the store's object versions), or delete the checksum file if the log is intact"
    )]
    ChecksumDisagrees(Box<crate::ChecksumDisagreement>),
    #[error("version {version} adds {path}, which names no ravel-load manifest ({problem})")]
    ForeignAdd {
        version: u64,
        path: String,
        problem: String,
    },
    #[error(
        "version {version} of the table needs table features this build does not support for {}: {}; nothing was {}",
        if *writing { "writing" } else { "reading" },
        features.join(", "),
        if *writing { "written" } else { "read" }
    )]
    UnsupportedFeatures {
        version: u64,
        features: Vec<String>,
        writing: bool,
    },
    #[error("manifest {key}")]
    Manifest {
        key: String,
        #[source]
        source: ravel_manifest::ManifestError,
    },
    #[error("manifest {key}: is missing, and the log names it")]
    ManifestMissing { key: String },
    /// A manifest does not list an object as the log names it.
    #[error("manifest {key} {problem}")]
    ManifestMismatch { key: String, problem: Mismatch },
    #[error(
        "the table changed while this compaction ran: {path} was removed by version {version}; this step published nothing (steps committed before it stand), rerun the compaction"
    )]
    TableChanged { path: String, version: u64 },
    #[error(
        "object {key}, which another Delta writer added partitioned by {columns:?} in version {version}, would be left behind: this commit's version ends the table's partitioning, so Delta readers would no longer read those columns of it; nothing was published, run the command again (it takes the partitioned objects in first)"
    )]
    PartitionedLeftBehind {
        /// Path inside the store.
        key: String,
        version: u64,
        columns: Vec<String>,
    },
    #[error(
        "version {version} partitioned the table by {columns:?} while this commit ran: this commit's version would end that partitioning; nothing was published, run the command again"
    )]
    PartitionedMeanwhile { version: u64, columns: Vec<String> },
    #[error(
        "object {path} is in the table already (version {version}), listed by manifest {manifest}: committing it again would count its rows twice, so nothing was published; load only rows that manifest does not hold, or check the table with verify"
    )]
    AlreadyLive {
        path: String,
        version: u64,
        manifest: String,
    },
    #[error(
        "input {input} was loaded by version {version}, and {new} other input(s) of this load were not: loading them together would count its rows twice, so nothing was published; load the other inputs alone, or pass --reload to load every input again"
    )]
    PartlyConsumed {
        input: String,
        version: u64,
        new: usize,
    },
    #[error(
        "input {input} is not the file version {version} loaded under that name (its size or modification time differs: rewritten, touched or copied over since); a name is loaded once, so nothing was published; pass --reload to load it as well (the rows version {version} loaded stay)"
    )]
    NameConsumed { input: String, version: u64 },
    #[error(
        "input {input} {changed}, before {limit}, and the table is older than that: a version may have loaded it and forgotten its identity since, so nothing was published; pass --reload to load it (a new table takes old files: the window only forgets loads it saw)"
    )]
    BeyondInputsWindow {
        input: String,
        /// When it last changed: `last changed 2 days ago`.
        changed: String,
        /// What it is older than: the inputs window, or the moment an earlier, shorter one
        /// began to forget.
        limit: String,
    },
    #[error(
        "writing log entry {key} failed ({write}) and reading it back failed too ({read}): the commit may or may not have happened; run the same command again"
    )]
    CommitUnknown {
        key: String,
        write: Box<object_store::Error>,
        read: Box<object_store::Error>,
    },
    #[error("checkpoint: {what}")]
    Checkpoint {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("gave up after {0} commits by others landed first")]
    TooManyConflicts(usize),
}

impl LogError {
    /// The commit lost to a concurrent change it cannot be replayed over.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            LogError::TableChanged { .. }
                | LogError::PartitionedLeftBehind { .. }
                | LogError::PartitionedMeanwhile { .. }
        )
    }

    /// The log is damaged (an entry lost, a checksum that disagrees with the replay): reads
    /// and writes refuse it, `verify` reports it, `gc` deletes nothing.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            LogError::LostEntry { .. } | LogError::Gap { .. } | LogError::ChecksumDisagrees { .. }
        )
    }

    /// The user asked for something the table refuses (a load of inputs some of which a
    /// version consumed already, of a file changed under a name a version consumed, or of a
    /// file older than the inputs window).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            LogError::PartlyConsumed { .. }
                | LogError::NameConsumed { .. }
                | LogError::BeyondInputsWindow { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_that_does_not_read_is_the_source() {
        let err = LogError::Manifest {
            key: "t/_ravel/manifests/a.json".into(),
            source: ravel_manifest::ManifestError::Parse {
                key: "t/_ravel/manifests/a.json".into(),
                source: serde_json::from_str::<u8>("x").unwrap_err(),
            },
        };
        let source = std::error::Error::source(&err).expect("a source");
        assert!(source.is::<ravel_manifest::ManifestError>());
        assert_eq!(err.to_string(), "manifest t/_ravel/manifests/a.json");
        assert_eq!(
            ravel_store::ErrorChain::new(&err).to_string(),
            format!(
                "manifest t/_ravel/manifests/a.json: {source}: {}",
                std::error::Error::source(source).unwrap()
            )
        );
    }
}
