//! The `ravel-load` binary end to end: gen, layout, tier, demo, and exit codes.

use std::process::Output;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int32Array, ListArray, RecordBatch, StringArray, TimestampSecondArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::{self, entries, fails, ok, p, run, versions};

#[test]
fn gen_parquet_is_deterministic_and_raw() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    let c = dir.path().join("c.parquet");
    let out = ok(&format!("gen --rows 3000 --seed 5 --out {}", p(&a)));
    assert!(
        out.contains("wrote 3000 rows") && out.contains("rows/s"),
        "{out}"
    );
    ok(&format!("gen --rows 3000 --seed 5 --out {}", p(&b)));
    ok(&format!("gen --rows 3000 --seed 6 --out {}", p(&c)));
    let (a, b, c) = (
        std::fs::read(a).unwrap(),
        std::fs::read(b).unwrap(),
        std::fs::read(c).unwrap(),
    );
    assert_eq!(a, b, "same seed, same bytes");
    assert_ne!(a, c);

    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(a)).unwrap();
    assert_eq!(reader.metadata().file_metadata().num_rows(), 3000);
    let schema = reader.schema().clone();
    assert_eq!(schema.fields().len(), 105);
    assert_eq!(
        schema.field_with_name("EventTime").unwrap().data_type(),
        &DataType::Int64
    );
    assert_eq!(
        schema.field_with_name("EventDate").unwrap().data_type(),
        &DataType::UInt16
    );
    assert_eq!(
        schema.field_with_name("URL").unwrap().data_type(),
        &DataType::Binary
    );
}

#[test]
fn gen_typed_parquet_and_tsv() {
    let dir = tempfile::tempdir().unwrap();
    let typed = dir.path().join("t.parquet");
    ok(&format!(
        "gen --rows 500 --convention typed --out {}",
        p(&typed)
    ));
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&typed).unwrap()).unwrap();
    let s = reader.schema();
    assert_eq!(
        s.field_with_name("EventTime").unwrap().data_type(),
        &DataType::Timestamp(TimeUnit::Second, None)
    );
    assert_eq!(
        s.field_with_name("EventDate").unwrap().data_type(),
        &DataType::Date32
    );
    assert_eq!(
        s.field_with_name("Title").unwrap().data_type(),
        &DataType::Utf8
    );

    let tsv = dir.path().join("h.tsv");
    ok(&format!("gen --rows 700 --out {}", p(&tsv)));
    let text = std::fs::read_to_string(&tsv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 700);
    for l in &lines {
        let fields: Vec<&str> = l.split('\t').collect();
        assert_eq!(fields.len(), 105);
        assert!(
            fields[4].starts_with("2013-07-"),
            "EventTime as text: {}",
            fields[4]
        );
        assert_eq!(fields[4].len(), 19);
        assert_eq!(fields[5], &fields[4][..10], "EventDate");
    }

    let d = p(dir.path());
    let err = fails(2, &format!("gen --rows 5 --out {d}/x.csv"));
    assert!(err.contains(".parquet or .tsv"), "{err}");
    let err = fails(2, &format!("gen --rows 5 --out {d}/no/such/x.tsv"));
    assert!(err.contains("directory does not exist"), "{err}");
}

