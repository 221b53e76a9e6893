//! What an ingestion did.

use ravel_compact::{Adopted, SortedLoadReport};
use ravel_loader::LoadReport;
use serde::Serialize;

use crate::Maintained;

/// How the rows were loaded, with the loader's own report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Loaded {
    /// In sorted runs, each a sequence of objects (`load`).
    Runs(Box<LoadReport>),
    /// Globally sorted: one sequence (`load --compact`).
    Sorted(Box<SortedLoadReport>),
}

/// What [`crate::ingest`] did. `load_id` and `version` name the load that published the
/// inputs' rows, whether this call published them or (`already_published`) an earlier one.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct IngestReport {
    pub table: String,
    pub load_id: String,
    /// The version that published the rows; `None` only when nothing was published and no
    /// version had consumed the inputs.
    pub version: Option<u64>,
    /// A version had consumed every input already: nothing was read or published now.
    pub already_published: bool,
    /// Rows, objects and bytes this call published (0 when `already_published`).
    pub rows: u64,
    pub objects: usize,
    pub stored_bytes: u64,
    /// Objects another Delta writer added partitioned, taken in before the load.
    pub took_in: Option<Adopted>,
    pub loaded: Loaded,
    pub maintenance: Maintained,
}

impl IngestReport {
    pub(crate) fn new(table: &str, took_in: Option<Adopted>, loaded: Loaded) -> IngestReport {
        let facts = match &loaded {
            Loaded::Runs(r) => Facts {
                load_id: r.load_id.clone(),
                version: r.version,
                already_published: r.already_published,
                rows: r.rows,
                objects: r.objects.len(),
                stored_bytes: r.stored_bytes,
            },
            Loaded::Sorted(r) => Facts {
                load_id: r.load_id.clone(),
                version: r.version,
                already_published: r.already_published,
                rows: r.rows,
                objects: r.objects,
                stored_bytes: r.stored_bytes,
            },
        };
        let published = !facts.already_published;
        IngestReport {
            table: table.to_string(),
            load_id: facts.load_id,
            version: facts.version,
            already_published: facts.already_published,
            rows: if published { facts.rows } else { 0 },
            objects: if published { facts.objects } else { 0 },
            stored_bytes: if published { facts.stored_bytes } else { 0 },
            took_in,
            loaded,
            maintenance: Maintained::Skipped,
        }
    }
}

/// The figures both load reports give.
struct Facts {
    load_id: String,
    version: Option<u64>,
    already_published: bool,
    rows: u64,
    objects: usize,
    stored_bytes: u64,
}
