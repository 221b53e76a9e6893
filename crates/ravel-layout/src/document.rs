//! The layout document: a table's clustering key, stream and time columns, and Bloom scope.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use arrow::datatypes::{DataType, Schema};
use serde::{Deserialize, Serialize};

use crate::{BucketWidth, LayoutError, Maintenance, Retention};

/// The document format this build writes and reads.
pub const LAYOUT_FORMAT: u32 = 1;

/// The layout settings of one table, stored beside its data and applied before a load.
///
/// With a clustering key, rows sort by `(stream, time.div_euclid(bucket_width), key…, time)`;
/// without one the table is unclustered and rows keep their arrival order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    /// Document format version ([`LAYOUT_FORMAT`]).
    pub format: u32,
    /// Incremented by every stored change; 0 means never stored (the defaults).
    pub generation: u64,
    /// The stream column, sorted first; `None` (the default) for no stream.
    pub stream: Option<String>,
    /// The time column, bucketed after the stream and sorted last; a clustering key needs
    /// one. `None` (the default) names none.
    pub time: Option<String>,
    /// The clustering key and bucket width; `None` keeps arrival order.
    pub clustering_key: Option<ClusteringKey>,
    /// Which columns get Bloom filters.
    pub bloom: Bloom,
    /// What writers do after each load to keep the table clustered as it grows; absent from
    /// the document while it has the defaults.
    #[serde(default, skip_serializing_if = "Maintenance::is_default")]
    pub maintenance: Maintenance,
    /// Other Delta writers are fenced off: the table's protocol lists a writer feature
    /// ([`FENCE_PROPERTY`]'s) that writers which do not know it refuse. Off by default: other
    /// engines may append to or optimize the table, and ravel-load takes their objects back in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fence: bool,
    /// How long removed objects, consumed inputs' identities and covered log entries are
    /// kept; absent from the document while it has the defaults.
    #[serde(default, skip_serializing_if = "Retention::is_default")]
    pub retention: Retention,
}

/// The table property that records [`Layout::fence`] in the table's Delta metadata (the
/// log's constant: the log reads it back).
pub use ravel_log::FENCE_PROPERTY;

/// The key columns sorted after the stream and the time bucket, and the bucket width.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusteringKey {
    pub columns: Vec<String>,
    pub bucket_width: BucketWidth,
}

/// Bloom filter settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bloom {
    pub scope: BloomScope,
    /// Target false-positive rate of each filter.
    pub fpp: f64,
}

/// Which columns carry a Bloom filter; every other column has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BloomScope {
    /// No column.
    None,
    /// Every string or binary column.
    Text,
    /// Every column.
    All,
    /// These columns.
    Columns(Vec<String>),
}

impl BloomScope {
    /// The names of the columns of `schema` this scope covers, in schema order.
    pub fn columns<'a>(&self, schema: &'a Schema) -> Vec<&'a str> {
        schema
            .fields()
            .iter()
            .filter(|f| match self {
                BloomScope::None => false,
                BloomScope::Text => is_text(f.data_type()),
                BloomScope::All => true,
                BloomScope::Columns(cols) => cols.iter().any(|c| c == f.name()),
            })
            .map(|f| f.name().as_str())
            .collect()
    }
}

impl FromStr for BloomScope {
    type Err = LayoutError;

    /// `none`, `text`, `all`, or a comma-separated list of columns.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "none" => return Ok(BloomScope::None),
            "text" => return Ok(BloomScope::Text),
            "all" => return Ok(BloomScope::All),
            _ => {}
        }
        match t {
            "" => Err(LayoutError::BadBloomScope(s.to_string())),
            list => {
                let cols: Vec<String> = list.split(',').map(|c| c.trim().to_string()).collect();
                if cols.iter().any(|c| c.is_empty()) {
                    return Err(LayoutError::BadBloomScope(s.to_string()));
                }
                Ok(BloomScope::Columns(cols))
            }
        }
    }
}

