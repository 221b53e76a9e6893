//! Compaction end to end on a local store (one test binary: `cargo test -p ravel-compact
//! --test it properties::` runs one module).

mod job;
mod job_checks;
mod maintenance;
mod properties;
mod races;
