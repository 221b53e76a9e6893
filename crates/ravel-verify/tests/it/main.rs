//! The crate's integration tests, one binary (each test binary links the crate and its
//! dependencies again): `cargo test -p ravel-verify --test it verify::` runs one module.

mod clustering;
mod properties;
mod report;
mod verify;
