//! The log chain: each entry has a `commitInfo`, adds only objects the table does not hold
//! (else their rows would count twice) and removes only objects it holds.

use std::collections::HashSet;

use ravel_log::{History, LogEntry, Snapshot};

use crate::{Problem, Violation};

/// The log replayed entry by entry, and what broke its promises on the way.
pub(crate) struct Chain {
    pub violations: Vec<Violation>,
    /// The newest version as the whole log (from its start) gives it.
    pub replayed: Snapshot,
}

/// Replays `history` from its start (the checkpoint the log starts at, when the log window
/// cleaned the entries before it), checking each entry against the table before it.
pub(crate) fn check_chain(history: &History) -> Chain {
    let mut chain = Chain {
        violations: Vec::new(),
        replayed: history.start(),
    };
    for entry in &history.entries {
        let name = format!("log entry {}", entry.version);
        chain.violations.extend(
            entry_problems(entry, &chain.replayed)
                .into_iter()
                .map(|problem| Violation::new(name.clone(), problem)),
        );
        chain.replayed.apply(entry);
    }
    chain
}

/// One entry against the table it applies to.
fn entry_problems(entry: &LogEntry, table: &Snapshot) -> Vec<Problem> {
    let mut out = Vec::new();
    if entry.commit_info().is_none() {
        out.push(Problem::NoCommitInfo);
    }
    let removes: HashSet<&str> = entry
        .actions
        .iter()
        .filter_map(|a| Some(a.remove.as_ref()?.path.as_str()))
        .collect();
    for a in &entry.actions {
        if let Some(r) = &a.remove
            && !table.holds(&r.path)
        {
            out.push(Problem::RemovesUnheld {
                path: r.path.clone(),
            });
        }
        let Some(add) = &a.add else { continue };
        let path = add.path.clone();
        if removes.contains(add.path.as_str()) {
            out.push(Problem::RemovesAndAdds { path });
        } else if table.holds(&add.path) && add.data_change {
            // A compaction re-adds an object it writes back unchanged (dataChange=false):
            // one file per path, its tags replaced.
            out.push(Problem::AddsHeld { path });
        }
    }
    out
}