impl fmt::Display for BloomScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BloomScope::None => f.write_str("none"),
            BloomScope::Text => f.write_str("text"),
            BloomScope::All => f.write_str("all"),
            BloomScope::Columns(c) => f.write_str(&c.join(",")),
        }
    }
}

/// True for string and binary types (the `text` Bloom scope): the types a per-object Bloom
/// filter of the load's sidecar can hold.
pub fn is_text(dt: &DataType) -> bool {
    ravel_bloom::supported(dt)
}

/// True for the types the clustering order can sort.
pub fn is_orderable(dt: &DataType) -> bool {
    dt.is_integer()
        || dt.is_floating()
        || is_text(dt)
        || matches!(
            dt,
            DataType::Boolean | DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)
        )
}

/// True for the types a time column may have: timestamps, dates, integers of unix seconds.
pub fn is_time_type(dt: &DataType) -> bool {
    dt.is_integer()
        || matches!(
            dt,
            DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64
        )
}

impl Default for Layout {
    /// The layout of a table never configured, whatever its columns: no stream, no time
    /// column, no clustering key (arrival order), Bloom filters on every text column (a rule,
    /// not names) at 1 % false positives.
    fn default() -> Self {
        Layout {
            format: LAYOUT_FORMAT,
            generation: 0,
            stream: None,
            time: None,
            clustering_key: None,
            bloom: Bloom {
                scope: BloomScope::Text,
                fpp: 0.01,
            },
            maintenance: Maintenance::default(),
            fence: false,
            retention: Retention::default(),
        }
    }
}

impl Layout {
    /// The same settings, ignoring the generation.
    pub fn same_settings(&self, other: &Layout) -> bool {
        Layout {
            generation: 0,
            ..self.clone()
        } == Layout {
            generation: 0,
            ..other.clone()
        }
    }

    /// The sort key as names, in order: stream, `<time> div <width>`, key…, time. Empty
    /// without a clustering key. Manifests and object metadata record it.
    pub fn sort_key_names(&self) -> Vec<String> {
        let (Some(k), Some(time)) = (&self.clustering_key, &self.time) else {
            return Vec::new();
        };
        let mut v: Vec<String> = self.stream.iter().cloned().collect();
        v.push(format!("{time} div {}", k.bucket_width));
        v.extend(k.columns.iter().cloned());
        v.push(time.clone());
        v
    }

    /// The layout as table properties (`ravel.`-prefixed names, string values), which the
    /// table's Delta metadata records for engines that read it. Unset parts are absent.
    pub fn table_properties(&self) -> std::collections::BTreeMap<String, String> {
        let mut p = std::collections::BTreeMap::new();
        p.insert(
            "ravel.layout.generation".into(),
            self.generation.to_string(),
        );
        if let Some(s) = &self.stream {
            p.insert("ravel.layout.stream".into(), s.clone());
        }
        if let Some(t) = &self.time {
            p.insert("ravel.layout.time".into(), t.clone());
        }
        if let Some(k) = &self.clustering_key {
            p.insert("ravel.layout.key".into(), k.columns.join(","));
            p.insert("ravel.layout.bucket".into(), k.bucket_width.to_string());
        }
        p.insert(
            "ravel.layout.bloomScope".into(),
            self.bloom.scope.to_string(),
        );
        let sort_key = self.sort_key_names();
        if !sort_key.is_empty() {
            p.insert("ravel.layout.sortKey".into(), sort_key.join(", "));
        }
        if self.fence {
            p.insert(FENCE_PROPERTY.into(), "true".into());
        }
        for r in self.retention.properties() {
            p.insert(r.name.into(), r.value);
        }
        p
    }

    /// Every sort column with its role, in sort order (stream, key…, time).
    pub fn sort_columns(&self) -> Vec<(&'static str, &str)> {
        let mut cols = Vec::new();
        if let Some(s) = &self.stream {
            cols.push(("stream", s.as_str()));
        }
        if let Some(k) = &self.clustering_key {
            cols.extend(k.columns.iter().map(|c| ("clustering key", c.as_str())));
        }
        if let Some(t) = &self.time {
            cols.push(("time", t.as_str()));
        }
        cols
    }

