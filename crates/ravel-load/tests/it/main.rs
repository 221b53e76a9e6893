//! The `ravel-load` binary end to end, one test binary (each test binary links the crate's
//! dependencies again): `cargo test -p ravel-load --test it cli::` runs one module.

mod advise;
mod cli;
mod common;
mod compact;
mod crash;
mod delta;
mod foreign;
mod hostile;
mod job;
mod maintain;
mod once;
mod place;
mod query;
mod serve;
mod versions;
