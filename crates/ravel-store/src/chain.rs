//! An error printed with its causes, once each.

use std::error::Error;
use std::fmt;

/// An error and its sources joined by ": ", as arrow-rs's callers print them: each error's
/// message leaves its source out, and the caller prints the chain once.
///
/// The errors of object_store, Parquet and Arrow print their source inside their own message,
/// so the chain stops at the first of them ([`prints_its_source`]). DataFusion's errors do the
/// same; the crates that wrap one keep it out of their chain of sources.
#[derive(Clone, Copy)]
pub struct ErrorChain<'a> {
    error: &'a (dyn Error + 'static),
}

impl<'a> ErrorChain<'a> {
    pub fn new(error: &'a (dyn Error + 'static)) -> Self {
        ErrorChain { error }
    }
}

/// Whether `e` is one of the dependencies' errors whose message holds its source's.
pub fn prints_its_source(e: &(dyn Error + 'static)) -> bool {
    e.is::<object_store::Error>()
        || e.is::<parquet::errors::ParquetError>()
        || e.is::<arrow_schema::ArrowError>()
}

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut next = Some(self.error);
        let mut first = true;
        while let Some(e) = next {
            if !first {
                f.write_str(": ")?;
            }
            first = false;
            write!(f, "{e}")?;
            if prints_its_source(e) {
                break;
            }
            next = e.source();
        }
        Ok(())
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading manifest m.json")]
    struct Outer {
        #[source]
        source: object_store::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("the cause")]
    struct Inner;

    #[test]
    fn each_message_once_and_stops_at_object_stores_error() {
        let inner = object_store::Error::Generic {
            store: "S3",
            source: Box::new(Inner),
        };
        let printed = ErrorChain::new(&Outer { source: inner }).to_string();
        // object_store's message holds "the cause" already: printed once.
        assert_eq!(printed.matches("the cause").count(), 1, "{printed}");
        assert!(
            printed.starts_with("reading manifest m.json: "),
            "{printed}"
        );
    }

    #[test]
    fn a_plain_chain_prints_every_message() {
        #[derive(Debug, thiserror::Error)]
        #[error("loading table t")]
        struct Top {
            #[source]
            source: Inner,
        }
        assert_eq!(
            ErrorChain::new(&Top { source: Inner }).to_string(),
            "loading table t: the cause"
        );
    }
}
