//! The service's configuration: TOML, one `[[table]]` per table. Settings that belong to the
//! table (its layout, its maintenance policy) stay in the table's layout document.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Seconds between two looks at each landing prefix and log, by default.
pub const DEFAULT_POLL: Duration = Duration::from_secs(5);
/// Pending bytes that make a batch, by default.
pub const DEFAULT_BATCH_BYTES: u64 = 256 << 20;
/// Age of the oldest pending file that makes a batch however small, by default (the tier's
/// flush delay, as Ravel's loader uses).
pub const DEFAULT_BATCH_AGE: Duration = Duration::from_secs(60);
/// How long ago a landed file must have last changed to be taken at its first listing, by
/// default (younger files wait for a second listing that finds them unchanged).
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(10);
/// How often `gc` runs on a table, by default.
pub const DEFAULT_GC_INTERVAL: Duration = Duration::from_secs(3600);

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Time between two looks at each landing prefix and each table's log.
    #[serde(default = "default_poll", deserialize_with = "duration")]
    pub poll_interval: Duration,
    #[serde(rename = "table", default)]
    pub tables: Vec<TableConfig>,
}

/// One `[[table]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableConfig {
    /// The store, as `--store` takes it: a local directory or `s3://bucket/prefix`.
    pub store: String,
    /// The table.
    pub name: String,
    /// Where files land: a local directory or an `s3://bucket/prefix`.
    pub landing: String,
    /// File names to load (a glob on the name, not the directory): `*.parquet`, `*.tsv`.
    pub pattern: String,
    /// Pending bytes that make a batch.
    #[serde(default = "default_batch_bytes")]
    pub batch_bytes: u64,
    /// Age (since it landed) of the oldest pending file that makes a batch however small.
    #[serde(default = "default_batch_age", deserialize_with = "duration")]
    pub batch_age: Duration,
    /// A landed file is taken once two listings in a row find it unchanged, or once it last
    /// changed this long ago.
    #[serde(default = "default_settle", deserialize_with = "duration")]
    pub settle: Duration,
    /// What becomes of a landed file once a version consumed it: `"keep"` (the default),
    /// `"delete"`, or `"move:PREFIX"` (a local directory or `s3://bucket/prefix` where it goes,
    /// under the name it had below the landing prefix).
    #[serde(default, deserialize_with = "after_load")]
    pub after_load: AfterLoad,
    /// List only the keys after the table's landing cursor, which trails the keys versions
    /// consumed by this lookback (for writers whose keys sort by arrival; see
    /// docs/service.md). Absent: every poll lists the whole prefix.
    #[serde(default, deserialize_with = "some_duration")]
    pub cursor_lookback: Option<Duration>,
    /// Publish each batch globally sorted (`load --compact`).
    #[serde(default)]
    pub sorted: bool,
    /// How often `gc` runs on the table; `"0s"` never.
    #[serde(default = "default_gc_interval", deserialize_with = "duration")]
    pub gc_interval: Duration,
    /// How old an unreferenced object must be before `gc` deletes it; by default the table's
    /// files retention (its layout's `retention`).
    #[serde(default, deserialize_with = "some_duration")]
    pub gc_retention: Option<Duration>,
}

/// Why a configuration cannot be used. The message names the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("reading the configuration {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("configuration {path}: {message}")]
    Parse { path: String, message: String },
    #[error("configuration {path}: table {index} ({name:?}): key `{key}` {problem}")]
    Invalid {
        path: String,
        index: usize,
        name: String,
        key: &'static str,
        problem: String,
    },
    #[error("configuration {path}: {problem}")]
    Service { path: String, problem: String },
}

impl Config {
    /// Reads and checks `path`.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        Config::parse(&text, &shown)
    }

    /// Parses and checks `text`; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_string(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        config.check(path)?;
        Ok(config)
    }

    fn check(&self, path: &str) -> Result<(), ConfigError> {
        let service = |problem: String| ConfigError::Service {
            path: path.to_string(),
            problem,
        };
        if self.tables.is_empty() {
            return Err(service("no [[table]]: nothing to serve".into()));
        }
        if self.poll_interval.is_zero() {
            return Err(service("key `poll_interval` must be above 0s".into()));
        }
        for (i, t) in self.tables.iter().enumerate() {
            t.check().map_err(|bad| ConfigError::Invalid {
                path: path.to_string(),
                index: i + 1,
                name: t.name.clone(),
                key: bad.key,
                problem: bad.problem,
            })?;
            // Status and metrics name a table by its name alone.
            if self.tables[..i].iter().any(|o| o.name == t.name) {
                return Err(service(format!(
                    "table name {:?} is configured twice (names must differ, whatever their stores)",
                    t.name
                )));
            }
        }
        if let Some(bad) = crate::overlap::first_bad_move(&self.tables) {
            let t = &self.tables[bad.table - 1];
            return Err(service(format!(
                "table {} ({:?}): after_load moves loaded files to {:?}, which {}: keep it apart from every landing prefix and store",
                bad.table, t.name, bad.to, bad.how
            )));
        }
        if let Some(o) = crate::overlap::first_overlap(&self.tables) {
            let (l, s) = (
                &self.tables[o.landing_table - 1],
                &self.tables[o.store_table - 1],
            );
            return Err(service(format!(
                "the landing {:?} of table {} ({:?}) {} the store {:?} of table {} ({:?}): the service would load the tables' own objects back; keep every landing prefix apart from every store",
                l.landing, o.landing_table, l.name, o.how, s.store, o.store_table, s.name
            )));
        }
        Ok(())
    }
}

