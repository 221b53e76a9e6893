//! The crate's integration tests, one binary (each test binary links the crate and its
//! dependencies again): `cargo test -p ravel-loader --test it faults::` runs one module.

mod columns;
mod common;
mod faults;
mod load;
