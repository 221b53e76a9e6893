//! Schema drift: inputs whose columns and types are the table's but whose nullability or field
//! metadata differ load with the table's schema, a null in a NOT NULL column is bad input, and
//! verify fails a table whose loads disagree.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{Field, Int64Type, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::{fails, files, line, ok, p, run};

/// A generated hits file of 2000 rows.
fn generated(dir: &Path, name: &str, seed: u64) -> PathBuf {
    let out = dir.join(name);
    ok(&format!("gen --rows 2000 --seed {seed} --out {}", p(&out)));
    out
}

fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    reader.build().unwrap().map(|b| b.unwrap()).collect()
}

/// Writes `src`'s rows to `dst` under `schema`, each column passed through `column` (given
/// the column's name and the batch's first row's number in the file).
fn rewrite(
    src: &Path,
    dst: &Path,
    schema: Arc<Schema>,
    column: impl Fn(&str, usize, &ArrayRef) -> ArrayRef,
) {
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(dst).unwrap(), schema.clone(), None).unwrap();
    let mut first_row = 0;
    for b in read_parquet(src) {
        let columns = schema
            .fields()
            .iter()
            .zip(b.columns())
            .map(|(f, c)| column(f.name(), first_row, c))
            .collect();
        w.write(&RecordBatch::try_new(schema.clone(), columns).unwrap())
            .unwrap();
        first_row += b.num_rows();
    }
    w.close().unwrap();
}

/// `src`'s schema with every field passed through `field`.
fn schema_of(src: &Path, field: impl Fn(&Field) -> Field) -> Arc<Schema> {
    let b = read_parquet(src);
    let fields: Vec<Field> = b[0].schema().fields().iter().map(|f| field(f)).collect();
    Arc::new(Schema::new(fields))
}

fn load(store: &str, input: &Path) -> String {
    ok(&format!(
        "load --store {store} --table hits --input {}",
        p(input)
    ))
}

fn count(store: &str) -> String {
    ok(&line(
        &format!("query --store {store} --table hits --format csv"),
        &["SELECT COUNT(*) AS n FROM hits"],
    ))
}

fn manifests(store: &Path) -> Vec<PathBuf> {
    files(&store.join("hits/_ravel/manifests"))
}

/// Every stored object's Arrow schema.
fn object_schemas(store: &Path) -> Vec<Arc<Schema>> {
    std::fs::read_dir(store.join("hits/data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.extension().is_some_and(|x| x == "parquet"))
        .map(|path| {
            let f = std::fs::File::open(path).unwrap();
            ParquetRecordBatchReaderBuilder::try_new(f)
                .unwrap()
                .schema()
                .clone()
        })
        .collect()
}

/// Edits a manifest's JSON: `edit` gets its schema's fields.
fn edit_manifest(path: &Path, edit: impl Fn(&mut Vec<serde_json::Value>)) {
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let fields = m["schema"]["fields"].as_array_mut().unwrap();
    edit(fields);
    std::fs::write(path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
}

fn field_named<'a>(fields: &'a mut [serde_json::Value], name: &str) -> &'a mut serde_json::Value {
    fields.iter_mut().find(|f| f["name"] == name).unwrap()
}

#[test]
fn an_all_nullable_input_loads_with_the_tables_schema_and_stays_queryable() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let first = generated(dir.path(), "first.parquet", 1);
    let second = generated(dir.path(), "second.parquet", 2);
    let nullable = dir.path().join("nullable.parquet");
    let schema = schema_of(&second, |f| f.clone().with_nullable(true));
    rewrite(&second, &nullable, schema, |_, _, c| c.clone());

    load(s, &first);
    load(s, &nullable);
    assert_eq!(manifests(&store).len(), 2);
    let out = count(s);
    assert!(out.contains("4000"), "{out}");
    for schema in object_schemas(&store) {
        let nullable: Vec<&str> = schema
            .fields()
            .iter()
            .filter(|f| f.is_nullable())
            .map(|f| f.name().as_str())
            .collect();
        assert!(nullable.is_empty(), "stored nullable: {nullable:?}");
    }
    let out = ok(&format!("verify --store {s} --table hits --deep"));
    assert!(out.contains("every promise holds"), "{out}");
}

#[test]
fn a_field_with_metadata_loads_and_stays_queryable() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let first = generated(dir.path(), "first.parquet", 1);
    let second = generated(dir.path(), "second.parquet", 2);
    let tagged = dir.path().join("tagged.parquet");
    let schema = schema_of(&second, |f| {
        if f.name() == "UserID" {
            f.clone()
                .with_metadata(HashMap::from([("a".into(), "b".into())]))
        } else {
            f.clone()
        }
    });
    rewrite(&second, &tagged, schema, |_, _, c| c.clone());

    load(s, &first);
    load(s, &tagged);
    assert_eq!(manifests(&store).len(), 2);
    let out = count(s);
    assert!(out.contains("4000"), "{out}");
    for schema in object_schemas(&store) {
        let user = schema.field_with_name("UserID").unwrap();
        assert!(user.metadata().is_empty(), "{:?}", user.metadata());
    }
}