impl TableConfig {
    /// The first key whose value cannot be used, and why.
    fn check(&self) -> Result<(), BadKey> {
        let bad = |key, problem: String| Err(BadKey { key, problem });
        if let Err(e) = ravel_store::TablePaths::new(&self.name) {
            return bad("name", e.to_string());
        }
        if self.landing.trim().is_empty() {
            return bad("landing", "is empty".into());
        }
        if let Err(e) = glob::Pattern::new(&self.pattern) {
            return bad("pattern", format!("is not a glob: {e}"));
        }
        if self.pattern.contains('/') {
            return bad("pattern", "matches file names: it holds no '/'".into());
        }
        if self.batch_bytes == 0 {
            return bad("batch_bytes", "must be above 0".into());
        }
        Ok(())
    }
}

/// A key of a `[[table]]` whose value cannot be used.
struct BadKey {
    key: &'static str,
    problem: String,
}

fn default_poll() -> Duration {
    DEFAULT_POLL
}
fn default_batch_bytes() -> u64 {
    DEFAULT_BATCH_BYTES
}
fn default_batch_age() -> Duration {
    DEFAULT_BATCH_AGE
}
fn default_settle() -> Duration {
    DEFAULT_SETTLE
}
fn default_gc_interval() -> Duration {
    DEFAULT_GC_INTERVAL
}

fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// What becomes of a landed file once a version consumed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AfterLoad {
    /// Left where it landed (every poll lists it again).
    #[default]
    Keep,
    /// Deleted.
    Delete,
    /// Moved to this local directory or `s3://bucket/prefix`.
    Move(String),
}

fn after_load<'de, D: Deserializer<'de>>(d: D) -> Result<AfterLoad, D::Error> {
    let text = String::deserialize(d)?;
    match text.as_str() {
        "keep" => Ok(AfterLoad::Keep),
        "delete" => Ok(AfterLoad::Delete),
        other => match other.strip_prefix("move:") {
            Some(to) if !to.trim().is_empty() => Ok(AfterLoad::Move(to.trim().to_string())),
            _ => Err(serde::de::Error::custom(format!(
                "{text:?} is not \"keep\", \"delete\" or \"move:PREFIX\""
            ))),
        },
    }
}

/// A duration written as humans do: `"90s"`, `"5m"`, `"1h 30m"`, `"500ms"`.
fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "{text:?} is not a duration such as \"90s\" or \"5m\" ({e})"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        [[table]]
        store = "./ravel-store"
        name = "hits"
        landing = "./landing/hits"
        pattern = "*.parquet"
    "#;

    #[test]
    fn the_four_keys_are_enough_and_the_rest_take_their_defaults() {
        let c = Config::parse(MINIMAL, "serve.toml").unwrap();
        assert_eq!(c.poll_interval, DEFAULT_POLL);
        let t = &c.tables[0];
        assert_eq!((t.name.as_str(), t.pattern.as_str()), ("hits", "*.parquet"));
        assert_eq!(t.batch_bytes, DEFAULT_BATCH_BYTES);
        assert_eq!(t.batch_age, DEFAULT_BATCH_AGE);
        assert_eq!(t.gc_retention, None);
        assert!(!t.sorted);
    }

    #[test]
    fn a_misspelt_or_missing_or_bad_key_is_named() {
        let misspelt = MINIMAL.replace("pattern", "patern");
        let e = Config::parse(&misspelt, "serve.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("patern"), "{e}");
        let missing = MINIMAL.replace("landing = \"./landing/hits\"", "");
        let e = Config::parse(&missing, "serve.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("landing"), "{e}");
        let bad = format!("{MINIMAL}batch_age = \"soon\"\n");
        let e = Config::parse(&bad, "serve.toml").unwrap_err().to_string();
        assert!(e.contains("batch_age") && e.contains("soon"), "{e}");
        let zero = format!("{MINIMAL}batch_bytes = 0\n");
        let e = Config::parse(&zero, "serve.toml").unwrap_err().to_string();
        assert!(e.contains("`batch_bytes`") && e.contains("table 1"), "{e}");
        let twice = format!("{MINIMAL}{MINIMAL}");
        let e = Config::parse(&twice, "serve.toml").unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
    }
}