#[test]
fn layout_commands_on_a_local_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let layout = |args: &str| ok(&format!("layout --store {s} --table hits {args}"));
    // Reading a store that does not exist is an error, not an empty table.
    let err = fails(2, &format!("layout --store {s} --table hits show"));
    assert!(err.contains("does not exist"), "{err}");
    assert!(!store.exists());
    std::fs::create_dir_all(&store).unwrap();
    let show: serde_json::Value = serde_json::from_str(&layout("show")).unwrap();
    assert_eq!(show["generation"], 0);
    // A table never configured names no column; its first stored layout takes the hits
    // stream and time (checked below by the sort order).
    assert!(show["stream"].is_null() && show["time"].is_null(), "{show}");
    assert!(show["clustering_key"].is_null());

    let out = layout("clustering-key set --column EventDate --column UserID --bucket-width 1d");
    assert!(out.contains("generation 1"), "{out}");
    let out = layout("clustering-key set --column EventDate --column UserID --bucket-width 24h");
    assert!(
        out.contains("unchanged") && out.contains("generation 1"),
        "{out}"
    );
    let out = layout("clustering-key show");
    assert!(
        out.contains("EventDate, UserID") && out.contains("1d"),
        "{out}"
    );
    assert!(
        out.contains("CounterID, EventTime div 1d, EventDate, UserID, EventTime"),
        "{out}"
    );

    let out = layout("bloom-scope set --scope URL,Title --fpp 0.05");
    assert!(out.contains("generation 2"), "{out}");
    let out = layout("bloom-scope show");
    assert!(
        out.contains("scope: URL,Title") && out.contains("fpp: 0.05"),
        "{out}"
    );
    layout("bloom-scope set --scope text");
    layout("stream clear");
    assert_eq!(layout("stream show").trim(), "(none)");
    layout("stream set --column CounterID");
    layout("time set --column EventTime");

    let show: serde_json::Value = serde_json::from_str(&layout("show")).unwrap();
    assert_eq!(show["generation"], 5);
    assert_eq!(
        show["clustering_key"]["columns"],
        serde_json::json!(["EventDate", "UserID"])
    );
    assert_eq!(show["clustering_key"]["bucket_width"], "1d");
    assert_eq!(show["bloom"]["scope"], "text");
    assert_eq!(show["bloom"]["fpp"], 0.05);
    assert!(
        store
            .join("hits/_layout/00000000000000000005.json")
            .is_file()
    );

    let out = layout("clustering-key clear");
    assert!(out.contains("generation 6"), "{out}");
    assert!(layout("clustering-key show").contains("arrival order"));
}

#[test]
fn bad_input_exits_2_names_the_problem_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    ok(&format!(
        "layout --store {s} --table hits schema set --hits"
    ));
    let cases = [
        (
            "clustering-key set --column UserID --bucket-width 0s",
            "must be positive",
        ),
        (
            "clustering-key set --column UserID --bucket-width -1d",
            "must be positive",
        ),
        (
            "clustering-key set --column UserID --bucket-width 1y",
            "unknown unit",
        ),
        (
            "clustering-key set --column Nope",
            "clustering key column \"Nope\" is not in the table's schema",
        ),
        (
            "clustering-key set --column UserID --column UserID",
            "\"UserID\" is named more than once",
        ),
        (
            "clustering-key set --column A --column B --column C --column D --column E",
            "1 to 4 columns",
        ),
        (
            "time set --column URL",
            "time column \"URL\" has type Binary",
        ),
        ("stream set --column Missing", "stream column \"Missing\""),
        ("bloom-scope set --scope URL,,Title", "Bloom scope"),
        (
            "bloom-scope set --scope text --fpp 1.5",
            "false-positive rate",
        ),
    ];
    for (args, expect) in cases {
        let err = fails(2, &format!("layout --store {s} --table hits {args}"));
        assert!(err.contains(expect), "{args}: {err}");
    }
    assert!(
        !store.join("hits/_layout").exists(),
        "no layout document was written"
    );

    let missing_path = dir.path().join("missing.parquet");
    let missing = p(&missing_path);
    let err = fails(
        2,
        &format!("layout --store {s} --table t2 schema set --from {missing}"),
    );
    assert!(
        err.contains("cannot open") && err.contains("missing.parquet"),
        "{err}"
    );
    let not_parquet = dir.path().join("x.parquet");
    std::fs::write(&not_parquet, b"not parquet").unwrap();
    let err = fails(
        2,
        &format!(
            "layout --store {s} --table t2 schema set --from {}",
            p(&not_parquet)
        ),
    );
    assert!(err.contains("not a readable Parquet file"), "{err}");
    let err = fails(2, "layout --store gs://bucket/x --table hits show");
    assert!(err.contains("not supported"), "{err}");
    let err = fails(2, &format!("layout --store {s} --table ../etc show"));
    assert!(err.contains("table name"), "{err}");
    // clap usage errors are exit 2 too.
    fails(
        2,
        &format!("layout --store {s} --table hits clustering-key set"),
    );
}

