//! Inputs and command lines a hostile or careless user gives: each test runs the command that
//! once lost data, wrote where it must not, hung, or answered wrongly, and asserts that it now
//! refuses or holds.

mod checkpoint;
mod gc_race;
mod inputs;
mod query;
mod schema;
