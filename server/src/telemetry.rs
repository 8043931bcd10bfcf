//! Logging set-up and error formatting.

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// How log lines are written (`CLAIMCHECK_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// For a person: one readable line per event, the request's span in front.
    #[default]
    Text,
    /// For a log collector: one JSON object per line, the event's fields at the top level
    /// and its spans (the request id among them) under `span` and `spans`.
    Json,
}

/// Logs to stderr in `format`; `RUST_LOG` picks the level (default `info`).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_sessions=warn"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second call (tests starting several apps) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
}

/// `error: cause: cause` on one line, for messages a person reads in a terminal.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
