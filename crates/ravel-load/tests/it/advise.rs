//! `ravel-load advise` on a loaded local table: a ranking and the commands that set the best
//! layout, `--json` in the layout document's form, `--apply` then `compact`, `--apply` of the
//! current layout storing nothing, and exit 2 for the bad inputs.

use crate::common::{fails, ok, p};

#[test]
fn advise_ranks_layouts_applies_the_best_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("h.parquet");
    let store = dir.path().join("store");
    let (s, i) = (p(&store), p(&input));
    ok(&format!("gen --rows 40000 --seed 4 --out {i}"));
    ok(&format!(
        "layout --store {s} --table hits schema set --hits"
    ));
    ok(&format!(
        "layout --store {s} --table hits clustering-key set --column EventDate --column UserID"
    ));
    ok(&format!(
        "load --store {s} --table hits --input {i} --object-bytes 200000 --compact"
    ));
    let log = dir.path().join("log.sql");
    let write = |text: &str| std::fs::write(&log, text).unwrap();
    let l = p(&log);
    write(
        "3\tSELECT COUNT(*) FROM hits WHERE \"RegionID\" = 229\nSELECT \"URL\" FROM hits WHERE \"RegionID\" IN (1, 2)\n",
    );

    let out = ok(&format!("advise --store {s} --table hits --queries {l}"));
    assert!(out.contains("2 statements (weight 4)"), "{out}");
    assert!(out.contains("stream set --column RegionID"), "{out}");
    assert!(
        out.contains(&format!("ravel-load compact --store {s} --table hits")),
        "the commands name the store advised on: {out}"
    );

    let json: serde_json::Value = serde_json::from_str(&ok(&format!(
        "advise --store {s} --table hits --queries {l} --json"
    )))
    .unwrap();
    let best = &json["recommended"];
    assert_eq!(best["stream"], "RegionID");
    assert!(
        json["commands"][0]
            .as_str()
            .unwrap()
            .contains("stream set --column RegionID")
    );
    assert!(best["clustering_key"]["columns"].is_array(), "{best}");
    assert!(best["bloom"]["scope"].is_string() || best["bloom"]["scope"].is_object());
    let first = &json["advice"]["candidates"][0];
    assert!(
        first["bytes"].as_u64().unwrap() > 0 && first["statements"].as_array().unwrap().len() == 2
    );

    let out = ok(&format!(
        "advise --store {s} --table hits --queries {l} --apply"
    ));
    assert!(out.contains("re-clusters the table, rewriting"), "{out}");
    let shown: serde_json::Value =
        serde_json::from_str(&ok(&format!("layout --store {s} --table hits show"))).unwrap();
    assert_eq!(shown["stream"], "RegionID");
    ok(&format!("compact --store {s} --table hits"));
    ok(&format!("verify --store {s} --table hits --deep"));

    write("-- nothing\n");
    let err = fails(2, &format!("advise --store {s} --table hits --queries {l}"));
    assert!(err.contains("empty"), "{err}");
    write("SELECT COUNT(*) FROM hits\n");
    let err = fails(2, &format!("advise --store {s} --table hits --queries {l}"));
    assert!(err.contains("touch no column"), "{err}");
    write("SELECT \"UserID\" FROM hits\n");
    let err = fails(
        2,
        &format!("advise --store {s} --table hits --queries {l} --sample-rows 0"),
    );
    assert!(err.contains("sample of 0 rows"), "{err}");
    fails(2, &format!("advise --store {s} --table nope --queries {l}"));
    write("SELECT 1\n0\tSELECT COUNT(*) FROM hits WHERE \"RegionID\" = 1\n");
    let err = fails(2, &format!("advise --store {s} --table hits --queries {l}"));
    assert!(
        err.contains("line 2"),
        "the bad count's line is named: {err}"
    );
    write("SELECT \"UserID\" FROM hits\n\n-5\tSELECT COUNT(*) FROM hits WHERE \"RegionID\" = 1\n");
    let err = fails(2, &format!("advise --store {s} --table hits --queries {l}"));
    assert!(
        err.contains("line 3") && err.contains("\"-5\""),
        "a negative count is refused as 0 is: {err}"
    );
    write("SELECT \"UserID\" FROM hits\n18446744073709551615\tSELECT \"URL\" FROM hits\n");
    let err = fails(2, &format!("advise --store {s} --table hits --queries {l}"));
    assert!(
        err.contains("line 2") && err.contains("from 1 to 1000000000"),
        "a count past the largest is refused, naming the bound: {err}"
    );
    std::fs::write(&log, b"SELECT \"UserID\" FROM hits\nSELECT '\xe9t\xe9'\n").unwrap();
    let err = fails(2, &format!("advise --store {s} --table hits --queries {l}"));
    assert!(
        err.contains(&format!("--queries {l}: line 2, column 9")) && err.contains("UTF-8"),
        "the file and line of the byte are named: {err}"
    );
    write("SELECT \"Nope\" FROM hits\nSELECT COUNT(*) FROM hits WHERE \"RegionID\" = 1\n");
    let out = ok(&format!("advise --store {s} --table hits --queries {l}"));
    assert!(
        out.contains("1 left out") && out.contains("left out: line 1") && out.contains("Nope"),
        "{out}"
    );
}

/// On a table with no clustering key, with no candidate but the current layout and arrival
/// order (the same there), the current layout is recommended: `--apply` says that nothing was
/// applied and stores no generation, and no `compact` (which refuses such a table) is offered.
#[test]
fn applying_the_current_layout_stores_nothing_and_offers_no_compact() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("h.parquet");
    let store = dir.path().join("store");
    let (s, i) = (p(&store), p(&input));
    ok(&format!("gen --rows 20000 --seed 4 --out {i}"));
    ok(&format!(
        "layout --store {s} --table hits schema set --hits"
    ));
    ok(&format!("load --store {s} --table hits --input {i}"));
    let log = dir.path().join("log.sql");
    std::fs::write(&log, "SELECT \"URL\" FROM hits WHERE \"RegionID\" = 229\n").unwrap();
    let advise = format!(
        "advise --store {s} --table hits --queries {} --candidates 0 --apply",
        p(&log)
    );
    let out = ok(&advise);
    assert!(
        out.contains("nothing applied") && out.contains("nothing to set"),
        "{out}"
    );
    assert!(
        !out.contains("applied: layout generation") && !out.contains("ravel-load compact"),
        "{out}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&format!("{advise} --json"))).unwrap();
    assert_eq!(json["applied"]["changed"], false, "{json}");
    assert_eq!(json["commands"], serde_json::json!([]), "{json}");
    let shown: serde_json::Value =
        serde_json::from_str(&ok(&format!("layout --store {s} --table hits show"))).unwrap();
    assert_eq!(shown["generation"], 0, "{shown}");
}