    /// Checks what can be checked without the table's schema: 1–4 key columns, each named once,
    /// a time column with a key, no column in two roles, a positive bucket width, a
    /// false-positive rate in (0, 1).
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.format != LAYOUT_FORMAT {
            return Err(LayoutError::UnsupportedFormat {
                path: "layout document".into(),
                format: self.format,
            });
        }
        for (role, name) in self.sort_columns() {
            if name.is_empty() {
                return Err(LayoutError::EmptyColumnName { role });
            }
        }
        if let Some(k) = &self.clustering_key {
            if self.time.is_none() {
                return Err(LayoutError::KeyWithoutTime);
            }
            if k.columns.is_empty() || k.columns.len() > 4 {
                return Err(LayoutError::KeyColumnCount(k.columns.len()));
            }
            let mut seen = HashSet::new();
            for c in &k.columns {
                if !seen.insert(c.as_str()) {
                    return Err(LayoutError::DuplicateColumn {
                        column: c.clone(),
                        role: "clustering key",
                    });
                }
            }
            BucketWidth::from_seconds(k.bucket_width.seconds())?;
        }
        let roles = self.sort_columns();
        for (i, (role_a, a)) in roles.iter().enumerate() {
            if let Some((role_b, _)) = roles[i + 1..].iter().find(|(_, b)| b == a)
                && role_a != role_b
            {
                return Err(LayoutError::RoleClash {
                    column: a.to_string(),
                    first: role_a,
                    second: role_b,
                });
            }
        }
        if !(self.bloom.fpp > 0.0 && self.bloom.fpp < 1.0) {
            return Err(LayoutError::BadFpp(self.bloom.fpp));
        }
        self.maintenance.validate()?;
        self.retention.validate()?;
        if let BloomScope::Columns(cols) = &self.bloom.scope {
            if cols.is_empty() {
                return Err(LayoutError::BadBloomScope(String::new()));
            }
            let mut seen = HashSet::new();
            for c in cols {
                if c.is_empty() {
                    return Err(LayoutError::EmptyColumnName {
                        role: "Bloom scope",
                    });
                }
                if !seen.insert(c.as_str()) {
                    return Err(LayoutError::DuplicateColumn {
                        column: c.clone(),
                        role: "Bloom scope",
                    });
                }
            }
        }
        Ok(())
    }

    /// [`Layout::validate`], then checks the columns the layout uses against the table's
    /// schema: with a clustering key, the stream, key and time columns must exist, the sort
    /// columns must have an order and the time column must be temporal or an integer; Bloom
    /// scope columns must exist. Without a clustering key rows keep arrival order, so the stream
    /// and time columns are not in use and not checked here (see [`Layout::check_column`]).
    pub fn validate_for(&self, schema: &Schema) -> Result<(), LayoutError> {
        self.validate()?;
        if self.clustering_key.is_some() {
            for (role, column) in self.sort_columns() {
                check_column(role, column, schema)?;
            }
        }
        if let BloomScope::Columns(cols) = &self.bloom.scope {
            for c in cols {
                find(schema, "Bloom scope", c)?;
            }
        }
        Ok(())
    }

    /// [`Layout::validate_for`], and also checks the stream and time columns where they differ
    /// from `base`: a column the user names is checked even while no clustering key uses it.
    pub fn validate_change_for(&self, base: &Layout, schema: &Schema) -> Result<(), LayoutError> {
        self.validate_for(schema)?;
        if let Some(stream) = &self.stream
            && base.stream.as_ref() != Some(stream)
        {
            check_column("stream", stream, schema)?;
        }
        if let Some(time) = &self.time
            && base.time.as_ref() != Some(time)
        {
            check_column("time", time, schema)?;
        }
        Ok(())
    }
}

fn find<'a>(
    schema: &'a Schema,
    role: &'static str,
    column: &str,
) -> Result<&'a arrow::datatypes::Field, LayoutError> {
    schema
        .field_with_name(column)
        .map_err(|_| LayoutError::UnknownColumn {
            column: column.to_string(),
            role,
            available: column_list(schema),
        })
}

