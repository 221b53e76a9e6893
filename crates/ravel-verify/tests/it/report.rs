//! Violations word their problems as the text report always has, and carry a stable kind in
//! JSON beside that wording.

use std::collections::HashSet;

use ravel_verify::{Cause, Problem, Violation};
use serde_json::json;

fn cause() -> Cause {
    std::io::Error::other("boom").into()
}

/// Each problem with its wording and kind.
fn words() -> Vec<(Problem, &'static str, &'static str)> {
    use Problem::*;
    vec![
        (NoCommitInfo, "has no commitInfo", "no_commit_info"),
        (
            AddsHeld {
                path: "data/a.parquet".into(),
            },
            "adds data/a.parquet, which the table holds already: its rows count twice",
            "adds_held",
        ),
        (
            RemovesUnheld {
                path: "data/a.parquet".into(),
            },
            "removes data/a.parquet, which the table does not hold",
            "removes_unheld",
        ),
        (
            CheckpointUnreadable { cause: cause() },
            "the newest checkpoint does not read (boom): Delta readers start there",
            "checkpoint_unreadable",
        ),
        (
            CheckpointFiles {
                version: Some(3),
                paths: vec!["data/a.parquet".into()],
            },
            "read from its checkpoint, version Some(3) differs from a replay of the log in [\"data/a.parquet\"]",
            "checkpoint_files",
        ),
        (
            ChecksumMismatch {
                disagreement: ravel_log::ChecksumDisagreement {
                    file: "t/_delta_log/00000000000000000003.crc".into(),
                    version: 3,
                    recorded: ravel_log::Counts { files: 1, bytes: 2 },
                    replayed: ravel_log::Counts { files: 3, bytes: 2 },
                    culprit: ravel_log::Culprit::ChecksumFile,
                },
            },
            "records numFiles 1 (3 in the log replayed) for version 3; the entry is the one it was written for, so the checksum file is wrong and the log reads",
            "checksum_mismatch",
        ),
        (
            NullableColumn {
                column: "UserID".into(),
            },
            "schema has UserID nullable, the table's recorded schema says NOT NULL",
            "nullable_column",
        ),
        (
            ListedTwice {
                first: "m1".into(),
                second: "m2".into(),
            },
            "is listed by manifests m1 and m2: its rows count twice",
            "listed_twice",
        ),
        (
            Missing {
                manifest: "load-1".into(),
            },
            "is missing: manifest load-1 lists it",
            "missing",
        ),
        (
            Unreadable { cause: cause() },
            "cannot be read: boom",
            "unreadable",
        ),
        (
            SizeMismatch {
                stored: 10,
                manifest: 12,
            },
            "has 10 bytes, the manifest says 12",
            "size_mismatch",
        ),
        (
            NotParquet { cause: cause() },
            "is not a readable Parquet file: boom",
            "not_parquet",
        ),
        (
            RowGroups { count: 2 },
            "has 2 row groups, not 1",
            "row_groups",
        ),
        (
            ColumnsDiffer,
            "has other columns than the manifest's schema",
            "columns_differ",
        ),
        (
            RowCountMismatch {
                stored: 5,
                manifest: 6,
            },
            "has 5 rows, the manifest says 6",
            "row_count_mismatch",
        ),
        (
            FooterGeneration {
                footer: Some("2".into()),
                manifest: 3,
            },
            "footer layout generation Some(\"2\"), the manifest says 3",
            "footer_generation",
        ),
        (
            FooterSortKey {
                footer: None,
                manifest: "a, b".into(),
            },
            "footer sort key None, the manifest says \"a, b\"",
            "footer_sort_key",
        ),
        (
            FooterKey {
                name: "ravel.first_key".into(),
                footer: None,
                manifest: Some(json!([1])),
            },
            "footer ravel.first_key None, the manifest says Some(Array [Number(1)])",
            "footer_key",
        ),
        (
            NoPageIndex {
                column: "URL".into(),
            },
            "has no page index for column \"URL\"",
            "no_page_index",
        ),
        (
            SortKeyMismatch {
                sort_key: vec!["a".into()],
                generation: 2,
                layout: vec!["b".into()],
            },
            "sort key [\"a\"], layout generation 2 says [\"b\"]",
            "sort_key_mismatch",
        ),
        (
            RunOverlap {
                previous: "data/a".into(),
                run: 1,
                manifest: "m".into(),
                last: json!([5, "x"]),
                first: json!([4, "y"]),
            },
            "overlaps data/a in key range within run 1 of manifest m: [5,\"x\"] > [4,\"y\"]",
            "run_overlap",
        ),
        (
            OutOfOrder { row: 4, next: 5 },
            "is not in clustering order: row 4 sorts after row 5",
            "out_of_order",
        ),
        (
            KeyRangeMismatch {
                first: json!([1]),
                last: json!([2]),
                manifest_first: None,
                manifest_last: Some(json!([2])),
            },
            "rows span [1] .. [2], the manifest says None .. Some(Array [Number(2)])",
            "key_range_mismatch",
        ),
        (
            BloomOutsideScope {
                column: "WatchID".into(),
                scope: "text".into(),
            },
            "has a Bloom filter on column \"WatchID\", which the Bloom scope (text) does not cover",
            "bloom_outside_scope",
        ),
        (
            BloomMissing {
                column: "URL".into(),
                scope: "text".into(),
            },
            "has no Bloom filter on column \"URL\", which the Bloom scope (text) covers",
            "bloom_missing",
        ),
        (
            NotInBloom {
                column: "URL".into(),
                batch: 0,
                row: 7,
            },
            "value of URL at batch 0 row 7 is not in the object's Bloom filter",
            "not_in_bloom",
        ),
        (
            SidecarColumns {
                recorded: vec!["A".into()],
                expected: vec!["B".into()],
            },
            "holds filters of [\"A\"]; the Bloom scope's string columns are [\"B\"]",
            "sidecar_columns",
        ),
        (
            SidecarMissing {
                manifest: "m".into(),
            },
            "is missing: manifest m lists it",
            "sidecar_missing",
        ),
        (
            SidecarSize {
                stored: 8,
                manifest: 100,
            },
            "has 8 bytes (the manifest says 100) or no sidecar magic",
            "sidecar_size",
        ),
        (
            SidecarSectionOutside {
                column: "URL".into(),
            },
            "section URL lies outside the sidecar",
            "sidecar_section_outside",
        ),
        (
            NoDeltaAdd,
            "is in the version but not among its Delta `add` actions",
            "no_delta_add",
        ),
        (
            DeltaRecords {
                add: json!(null),
                footer: 3,
            },
            "its Delta `add` says null records, the footer 3",
            "delta_records",
        ),
        (
            DeltaBound {
                stat: "minValues".into(),
                column: "CounterID".into(),
                add: json!(9),
                footer: json!(1),
            },
            "its Delta `add` has minValues 9 for \"CounterID\", past the footer's 1",
            "delta_bound",
        ),
        (
            ForeignMissing { cause: cause() },
            "is not stored, and the log adds it (boom)",
            "foreign_missing",
        ),
        (
            ForeignRows { stored: 3, log: 4 },
            "has 3 rows, its add's statistics say 4",
            "foreign_rows",
        ),
    ]
}

