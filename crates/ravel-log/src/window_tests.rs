//! The inputs window against a model of a table's life: loads at moments, checkpoints that
//! leave expired `txn`s out, and a rerun of every file at the end. A file a version loaded is
//! never taken as new, however long ago and whatever the checkpoints forgot; a file no version
//! loaded is taken whenever the table cannot have forgotten it.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::checkpoint::checkpoint_actions_at;
use crate::{ActionLine, Consumed, Format, InputFile, LogEntry, Metadata, Snapshot, Txn};

const DAY_MS: i64 = 86_400_000;

/// Cases to run: `PROPTEST_CASES` when set (for soaks), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One moment of the table's life, in days since it was created.
#[derive(Debug, Clone)]
enum Event {
    /// A load of a new file that last changed `age` days before it.
    Load { age: i64 },
    /// A checkpoint, which the next readers start from.
    Checkpoint,
}

/// A file of the model: its identity and whether a version loaded it.
struct File {
    input: InputFile,
    loaded: bool,
}

fn metadata(window_days: i64, created_ms: i64) -> ActionLine {
    let window = crate::interval(u64::try_from(window_days * 86_400).unwrap());
    ActionLine {
        meta_data: Some(Metadata {
            id: "t".into(),
            name: None,
            format: Format::default(),
            schema_string: "{}".into(),
            partition_columns: Vec::new(),
            configuration: BTreeMap::from([(crate::INPUTS_PROPERTY.to_string(), window)]),
            created_time: Some(created_ms),
        }),
        ..ActionLine::default()
    }
}

fn file(n: usize, modified_ms: i64) -> InputFile {
    InputFile {
        name: format!("/landing/{n}.parquet"),
        size: 10,
        version: modified_ms.to_string(),
        modified_ms: Some(modified_ms),
    }
}

/// The version that loads `input` at `now_ms`, as a commit records it.
fn load(s: &mut Snapshot, input: &InputFile, now_ms: i64) {
    let version = s.next_version();
    let txn = |app_id: String| ActionLine {
        txn: Some(Txn {
            app_id,
            version: version as i64,
            last_updated: Some(now_ms),
        }),
        ..ActionLine::default()
    };
    s.apply(&LogEntry {
        version,
        actions: vec![txn(input.app_id()), txn(input.name_app_id())],
    });
}

/// The table as a reader that starts from a checkpoint written at `now_ms` sees it.
fn checkpoint(s: &Snapshot, now_ms: i64) -> Snapshot {
    let mut read = Snapshot::default();
    read.apply(&LogEntry {
        version: s.version.expect("a version"),
        actions: checkpoint_actions_at(s, now_ms),
    });
    read
}

/// Plays `events` one day apart from day 1 on a table created at day 0 with an inputs window
/// of `window_days`; returns the table and its files.
fn live(window_days: i64, events: &[Event]) -> (Snapshot, Vec<File>) {
    let mut s = Snapshot::default();
    s.apply(&LogEntry {
        version: 0,
        actions: vec![metadata(window_days, 0)],
    });
    let mut files = Vec::new();
    for (day, event) in (1..).zip(events) {
        let now = day * DAY_MS;
        match event {
            Event::Load { age } => {
                let input = file(files.len(), now - age * DAY_MS);
                load(&mut s, &input, now);
                files.push(File {
                    input,
                    loaded: true,
                });
            }
            Event::Checkpoint => s = checkpoint(&s, now),
        }
    }
    (s, files)
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => (0i64..4).prop_map(|age| Event::Load { age }),
        1 => Just(Event::Checkpoint),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(256)))]

    #[test]
    fn a_loaded_file_is_never_taken_as_new_and_a_remembered_one_never_refused(
        window_days in 1i64..8,
        events in proptest::collection::vec(event(), 1..40),
        later_days in 0i64..20,
        new_ages in proptest::collection::vec(0i64..60, 1..6),
    ) {
        let (s, mut files) = live(window_days, &events);
        let now = (events.len() as i64 + 1 + later_days) * DAY_MS;
        let start = files.len();
        for (i, age) in new_ages.iter().enumerate() {
            files.push(File { input: file(start + i, now - age * DAY_MS), loaded: false });
        }
        for f in &files {
            let consumed = Consumed::once(vec![f.input.clone()]);
            let remembered = s.consumed_by(&f.input).is_some();
            let refused = s.check_window(&consumed, now).is_err();
            if f.loaded {
                prop_assert!(remembered || refused, "{} loaded, taken as new", f.input.name);
            } else {
                prop_assert!(!remembered);
                // A file that changed within the window is new to the table, whatever it forgot.
                let within = f.input.modified_ms.unwrap() >= now - window_days * DAY_MS;
                prop_assert!(!(within && refused), "{} refused within the window", f.input.name);
            }
            let reload = Consumed { inputs: vec![f.input.clone()], reload: true };
            prop_assert!(s.check_window(&reload, now).is_ok());
        }
    }
}

#[test]
fn a_new_table_takes_files_older_than_its_window() {
    let now = 400 * DAY_MS;
    let mut s = Snapshot::default();
    s.apply(&LogEntry {
        version: 0,
        actions: vec![metadata(1, now - DAY_MS / 2)],
    });
    let old = Consumed::once(vec![file(0, now - 365 * DAY_MS)]);
    assert!(s.check_window(&old, now).is_ok());
    // The same table a day later could have forgotten a load of it; and of a file whose
    // modification time is unknown.
    let e = s.check_window(&old, now + DAY_MS).unwrap_err().to_string();
    let said = "last changed 366 days ago, before the table's inputs window (interval 1 day)";
    assert!(e.contains("/landing/0.parquet") && e.contains(said), "{e}");
    let mut unknown = file(1, 0);
    unknown.modified_ms = None;
    let e = s.check_window(&Consumed::once(vec![unknown]), now + DAY_MS);
    let e = e.unwrap_err().to_string();
    assert!(e.contains("has no known modification time"), "{e}");
}

#[test]
fn a_window_grown_since_still_refuses_what_the_shorter_one_forgot() {
    let now = 100 * DAY_MS;
    let mut s = Snapshot::default();
    let mut m = metadata(30, 0);
    let configuration = &mut m.meta_data.as_mut().unwrap().configuration;
    configuration.insert(crate::FORGOTTEN_PROPERTY.into(), (now - DAY_MS).to_string());
    s.apply(&LogEntry {
        version: 0,
        actions: vec![m],
    });
    // Changed 10 days ago: inside the 30-day window, but before the 1-day window it had.
    let forgotten = Consumed::once(vec![file(0, now - 10 * DAY_MS)]);
    let e = s.check_window(&forgotten, now).unwrap_err().to_string();
    let said = "last changed 10 days ago, before 1 day ago, when an earlier, shorter inputs window";
    assert!(
        e.contains(said) && e.contains(crate::FORGOTTEN_PROPERTY) && e.contains("interval 30 days"),
        "{e}"
    );
    let fresh = Consumed::once(vec![file(1, now - DAY_MS / 2)]);
    assert!(s.check_window(&fresh, now).is_ok());
}