#[test]
fn a_flights_table_with_a_list_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flights.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("carrier", DataType::Utf8, false),
        Field::new(
            "time_hour",
            DataType::Timestamp(TimeUnit::Second, None),
            false,
        ),
        Field::new("origin", DataType::Utf8, false),
        Field::new("dest", DataType::Utf8, false),
        Field::new("flight", DataType::Int32, false),
        Field::new("stops", DataType::new_list(DataType::Int32, true), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from(vec!["UA", "AA"])) as ArrayRef,
            Arc::new(TimestampSecondArray::from(vec![
                1_357_002_000,
                1_357_005_600,
            ])),
            Arc::new(StringArray::from(vec!["EWR", "JFK"])),
            Arc::new(StringArray::from(vec!["IAH", "MIA"])),
            Arc::new(Int32Array::from(vec![1545, 1141])),
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
                Some(vec![Some(1)]),
                None,
            ])),
        ],
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();

    let store = dir.path().join("store");
    let s = p(&store);
    let layout = |args: &str| run(&format!("layout --store {s} --table flights {args}"));
    let text = |o: Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    assert!(
        text(layout(&format!("schema set --from {}", p(&file)))).contains("recorded (6 columns)")
    );
    // No hits column in the layout of a table that is not hits, and no time column to key by
    // until one is named.
    assert!(!text(layout("show")).contains("CounterID"));
    let o = layout("clustering-key set --column origin --column dest");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs a time column"));
    text(layout("stream set --column carrier"));
    text(layout("time set --column time_hour"));
    let o = layout("time set --column origin");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("time column \"origin\" has type Utf8"));
    let out = text(layout(
        "clustering-key set --column origin --column dest --bucket-width 6h",
    ));
    assert!(out.contains("generation 3"), "{out}");
    let o = layout("clustering-key set --column stops");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"stops\" has type List"));
    let shown: serde_json::Value = serde_json::from_str(&text(layout("show"))).unwrap();
    assert_eq!(shown["stream"], "carrier");
    assert_eq!(shown["time"], "time_hour");
    assert_eq!(shown["clustering_key"]["bucket_width"], "6h");
    assert!(text(layout("bloom-scope show")).contains("columns: carrier, origin, dest"));
}

#[test]
fn tier_prints_the_geometry() {
    let out = ok("tier");
    for want in [
        "tier:",
        "object target:",
        "pipeline depth:",
        "load budget:",
        "max flush delay: 60 s",
    ] {
        assert!(out.contains(want), "{out}");
    }
    let json: serde_json::Value = serde_json::from_str(&ok("tier --json")).unwrap();
    assert!(json["load_budget"].as_u64().unwrap() > 0);
    assert!(json["pipeline_depth"].as_u64().unwrap() >= 8);
}

#[test]
fn demo_generates_records_and_sets_the_hits_layout() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let d = p(&demo);
    let demo_cmd = format!("demo --dir {d} --store {d}/store --rows 5000");
    let (out, err) = common::succeeds(common::command(&demo_cmd));
    assert!(out.contains("wrote 5000 rows"), "{out}");
    assert!(
        out.contains("\"columns\": [\n      \"EventDate\",\n      \"UserID\"\n    ]"),
        "{out}"
    );
    assert!(demo.join("hits.parquet").is_file());
    assert!(demo.join("store/hits/_schema.json").is_file());
    assert!(
        demo.join("store/hits/_layout/00000000000000000001.json")
            .is_file()
    );
    assert!(out.contains("loaded 5000 rows into"), "{out}");
    assert_eq!(versions(&demo.join("store/hits/_delta_log")), 1);
    assert!(entries(&demo.join("store/hits/data")) >= 1);
    demo_ends_with_a_query_and_verify(d, &out, &err);
    // Running it again changes nothing: the layout is unchanged and the rows are not loaded twice.
    let (out, err) = common::succeeds(common::command(&demo_cmd));
    demo_ends_with_a_query_and_verify(d, &out, &err);
    assert!(out.contains("layout: unchanged (generation 1)"), "{out}");
    assert!(out.contains("already loaded"), "{out}");
    assert_eq!(versions(&demo.join("store/hits/_delta_log")), 1);
}