#[test]
fn problems_read_as_the_report_words_them() {
    for (problem, text, kind) in words() {
        assert_eq!(problem.to_string(), text);
        assert_eq!(problem.kind(), kind);
    }
}

#[test]
fn kinds_are_distinct_snake_case_names() {
    let kinds: Vec<&str> = words().iter().map(|(p, _, _)| p.kind()).collect();
    assert_eq!(kinds.iter().collect::<HashSet<_>>().len(), kinds.len());
    for kind in kinds {
        assert!(
            kind.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{kind}"
        );
    }
}

#[test]
fn a_violation_in_json_has_its_object_wording_and_kind() {
    let v = Violation::new(
        "hits/data/a.parquet",
        Problem::SizeMismatch {
            stored: 10,
            manifest: 12,
        },
    );
    assert_eq!(v.kind(), "size_mismatch");
    assert_eq!(
        serde_json::to_value(&v).unwrap(),
        json!({
            "object": "hits/data/a.parquet",
            "problem": "has 10 bytes, the manifest says 12",
            "kind": "size_mismatch",
        })
    );
}

#[test]
fn a_cause_keeps_its_error() {
    let cause = cause();
    assert_eq!(cause.error().to_string(), "boom");
    assert_eq!(cause, std::io::Error::other("boom").into());
}