/// Checks one sort column of a role ("stream", "clustering key", "time") against a schema.
pub fn check_column(role: &'static str, column: &str, schema: &Schema) -> Result<(), LayoutError> {
    let field = find(schema, role, column)?;
    if role == "time" {
        if !is_time_type(field.data_type()) {
            return Err(LayoutError::BadTimeColumn {
                column: column.to_string(),
                data_type: field.data_type().clone(),
            });
        }
    } else if !is_orderable(field.data_type()) {
        return Err(LayoutError::Unorderable {
            column: column.to_string(),
            role,
            data_type: field.data_type().clone(),
        });
    }
    Ok(())
}

fn column_list(schema: &Schema) -> String {
    const SHOWN: usize = 12;
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!("{}, … ({} in all)", names[..SHOWN].join(", "), names.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{Field, TimeUnit};
    use std::sync::Arc;

    fn flights() -> Schema {
        Schema::new(vec![
            Field::new("carrier", DataType::Utf8, true),
            Field::new(
                "time_hour",
                DataType::Timestamp(TimeUnit::Second, None),
                true,
            ),
            Field::new("origin", DataType::Utf8, true),
            Field::new("dest", DataType::Utf8, true),
            Field::new("dep_delay", DataType::Float64, true),
            Field::new("flight", DataType::Int32, true),
            Field::new(
                "legs",
                DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
                true,
            ),
        ])
    }

    fn flights_layout() -> Layout {
        Layout {
            stream: Some("carrier".into()),
            time: Some("time_hour".into()),
            clustering_key: Some(ClusteringKey {
                columns: vec!["origin".into(), "dest".into()],
                bucket_width: "1d".parse().unwrap(),
            }),
            ..Layout::default()
        }
    }

    #[test]
    fn a_flights_layout_is_valid() {
        flights_layout().validate_for(&flights()).unwrap();
        assert_eq!(
            BloomScope::Text.columns(&flights()),
            vec!["carrier", "origin", "dest"]
        );
    }

    #[test]
    fn json_round_trip() {
        let mut l = flights_layout();
        l.bloom.scope = BloomScope::Columns(vec!["origin".into(), "dest".into()]);
        let json = serde_json::to_string_pretty(&l).unwrap();
        assert!(json.contains("\"bucket_width\": \"1d\""), "{json}");
        let back: Layout = serde_json::from_str(&json).unwrap();
        assert_eq!(back, l);
        let json = serde_json::to_string(&Layout::default()).unwrap();
        assert!(json.contains("\"scope\":\"text\""), "{json}");
        assert!(json.contains("\"clustering_key\":null"), "{json}");
        assert!(json.contains("\"time\":null"), "{json}");
        assert_eq!(
            serde_json::from_str::<Layout>(&json).unwrap(),
            Layout::default()
        );
    }

    /// The hits table's column names, from the reference fixture.
    fn hits_columns() -> Vec<&'static str> {
        include_str!("../../../fixtures/clickbench/hits-columns.tsv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| l.split('\t').nth(1).expect("position, name, type"))
            .collect()
    }

    #[test]
    fn the_default_names_no_column_of_any_dataset() {
        let hits = hits_columns();
        assert_eq!(hits.len(), 105);
        assert!(hits.contains(&"CounterID") && hits.contains(&"EventTime"));
        let l = Layout::default();
        let json = serde_json::to_string(&l).unwrap();
        for c in &hits {
            assert!(!json.contains(&format!("\"{c}\"")), "{c} in {json}");
        }
        assert!(l.sort_columns().is_empty());
        assert!(l.sort_key_names().is_empty());
        assert_eq!(l.bloom.scope, BloomScope::Text);
        // Valid for any table: a flights table takes it as it is.
        l.validate_for(&flights()).unwrap();
    }

    #[test]
    fn a_key_needs_a_time_column() {
        let l = Layout {
            time: None,
            ..flights_layout()
        };
        let err = l.validate().unwrap_err();
        assert!(matches!(err, LayoutError::KeyWithoutTime), "{err}");
        assert!(err.is_invalid_input());
        assert!(l.sort_key_names().is_empty());
    }

    #[test]
    fn structural_errors() {
        let mut l = flights_layout();
        l.clustering_key.as_mut().unwrap().columns = vec![];
        assert!(matches!(l.validate(), Err(LayoutError::KeyColumnCount(0))));
        l.clustering_key.as_mut().unwrap().columns = vec!["a", "b", "c", "d", "e"]
            .into_iter()
            .map(String::from)
            .collect();
        assert!(matches!(l.validate(), Err(LayoutError::KeyColumnCount(5))));
        l.clustering_key.as_mut().unwrap().columns = vec!["origin".into(), "origin".into()];
        let err = l.validate().unwrap_err();
        assert!(
            err.to_string()
                .contains("\"origin\" is named more than once"),
            "{err}"
        );

        let mut l = flights_layout();
        l.clustering_key.as_mut().unwrap().columns = vec!["carrier".into()];
        let err = l.validate().unwrap_err();
        assert!(matches!(err, LayoutError::RoleClash { .. }), "{err}");
        assert!(err.to_string().contains("stream"), "{err}");

        let mut l = flights_layout();
        l.bloom.fpp = 1.0;
        assert!(matches!(l.validate(), Err(LayoutError::BadFpp(_))));
        l.bloom.fpp = 0.0;
        assert!(matches!(l.validate(), Err(LayoutError::BadFpp(_))));
    }

    #[test]
    fn schema_errors_name_the_column() {
        let schema = flights();
        let mut l = flights_layout();
        l.clustering_key.as_mut().unwrap().columns = vec!["origin".into(), "nope".into()];
        let err = l.validate_for(&schema).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LayoutError::UnknownColumn { .. }));
        assert!(
            msg.contains("\"nope\"") && msg.contains("carrier, time_hour"),
            "{msg}"
        );

        let mut l = flights_layout();
        l.clustering_key.as_mut().unwrap().columns = vec!["legs".into()];
        let err = l.validate_for(&schema).unwrap_err();
        assert!(matches!(err, LayoutError::Unorderable { .. }), "{err}");
        assert!(err.to_string().contains("\"legs\""), "{err}");

        let mut l = flights_layout();
        l.time = Some("origin".into());
        l.clustering_key.as_mut().unwrap().columns = vec!["dest".into()];
        let err = l.validate_for(&schema).unwrap_err();
        assert!(matches!(err, LayoutError::BadTimeColumn { .. }), "{err}");

        let mut l = flights_layout();
        l.time = Some("dep_delay".into());
        assert!(matches!(
            l.validate_for(&schema),
            Err(LayoutError::BadTimeColumn { .. })
        ));
        // An integer time column (unix seconds) is accepted.
        l.time = Some("flight".into());
        l.validate_for(&schema).unwrap();

        let mut l = flights_layout();
        l.bloom.scope = "origin,missing".parse().unwrap();
        let err = l.validate_for(&schema).unwrap_err();
        assert!(
            err.to_string().contains("Bloom scope column \"missing\""),
            "{err}"
        );
    }

    #[test]
    fn bloom_scope_parses() {
        assert_eq!("text".parse::<BloomScope>().unwrap(), BloomScope::Text);
        assert_eq!("none".parse::<BloomScope>().unwrap(), BloomScope::None);
        assert_eq!("NONE".parse::<BloomScope>().unwrap(), BloomScope::None);
        assert_eq!(" Text ".parse::<BloomScope>().unwrap(), BloomScope::Text);
        assert_eq!(
            "URL, Title".parse::<BloomScope>().unwrap(),
            BloomScope::Columns(vec!["URL".into(), "Title".into()])
        );
        assert!("".parse::<BloomScope>().is_err());
        assert!("URL,,Title".parse::<BloomScope>().is_err());
    }
}
