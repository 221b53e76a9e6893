//! Landing prefixes kept apart from stores. A landing prefix that is a store, holds one or lies
//! inside one would list the tables' own objects as landed files, and the service would load
//! its own output back, again and again.

use std::path::{Component, Path, PathBuf};

use ravel_store::StoreLocation;

use crate::config::TableConfig;

/// A place files live: a local directory, or a bucket and the key components of a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    Local(PathBuf),
    S3 { bucket: String, keys: Vec<String> },
}

impl Place {
    /// Where `url` points, local paths made absolute with their symbolic links resolved as far
    /// as they exist. `None` when the URL does not parse (the table's own check says why).
    fn of(url: &str) -> Option<Place> {
        match StoreLocation::parse(url).ok()? {
            StoreLocation::Local(dir) => Some(Place::Local(resolved(&dir))),
            StoreLocation::S3 { bucket, prefix } => Some(Place::S3 {
                bucket,
                keys: prefix
                    .split('/')
                    .filter(|k| !k.is_empty())
                    .map(str::to_string)
                    .collect(),
            }),
        }
    }

    /// Whether `self` is `outer` or lies inside it.
    fn within(&self, outer: &Place) -> bool {
        match (self, outer) {
            (Place::Local(inner), Place::Local(outer)) => inner.starts_with(outer),
            (
                Place::S3 { bucket, keys },
                Place::S3 {
                    bucket: outer_bucket,
                    keys: outer_keys,
                },
            ) => bucket == outer_bucket && keys.starts_with(outer_keys),
            _ => false,
        }
    }
}

/// A landing prefix that overlaps a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overlap {
    /// 1-based positions of the table whose landing it is and of the table whose store it is.
    pub landing_table: usize,
    pub store_table: usize,
    pub how: &'static str,
}

/// The first landing prefix (of any table) that is, holds or lies inside a store (of any
/// table).
pub(crate) fn first_overlap(tables: &[TableConfig]) -> Option<Overlap> {
    let stores: Vec<Option<Place>> = tables.iter().map(|t| Place::of(&t.store)).collect();
    for (i, t) in tables.iter().enumerate() {
        let Some(landing) = Place::of(&t.landing) else {
            continue;
        };
        for (j, store) in stores.iter().enumerate() {
            let Some(store) = store else { continue };
            let how = match (landing.within(store), store.within(&landing)) {
                (true, true) => "is",
                (true, false) => "lies inside",
                (false, true) => "holds",
                (false, false) => continue,
            };
            return Some(Overlap {
                landing_table: i + 1,
                store_table: j + 1,
                how,
            });
        }
    }
    None
}

/// A table whose `after_load` moves files into a landing prefix (they would be listed and
/// loaded again) or a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadMove {
    pub table: usize,
    pub to: String,
    pub how: String,
}

/// The first `after_load = "move:…"` whose target overlaps a landing prefix or a store.
pub(crate) fn first_bad_move(tables: &[TableConfig]) -> Option<BadMove> {
    let places = |url: fn(&TableConfig) -> &str, what: &'static str| {
        tables
            .iter()
            .enumerate()
            .filter_map(move |(j, t)| Some((Place::of(url(t))?, what, j + 1)))
    };
    let others: Vec<(Place, &str, usize)> = places(|t| &t.landing, "landing prefix")
        .chain(places(|t| &t.store, "store"))
        .collect();
    for (i, t) in tables.iter().enumerate() {
        let crate::config::AfterLoad::Move(to) = &t.after_load else {
            continue;
        };
        let Some(target) = Place::of(to) else {
            continue;
        };
        let clash = others
            .iter()
            .find(|(p, _, _)| target.within(p) || p.within(&target));
        if let Some((_, what, j)) = clash {
            return Some(BadMove {
                table: i + 1,
                to: to.clone(),
                how: format!("overlaps the {what} of table {j}"),
            });
        }
    }
    None
}

/// `dir` made absolute, its longest existing ancestor's symbolic links resolved, `.` and
/// `..` taken out of the rest.
fn resolved(dir: &Path) -> PathBuf {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    let base = loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            break real;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => break existing.to_path_buf(),
        }
    };
    let mut out = base;
    for part in rest.iter().rev() {
        for c in Path::new(part).components() {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(store: &str, landing: &str) -> TableConfig {
        let text = format!(
            "[[table]]\nstore = \"{store}\"\nname = \"t\"\nlanding = \"{landing}\"\npattern = \"*.parquet\"\n"
        );
        let config: crate::Config = toml::from_str(&text).unwrap();
        config.tables.into_iter().next().unwrap()
    }

    #[test]
    fn a_landing_that_is_holds_or_lies_in_a_store_is_found_locally_and_on_s3() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let cases = [
            (format!("{d}/store"), format!("{d}/store"), Some("is")),
            (
                format!("{d}/store"),
                format!("{d}/store/hits"),
                Some("lies inside"),
            ),
            (
                format!("{d}/store/"),
                format!("{d}/./store/x/../hits"),
                Some("lies inside"),
            ),
            (format!("{d}/store"), d.clone(), Some("holds")),
            (format!("{d}/store"), format!("{d}/landing"), None),
            (format!("{d}/store"), format!("{d}/store-landing"), None),
            (
                "s3://b/tables".into(),
                "s3://b/tables/hits/".into(),
                Some("lies inside"),
            ),
            ("s3://b/tables".into(), "s3://b".into(), Some("holds")),
            ("s3://b".into(), "s3://b".into(), Some("is")),
            ("s3://b/tables".into(), "s3://b/tables2".into(), None),
            ("s3://b/tables".into(), "s3://c/tables".into(), None),
            (format!("{d}/b"), "s3://b".into(), None),
        ];
        for (store, landing, expected) in cases {
            let found = first_overlap(&[table(&store, &landing)]).map(|o| o.how);
            assert_eq!(found, expected, "store {store}, landing {landing}");
        }
    }

    #[test]
    fn a_landing_reached_through_a_symbolic_link_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("store")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("store"), dir.path().join("link")).unwrap();
        let store = dir.path().join("store").display().to_string();
        let landing = dir.path().join("link/hits").display().to_string();
        let found = first_overlap(&[table(&store, &landing)]);
        assert_eq!(found.map(|o| o.how), Some("lies inside"));
    }

    #[test]
    fn one_tables_landing_in_another_tables_store_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let tables = [
            table(&format!("{d}/a"), &format!("{d}/landing-a")),
            table(&format!("{d}/b"), &format!("{d}/a/landing-b")),
        ];
        let found = first_overlap(&tables).unwrap();
        assert_eq!((found.landing_table, found.store_table), (2, 1));
    }
}
