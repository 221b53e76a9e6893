//! The generator's promises: deterministic, exact row counts, arrival order, and the structure
//! that makes clustering matter on real hits.

use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::{
    DataType, Date32Type, Int16Type, Int32Type, Int64Type, TimestampSecondType, UInt16Type,
};
use ravel_hits::{
    COUNTER_62, Convention, GenOptions, JULY_2013_END, JULY_2013_START, Strings, generate,
};

fn make(rows: u64, seed: u64, convention: Convention, batch_rows: usize) -> RecordBatch {
    let (schema, batches) = generate(GenOptions {
        rows,
        seed,
        convention,
        batch_rows,
        ..GenOptions::default()
    });
    concat_batches(&schema, &batches).unwrap()
}

/// Rows of one day after July: every event time and date on that day.
#[test]
fn a_later_day_holds_only_that_day() {
    let (schema, batches) = generate(GenOptions {
        rows: 5_000,
        first_day: 40,
        days: 1,
        convention: Convention::Typed,
        ..GenOptions::default()
    });
    let b = concat_batches(&schema, &batches).unwrap();
    assert_eq!(b.num_rows(), 5_000);
    let day = JULY_2013_START + 40 * 86_400;
    let times = b.column_by_name("EventTime").unwrap();
    let times = times.as_primitive::<TimestampSecondType>().values();
    assert!(times.iter().all(|t| (day..day + 86_400).contains(t)));
    let dates = b.column_by_name("EventDate").unwrap();
    let dates = dates.as_primitive::<Date32Type>().values();
    assert!(dates.iter().all(|d| i64::from(*d) == day / 86_400));
}

fn i64s(b: &RecordBatch, name: &str) -> Vec<i64> {
    let c = b.column_by_name(name).unwrap();
    match c.data_type() {
        DataType::Int64 => c.as_primitive::<Int64Type>().values().to_vec(),
        DataType::Int32 => c
            .as_primitive::<Int32Type>()
            .values()
            .iter()
            .map(|&v| v as i64)
            .collect(),
        DataType::Int16 => c
            .as_primitive::<Int16Type>()
            .values()
            .iter()
            .map(|&v| v as i64)
            .collect(),
        DataType::UInt16 => c
            .as_primitive::<UInt16Type>()
            .values()
            .iter()
            .map(|&v| v as i64)
            .collect(),
        DataType::Date32 => c
            .as_primitive::<Date32Type>()
            .values()
            .iter()
            .map(|&v| v as i64)
            .collect(),
        DataType::Timestamp(..) => c.as_primitive::<TimestampSecondType>().values().to_vec(),
        other => panic!("{name}: {other}"),
    }
}

fn strs(b: &RecordBatch, name: &str) -> Vec<Vec<u8>> {
    let c = b.column_by_name(name).unwrap();
    match c.data_type() {
        DataType::Binary => c
            .as_binary::<i32>()
            .iter()
            .map(|v| v.unwrap().to_vec())
            .collect(),
        _ => c
            .as_string::<i32>()
            .iter()
            .map(|v| v.unwrap().as_bytes().to_vec())
            .collect(),
    }
}

const ROWS: u64 = 200_000;

#[test]
fn deterministic_for_a_seed_and_independent_of_batch_size() {
    let a = make(20_000, 7, Convention::default(), 4096);
    let b = make(20_000, 7, Convention::default(), 65_536);
    assert_eq!(a, b);
    let c = make(20_000, 8, Convention::default(), 4096);
    assert_ne!(a, c);
}

#[test]
fn exact_row_counts_and_batch_sizes() {
    for (rows, batch) in [
        (0u64, 10usize),
        (1, 10),
        (7, 3),
        (12_345, 1000),
        (30_000, 65_536),
    ] {
        let (_, batches) = generate(GenOptions {
            rows,
            seed: 1,
            convention: Convention::default(),
            batch_rows: batch,
            ..GenOptions::default()
        });
        assert_eq!(
            batches.iter().map(|b| b.num_rows() as u64).sum::<u64>(),
            rows
        );
        assert!(
            batches
                .iter()
                .all(|b| b.num_rows() <= batch && b.num_rows() > 0)
        );
        assert!(batches.iter().rev().skip(1).all(|b| b.num_rows() == batch));
    }
}

#[test]
fn conventions_hold_the_same_values() {
    let raw = make(5_000, 3, Convention::Raw(Strings::Binary), 1024);
    let utf8 = make(5_000, 3, Convention::Raw(Strings::Utf8), 1024);
    let typed = make(5_000, 3, Convention::Typed, 1024);
    assert_eq!(
        raw.schema().field_with_name("URL").unwrap().data_type(),
        &DataType::Binary
    );
    assert_eq!(
        utf8.schema().field_with_name("URL").unwrap().data_type(),
        &DataType::Utf8
    );
    for col in [
        "EventTime",
        "EventDate",
        "ClientEventTime",
        "LocalEventTime",
        "UserID",
    ] {
        assert_eq!(i64s(&raw, col), i64s(&typed, col), "{col}");
    }
    for col in ["URL", "Title", "SearchPhrase", "Referer"] {
        assert_eq!(strs(&raw, col), strs(&typed, col), "{col}");
        assert_eq!(strs(&raw, col), strs(&utf8, col), "{col}");
    }
}