/// The demo's ending: a query of the top five counters with its store traffic, `verify`'s
/// verdict, each under its command, and the commands to copy.
fn demo_ends_with_a_query_and_verify(d: &str, out: &str, err: &str) {
    let query = format!("ravel-load query --store {d}/store --table hits --stats 'SELECT");
    assert!(out.contains(&format!("== query: {query}")), "{out}");
    let header = out.lines().position(|l| l.starts_with("| CounterID | c"));
    let rows = out.lines().skip(header.expect(out) + 2);
    assert_eq!(rows.take_while(|l| l.starts_with("| ")).count(), 5, "{out}");
    assert!(
        err.contains("statement: 5 row(s)") && err.contains("objects touched"),
        "{err}"
    );
    let verify = format!("ravel-load verify --store {d}/store --table hits");
    assert!(out.contains(&format!("== verify: {verify}\n")), "{out}");
    assert!(
        out.contains("5000 rows") && out.contains("ok: every promise holds"),
        "{out}"
    );
    let next = out.split("== next\n").nth(1).expect(out);
    assert!(
        next.starts_with(&query) && next.contains(&format!("{verify} --deep")),
        "{next}"
    );
}

#[test]
fn layout_on_s3_with_settings_from_the_environment_and_no_secret_shown() {
    let server = ravel_testkit::S3Server::start();
    let url = server.url("warehouse");
    // `layout` on the server's store with `env` as its environment.
    let layout = |args: &str, env: &[(&str, String)]| {
        let mut c = common::command(&format!("layout --store {url} --table hits {args}"));
        c.envs(env.iter().map(|(k, v)| (k, v)));
        c.output().unwrap()
    };
    let env: Vec<(&str, String)> = server.env();

    let out = layout(
        "clustering-key set --column EventDate --column UserID",
        &env,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("generation 1"));
    let out = layout("show -vv", &env);
    assert!(out.status.success());
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["generation"], 1);
    for text in [&out.stdout, &out.stderr] {
        assert!(!String::from_utf8_lossy(text).contains(&server.secret_key));
    }
    // The document is an object on the server.
    assert!(
        server
            .root()
            .join("ravel-test/warehouse/hits/_layout/00000000000000000001.json")
            .is_file()
    );

    // A wrong secret fails, and neither secret appears in the error.
    let mut bad = env.clone();
    let wrong = "WRONGSECRETwrongsecret0123456789".to_string();
    bad.retain(|(k, _)| *k != "AWS_SECRET_ACCESS_KEY");
    bad.push(("AWS_SECRET_ACCESS_KEY", wrong.clone()));
    let out = layout("show -vv", &bad);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error:"), "{err}");
    assert!(
        !err.contains(&wrong) && !err.contains(&server.secret_key),
        "{err}"
    );
}

