//! The loads' schemas against each other and the table's recorded one: every load must agree
//! with the first (names, types, order; see [`ravel_manifest::schema_difference`]) and with the
//! recorded schema, and be NOT NULL wherever the recorded schema is (a load writes the table's
//! schema, so its objects keep every promise of a NOT NULL column). Metadata does not count.

use arrow::datatypes::Schema;
use ravel_log::LiveManifest;
use ravel_manifest::{nullability_differences, schema_difference};

use crate::{Problem, Violation};

/// Each load's schema against the first load's and against `recorded`, the table's.
pub(crate) fn check_schemas(recorded: Option<&Schema>, live: &[LiveManifest]) -> Vec<Violation> {
    let Some(first) = live.first() else {
        return Vec::new();
    };
    live.iter()
        .flat_map(|lm| {
            schema_problems(recorded, first, lm)
                .into_iter()
                .map(|problem| Violation::new(lm.key.clone(), problem))
        })
        .collect()
}

/// One load's schema: the first difference found, or each column it makes nullable.
fn schema_problems(
    recorded: Option<&Schema>,
    first: &LiveManifest,
    load: &LiveManifest,
) -> Vec<Problem> {
    let schema = &load.manifest.schema;
    if let Some(difference) = schema_difference(&first.manifest.schema, schema) {
        return vec![Problem::SchemaDisagreesWithFirst {
            first: first.key.clone(),
            difference,
        }];
    }
    let Some(table) = recorded else {
        return Vec::new();
    };
    if let Some(difference) = schema_difference(table, schema) {
        return vec![Problem::SchemaDisagreesWithTable { difference }];
    }
    // A load stricter than the table (NOT NULL where the table allows nulls) breaks no
    // promise: older builds wrote the input's nullability, and queries read such a column
    // as nullable.
    nullability_differences(table, schema)
        .into_iter()
        .filter(|d| !d.table_nullable)
        .map(|d| Problem::NullableColumn { column: d.path })
        .collect()
}