#[test]
fn hits_structure() {
    let b = make(ROWS, 1, Convention::default(), 65_536);
    let n = b.num_rows();
    let time = i64s(&b, "EventTime");
    let date = i64s(&b, "EventDate");
    let counter = i64s(&b, "CounterID");
    let user = i64s(&b, "UserID");

    // Arrival order, inside July 2013, EventDate agreeing with EventTime.
    assert!(
        time.windows(2).all(|w| w[0] <= w[1]),
        "rows are in EventTime order"
    );
    assert!(
        time.iter()
            .all(|&t| (JULY_2013_START..JULY_2013_END).contains(&t))
    );
    assert!(
        time.iter()
            .zip(&date)
            .all(|(t, d)| t.div_euclid(86_400) == *d)
    );
    assert_eq!(
        date.iter().collect::<HashSet<_>>().len(),
        31,
        "every day of July"
    );

    // Zipf-skewed counters: thousands of them, counter 62 among the three heaviest.
    let mut per_counter: HashMap<i64, usize> = HashMap::new();
    for &c in &counter {
        *per_counter.entry(c).or_default() += 1;
    }
    assert!(per_counter.len() >= 1_500, "{} counters", per_counter.len());
    let mut counts: Vec<(usize, i64)> = per_counter.iter().map(|(&c, &k)| (k, c)).collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    assert!(
        counts[..3].iter().any(|&(_, c)| c == COUNTER_62 as i64),
        "{:?}",
        &counts[..5]
    );
    assert!(
        counts[0].0 > 100 * counts[counts.len() / 2].0,
        "skewed: {:?} vs median",
        counts[0]
    );

    // A daily cycle: the busiest hours carry well over twice the quietest.
    let mut by_hour = [0usize; 24];
    for &t in &time {
        by_hour[(t.rem_euclid(86_400) / 3600) as usize] += 1;
    }
    let (lo, hi) = (by_hour.iter().min().unwrap(), by_hour.iter().max().unwrap());
    assert!(*hi > 2 * lo, "{by_hour:?}");

    // Users keep their attributes across all their events.
    let attrs = [
        "OS",
        "UserAgent",
        "ResolutionWidth",
        "RegionID",
        "ClientIP",
        "IsMobile",
        "Age",
    ];
    let cols: Vec<Vec<i64>> = attrs.iter().map(|a| i64s(&b, a)).collect();
    let lang = strs(&b, "BrowserLanguage");
    let model = strs(&b, "MobilePhoneModel");
    type Attributes = (Vec<i64>, Vec<u8>, Vec<u8>);
    let mut seen: HashMap<i64, Attributes> = HashMap::new();
    for r in 0..n {
        let v = (
            cols.iter().map(|c| c[r]).collect(),
            lang[r].clone(),
            model[r].clone(),
        );
        let prev = seen.entry(user[r]).or_insert_with(|| v.clone());
        assert_eq!(*prev, v, "user {} changed attributes at row {r}", user[r]);
    }
    // ... and come back: most rows belong to users with several events on one counter and day.
    let mut per_user_day: HashMap<(i64, i64, i64), usize> = HashMap::new();
    for r in 0..n {
        *per_user_day
            .entry((user[r], counter[r], date[r]))
            .or_default() += 1;
    }
    let in_sessions: usize = per_user_day.values().filter(|&&k| k > 1).sum();
    assert!(
        in_sessions as f64 > 0.6 * n as f64,
        "{in_sessions} of {n} rows in multi-hit sessions"
    );

    // URLs and titles come from per-counter page sets: a page belongs to one counter.
    let url = strs(&b, "URL");
    let title = strs(&b, "Title");
    let mut page_owner: HashMap<&[u8], i64> = HashMap::new();
    for r in 0..n {
        let base = url[r].split(|&c| c == b'?').next().unwrap();
        assert_eq!(*page_owner.entry(base).or_insert(counter[r]), counter[r]);
        assert!(!title[r].is_empty());
    }
    let distinct_urls = url.iter().collect::<HashSet<_>>().len();
    assert!(
        distinct_urls > n / 20 && distinct_urls < n,
        "{distinct_urls} distinct URLs"
    );
    // Referers inside a session are the previous page of the same site.
    let referer = strs(&b, "Referer");
    let internal = referer.iter().filter(|r| !r.is_empty()).count();
    assert!(internal > n / 2, "{internal} rows with a referer");

    // SearchPhrase mostly empty.
    let phrases = strs(&b, "SearchPhrase");
    let non_empty = phrases.iter().filter(|p| !p.is_empty()).count();
    assert!(
        non_empty > n / 100 && non_empty < n / 5,
        "{non_empty} search phrases of {n}"
    );

    // Hashes follow their strings.
    let url_hash = i64s(&b, "URLHash");
    let mut by_url: HashMap<&[u8], i64> = HashMap::new();
    for r in 0..n {
        assert_eq!(*by_url.entry(&url[r]).or_insert(url_hash[r]), url_hash[r]);
    }
    // WatchID is (practically) unique.
    let watch = i64s(&b, "WatchID");
    assert_eq!(watch.iter().collect::<HashSet<_>>().len(), n);
    assert!(b.columns().iter().all(|c| c.null_count() == 0));
}
