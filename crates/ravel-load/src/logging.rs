//! The log on stderr: `-v` for info, `-vv` for debug (RUST_LOG overrides), as text for a
//! person or as JSON lines for a machine. Either carries the spans an event happened in (the
//! load and its table and version, the run, the object, the compaction step).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, after its spans.
    #[default]
    Text,
    /// One JSON object per line: the event's fields, its span and the spans around it.
    Json,
}

/// Installs the global subscriber: the level `verbose` selects (0 warn, 1 info, more debug)
/// unless RUST_LOG is set, written to stderr in `format`.
pub fn init(verbose: u8, format: LogFormat) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            // Colour codes only for a person at a terminal, never into a log file or a pipe.
            .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
            .init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
}