#[test]
fn load_tsv_and_parquet_and_refuse_bad_tsv_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let tsv = dir.path().join("h.tsv");
    let pq = dir.path().join("h.parquet");
    ok(&format!("gen --rows 4000 --out {}", p(&tsv)));
    ok(&format!("gen --rows 4000 --out {}", p(&pq)));
    ok(&format!(
        "layout --store {s} --table hits clustering-key set --column EventDate --column UserID"
    ));
    let out = ok(&format!(
        "load --store {s} --table hits --input {} --json",
        p(&tsv)
    ));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["rows"], 4000);
    assert_eq!(report["layout"]["generation"], 1);
    // The same rows from Parquet: another input, so its rows are loaded too (the objects are
    // named by the load as well as by their bytes, so they are other objects).
    let out = ok(&format!(
        "load --store {s} --table hits --input {} --no-maintain --json",
        p(&pq)
    ));
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (report["rows"].clone(), report["version"].clone()),
        (4000.into(), 1.into()),
        "{report}"
    );
    assert_eq!(versions(&store.join("hits/_delta_log")), 2);

    let bad = dir.path().join("bad.tsv");
    let mut text = std::fs::read_to_string(&tsv).unwrap();
    let second = text.lines().nth(1).unwrap().to_string();
    let broken = second.replacen('\t', "\tnot-a-number-", 1);
    text = text.replacen(&second, &broken, 1);
    std::fs::write(&bad, text).unwrap();
    let err = fails(
        2,
        &format!("load --store {s} --table hits --input {}", p(&bad)),
    );
    assert!(
        err.contains("bad.tsv") && err.contains("line 2, column 2 (JavaEnable)"),
        "{err}"
    );
    assert_eq!(versions(&store.join("hits/_delta_log")), 2, "no manifest");
    let csv = dir.path().join("x.csv");
    let err = fails(
        2,
        &format!("load --store {s} --table hits --input {}", p(&csv)),
    );
    assert!(err.contains("--format"), "{err}");
}

#[test]
fn verify_passes_a_loaded_table_and_fails_a_damaged_one() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let st = demo.join("store");
    let (d, s) = (p(&demo), p(&st));
    ok(&format!("demo --dir {d} --store {s} --rows 20000"));
    let out = ok(&format!("verify --store {s} --table hits --deep"));
    assert!(out.contains("20000 rows"), "{out}");
    assert!(
        out.contains("clustering: ") && out.contains("depth max 1"),
        "{out}"
    );
    assert!(out.contains("ok: every promise holds"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&format!("verify --store {s} --table hits --json"))).unwrap();
    assert_eq!(json["rows"], 20000);
    assert_eq!(json["violations"].as_array().unwrap().len(), 0);

    // No such table: bad usage.
    let err = fails(2, &format!("verify --store {s} --table nope"));
    assert!(err.contains("\"nope\""), "{err}");

    // A missing object: the table no longer holds its promises.
    let object = std::fs::read_dir(st.join("hits/data"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&object).unwrap();
    let res = run(&format!("verify --store {s} --table hits"));
    let (out, err) = (
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr),
    );
    assert_eq!(res.status.code(), Some(1), "{out}\n{err}");
    let name = object.file_name().unwrap().to_str().unwrap();
    assert!(
        out.contains("VIOLATION hits/data/") && out.contains(name),
        "{out}"
    );
    assert!(out.contains("is missing: manifest"), "{out}");
    assert!(
        err.contains("does not hold its promises: 1 violation(s)"),
        "{err}"
    );
}

