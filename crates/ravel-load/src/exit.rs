//! The one mapping from errors to exit codes: 0 success, 1 failure, 2 bad input or usage, 3 a
//! gc that a running load's lease blocked, 4 a load that is published but whose maintenance
//! step failed.

use std::error::Error;

/// An error type that decides the exit code when it appears among an error's causes.
trait ExitStatus: Error + 'static {
    /// The code, or `None` to let a later cause decide.
    fn code(&self) -> Option<u8>;
}

/// 2 for an error about the user's input, 1 otherwise.
fn input_or_failure(invalid_input: bool) -> Option<u8> {
    Some(if invalid_input { 2 } else { 1 })
}

/// Library errors that tell bad input from failure themselves.
macro_rules! invalid_input_decides {
    ($($t:ty),* $(,)?) => {$(
        impl ExitStatus for $t {
            fn code(&self) -> Option<u8> {
                input_or_failure(self.is_invalid_input())
            }
        }
    )*};
}

invalid_input_decides!(
    ravel_layout::LayoutError,
    ravel_store::StoreError,
    ravel_loader::LoadError,
    ravel_verify::VerifyError,
    ravel_query::QueryError,
    ravel_compact::CompactError,
    ravel_gc::GcError,
    ravel_advise::AdviseError,
);

impl ExitStatus for ravel_hits::OutputError {
    fn code(&self) -> Option<u8> {
        use ravel_hits::OutputError::{NoSuchDirectory, UnknownFormat};
        matches!(self, UnknownFormat { .. } | NoSuchDirectory { .. }).then_some(2)
    }
}

impl ExitStatus for crate::BadInput {
    fn code(&self) -> Option<u8> {
        Some(2)
    }
}

impl ExitStatus for ravel_ingest::IngestError {
    fn code(&self) -> Option<u8> {
        match self {
            ravel_ingest::IngestError::MaintenanceFailed { .. } => Some(4),
            other => input_or_failure(other.is_invalid_input()),
        }
    }
}

impl ExitStatus for crate::gc_cmd::Blocked {
    fn code(&self) -> Option<u8> {
        Some(3)
    }
}

/// The code a cause of type `T` gives, when the cause is one.
fn code_of<T: ExitStatus>(cause: &(dyn Error + 'static)) -> Option<u8> {
    cause.downcast_ref::<T>().and_then(T::code)
}

/// Every type that decides, in the order they are tried on each cause.
const DECIDERS: &[fn(&(dyn Error + 'static)) -> Option<u8>] = &[
    code_of::<ravel_layout::LayoutError>,
    code_of::<ravel_store::StoreError>,
    code_of::<ravel_hits::OutputError>,
    code_of::<ravel_loader::LoadError>,
    code_of::<ravel_verify::VerifyError>,
    code_of::<ravel_query::QueryError>,
    code_of::<ravel_compact::CompactError>,
    code_of::<ravel_gc::GcError>,
    code_of::<ravel_advise::AdviseError>,
    code_of::<crate::BadInput>,
    code_of::<crate::gc_cmd::Blocked>,
    code_of::<ravel_ingest::IngestError>,
];

/// The exit code of a failed command: the first cause, outermost first, whose type decides;
/// 1 when none does.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|cause| DECIDERS.iter().find_map(|decide| decide(cause)))
        .unwrap_or(1)
}
