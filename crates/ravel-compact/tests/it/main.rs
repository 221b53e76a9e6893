//! Compaction end to end on a local store (one test binary: `cargo test -p ravel-compact
//! --test it properties::` runs one module).

mod job;
mod maintenance;
mod properties;
mod races;