#[test]
fn bad_parquet_and_empty_inputs_exit_2_and_publish_nothing() {
    use arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let good = dir.path().join("good.parquet");
    ok(&format!("gen --rows 3000 --out {}", p(&good)));
    ok(&format!(
        "layout --store {s} --table hits clustering-key set --column EventDate --column UserID"
    ));
    ok(&format!(
        "layout --store {s} --table hits schema set --from {}",
        p(&good)
    ));
    let manifests = || versions(&store.join("hits/_delta_log"));

    // Read the good file, change it, write it back under another name.
    let bytes = bytes::Bytes::from(std::fs::read(&good).unwrap());
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    let batch = {
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
    };
    let write = |name: &str, b: &RecordBatch| {
        let path = dir.path().join(name);
        let mut w = parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            b.schema(),
            None,
        )
        .unwrap();
        w.write(b).unwrap();
        w.close().unwrap();
        path
    };
    type Change<'a> = &'a dyn Fn(&Field, &ArrayRef) -> Option<(Field, ArrayRef)>;
    let with = |f: Change| {
        let (fields, cols): (Vec<Field>, Vec<ArrayRef>) = batch
            .schema()
            .fields()
            .iter()
            .zip(batch.columns())
            .filter_map(|(fl, c)| f(fl, c))
            .unzip();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
    };

    // A key column missing.
    let missing = write(
        "missing.parquet",
        &with(&|f, c| (f.name() != "EventDate").then(|| (f.clone(), c.clone()))),
    );
    let err = fails(
        2,
        &format!("load --store {s} --table hits --input {}", p(&missing)),
    );
    assert!(
        err.contains("missing.parquet") && err.contains("\"EventDate\" is missing"),
        "{err}"
    );

    // A key column of another type than the table's.
    let retyped = write(
        "retyped.parquet",
        &with(&|f, c| {
            if f.name() == "UserID" {
                let s: StringArray = c
                    .as_primitive::<Int64Type>()
                    .iter()
                    .map(|v| v.map(|v| v.to_string()))
                    .collect();
                Some((
                    Field::new("UserID", DataType::Utf8, false),
                    Arc::new(s) as ArrayRef,
                ))
            } else {
                Some((f.clone(), c.clone()))
            }
        }),
    );
    let err = fails(
        2,
        &format!("load --store {s} --table hits --input {}", p(&retyped)),
    );
    assert!(
        err.contains("retyped.parquet") && err.contains("\"UserID\" has type Utf8"),
        "{err}"
    );

    // A truncated file.
    let truncated = dir.path().join("truncated.parquet");
    let full = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &full[..full.len() / 2]).unwrap();
    let err = fails(
        2,
        &format!("load --store {s} --table hits --input {}", p(&truncated)),
    );
    assert!(
        err.contains("truncated.parquet") && err.contains("not a readable Parquet file"),
        "{err}"
    );

    // No rows at all.
    let empty = write("empty.parquet", &batch.slice(0, 0));
    let err = fails(
        2,
        &format!("load --store {s} --table hits --input {}", p(&empty)),
    );
    assert!(
        err.contains("the input holds no rows: nothing was published"),
        "{err}"
    );

    assert_eq!(manifests(), 0, "no load was published");
    assert_eq!(entries(&store.join("hits/data")), 0);
}