#[test]
fn a_null_in_a_not_null_column_is_bad_input_naming_column_and_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    ok(&format!(
        "layout --store {s} --table hits schema set --hits"
    ));
    let source = generated(dir.path(), "source.parquet", 3);
    let holed = dir.path().join("holed.parquet");
    let schema = schema_of(&source, |f| f.clone().with_nullable(f.name() == "UserID"));
    // The 1235th row of the file (index 1234) has no UserID.
    rewrite(&source, &holed, schema, |name, first_row, c| {
        if name != "UserID" {
            return c.clone();
        }
        let values = c.as_primitive::<Int64Type>();
        let with_null: Int64Array = (0..values.len())
            .map(|i| (first_row + i != 1234).then(|| values.value(i)))
            .collect();
        Arc::new(with_null)
    });

    let err = fails(
        2,
        &format!("load --store {s} --table hits --input {}", p(&holed)),
    );
    assert!(err.contains("UserID"), "{err}");
    assert!(err.contains("row 1235"), "{err}");
    assert!(err.contains("holed.parquet"), "{err}");
    assert!(
        manifests(&store).is_empty(),
        "published: {:?}",
        manifests(&store)
    );
    // The same file without the null loads (it is nullable only in its schema).
    load(s, &source);
    let out = count(s);
    assert!(out.contains("2000"), "{out}");
}

#[test]
fn loads_that_differ_in_nullability_are_queryable_and_fail_verify() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    load(s, &generated(dir.path(), "first.parquet", 1));
    load(s, &generated(dir.path(), "second.parquet", 2));
    let listed = manifests(&store);
    assert_eq!(listed.len(), 2);
    // As an older build published them: one load says UserID is nullable, the other carries
    // field metadata.
    edit_manifest(&listed[1], |fields| {
        field_named(fields, "UserID")["nullable"] = true.into();
    });
    edit_manifest(&listed[0], |fields| {
        field_named(fields, "WatchID")["metadata"] = serde_json::json!({"a": "b"});
    });

    let out = count(s);
    assert!(out.contains("4000"), "{out}");
    let out = run(&format!("verify --store {s} --table hits --json"));
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let violations = report["violations"].as_array().unwrap();
    assert_eq!(violations.len(), 1, "{report}");
    assert_eq!(violations[0]["kind"], "nullable_column", "{report}");
    assert!(
        violations[0]["problem"].to_string().contains("UserID"),
        "{report}"
    );
}

#[test]
fn verify_fails_a_table_whose_loads_disagree_on_columns() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    load(s, &generated(dir.path(), "first.parquet", 1));
    // A load of another table whose UserID is named otherwise, moved into this one with its
    // objects (each manifest still agrees with its own objects).
    let second = generated(dir.path(), "second.parquet", 2);
    let renamed = dir.path().join("renamed.parquet");
    let schema = schema_of(&second, |f| {
        if f.name() == "UserID" {
            f.clone().with_name("UserId")
        } else {
            f.clone()
        }
    });
    rewrite(&second, &renamed, schema, |_, _, c| c.clone());
    ok(&format!(
        "load --store {s} --table other --input {}",
        p(&renamed)
    ));
    for e in std::fs::read_dir(store.join("other/data")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), store.join("hits/data").join(e.file_name())).unwrap();
    }
    for e in std::fs::read_dir(store.join("other/_ravel/manifests")).unwrap() {
        let e = e.unwrap();
        let text = std::fs::read_to_string(e.path()).unwrap();
        std::fs::write(
            store.join("hits/_ravel/manifests").join(e.file_name()),
            text.replace("other/data/", "hits/data/"),
        )
        .unwrap();
    }
    // Its log entry (paths in it are relative to the table) as the next version of this one.
    std::fs::copy(
        store.join("other/_delta_log/00000000000000000000.json"),
        store.join("hits/_delta_log/00000000000000000001.json"),
    )
    .unwrap();

    let out = run(&format!("verify --store {s} --table hits --deep"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("VIOLATION") && stdout.contains("UserID") && stdout.contains("schema"),
        "{stdout}"
    );
    let err = fails(
        1,
        &line(
            &format!("query --store {s} --table hits"),
            &["SELECT COUNT(*) FROM hits"],
        ),
    );
    assert!(err.contains("different schemas"), "{err}");
}
