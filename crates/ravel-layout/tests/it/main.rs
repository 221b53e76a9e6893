//! The crate's integration tests, one binary (each test binary links the crate and its
//! dependencies again): `cargo test -p ravel-layout --test it order::` runs one module.

mod order;
mod service;