#[test]
fn max_bad_rows_leaves_bad_tsv_lines_out_into_a_rejects_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let tsv = dir.path().join("h.tsv");
    ok(&format!("gen --rows 3000 --out {}", p(&tsv)));
    // Break lines 10 (a non-number) and 2000 (a field short).
    let mut lines: Vec<String> = std::fs::read_to_string(&tsv)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[9] = lines[9].replacen('\t', "\tNaN-", 1);
    let short = lines[1999].rfind('\t').unwrap();
    lines[1999].truncate(short);
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let manifests = || versions(&store.join("hits/_delta_log"));

    // One allowed, two found: the load fails, naming the second, and publishes nothing.
    let err = fails(
        2,
        &format!(
            "load --store {s} --table hits --input {} --max-bad-rows 1",
            p(&bad)
        ),
    );
    assert!(
        err.contains("more than 1 bad line(s)") && err.contains("line 2000:"),
        "{err}"
    );
    assert_eq!(manifests(), 0);

    // Two allowed: the other rows load, the two lines go to the rejects file as they were.
    let rejects = dir.path().join("out.rejects");
    let out = run(&format!(
        "load --store {s} --table hits --input {} --max-bad-rows 2 --rejects {} --json",
        p(&bad),
        p(&rejects)
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["rows"], 2998);
    assert_eq!(manifests(), 1);
    let left = std::fs::read_to_string(&rejects).unwrap();
    assert_eq!(left, format!("{}\n{}\n", lines[9], lines[1999]));
    let why = std::fs::read_to_string(dir.path().join("out.rejects.reasons")).unwrap();
    assert!(
        why.contains("line 10, column 2 (JavaEnable)") && why.contains("line 2000:"),
        "{why}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("left out 2 bad line(s)"));

    // Parquet input has no bad lines to leave out.
    let pq = dir.path().join("h.parquet");
    ok(&format!("gen --rows 10 --out {}", p(&pq)));
    let err = fails(
        2,
        &format!(
            "load --store {s} --table hits --input {} --max-bad-rows 3",
            p(&pq)
        ),
    );
    assert!(
        err.contains("--max-bad-rows applies to TSV input only"),
        "{err}"
    );
}

/// Runs `args` with `RAVEL_STORE` set to `store` and no `--store`; returns the output.
fn in_store(store: &str, args: &[&str]) -> Output {
    let mut c = common::command(args);
    c.env("RAVEL_STORE", store);
    c.output().expect("ravel-load runs")
}

#[test]
fn every_command_takes_the_store_from_the_environment_and_checks_geometry_one_way() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let pq = dir.path().join("h.parquet");
    ok(&format!("gen --rows 3000 --out {}", p(&pq)));
    ok(&format!(
        "layout --store {s} --table hits clustering-key set --column UserID"
    ));
    ok(&format!(
        "load --store {s} --table hits --input {} --no-maintain",
        p(&pq)
    ));
    let count = "SELECT COUNT(*) AS n FROM hits";
    let reads: [&[&str]; 5] = [
        &["verify", "--table", "hits"],
        &["gc", "--table", "hits", "--dry-run"],
        &["maintain", "--table", "hits", "--dry-run"],
        &["layout", "--table", "hits", "show"],
        &["query", "--table", "hits", count],
    ];
    for args in reads {
        let out = in_store(s, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
    }
    let out = in_store(s, &["query", "--table", "hits", "--format", "csv", count]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("3000"));
    for args in [["verify", "--table", "nope"], ["gc", "--table", "nope"]] {
        let out = in_store(s, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("nope"), "{args:?}: {err}");
    }
    let input = p(&pq);
    let geometry = [
        ("--zstd-level 0", "--zstd-level 0: zstd levels are 1 to 22"),
        (
            "--pipeline-depth 0",
            "--pipeline-depth 0: must be at least 1",
        ),
        (
            "--object-bytes 1000 --load-budget 999",
            "--load-budget 999: must hold at least one object",
        ),
    ];
    for (flags, expect) in geometry {
        for command in [
            format!("load --store {s} --table hits --input {input} {flags}"),
            format!("compact --store {s} --table hits {flags}"),
            format!("maintain --store {s} --table hits {flags}"),
        ] {
            let err = fails(2, &command);
            assert!(err.contains(expect), "{command}: {err}");
        }
    }
    assert_eq!(
        versions(&store.join("hits/_delta_log")),
        1,
        "nothing else was published"
    );
}

#[test]
fn log_format_json_writes_json_lines_that_carry_the_load_span() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = p(&store);
    let pq = dir.path().join("h.parquet");
    ok(&format!("gen --rows 2000 --out {}", p(&pq)));
    ok(&format!(
        "layout --store {s} --table hits clustering-key set --column EventDate --column UserID"
    ));
    let mut c = common::command(&format!(
        "--log-format json load -v --store {s} --table hits --input {} --no-maintain",
        p(&pq)
    ));
    c.env_remove("RUST_LOG");
    let (_, err) = common::succeeds(c);
    // Besides the log, stderr has the command's own notes (the geometry line): plain text.
    let lines: Vec<serde_json::Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let load_span = |line: &serde_json::Value| {
        line["spans"].as_array().is_some_and(|spans| {
            spans
                .iter()
                .any(|s| s["name"] == "load" && s["table"] == "hits")
        })
    };
    let run = lines
        .iter()
        .find(|l| l["fields"]["message"] == "run stored")
        .unwrap_or_else(|| panic!("no run stored: {err}"));
    assert!(load_span(run), "{run}");
    assert_eq!(run["span"]["name"], "run");
    assert_eq!(run["span"]["run"], 0);
    let committed = lines
        .iter()
        .find(|l| l["fields"]["message"] == "load committed")
        .unwrap_or_else(|| panic!("no load committed: {err}"));
    assert!(load_span(committed), "{committed}");
    assert_eq!(committed["span"]["version"], 0, "{committed}");
    assert_eq!(committed["level"], "INFO");
    // -v shows info, not the objects' debug lines.
    assert!(lines.iter().all(|l| l["level"] != "DEBUG"), "{err}");
}
