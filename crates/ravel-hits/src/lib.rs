//! The ClickBench `hits` table for ravel-load: its 105-column schema in the raw and typed
//! conventions, its layout, and a deterministic generator of hits-like data with the structure
//! that makes clustering matter (Zipf-skewed counters, users with fixed attributes, sessions,
//! per-counter pages, a daily cycle), emitted in arrival order.

mod generate;
mod layout;
mod model;
mod output;
pub mod schema;
pub mod tsv;

pub use generate::{GenOptions, Generator, JULY_2013_END, JULY_2013_START, generate};
pub use layout::layout;
pub use model::{COUNTER_62, COUNTERS};
pub use output::{Format, OutputError, Written, gen_writer_properties, write_generated};
pub use schema::{COLUMNS, Convention, Kind, Strings, index_of, schema};
