//! Logging set-up and error formatting.

use std::io::{IsTerminal, Write};

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
    let ansi = format == LogFormat::Text && std::io::stderr().is_terminal();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || OneLine {
            out: std::io::stderr(),
            ansi,
        });
    // A second call (tests starting several apps) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => logs.with_ansi(ansi).try_init(),
        LogFormat::Json => logs.json().flatten_event(true).try_init(),
    };
}

/// Writes each log event as one line whatever text it carries: a line break, a carriage
/// return or another control character inside it (a username typed as `x\nINFO signed in`,
/// an escape sequence) is written escaped, so nobody can forge a log line or drive the
/// terminal that shows it. The formatter hands over one whole event per write. Fields that
/// hold what others typed are also logged with `?` (quoted, escaped) where they are logged.
struct OneLine {
    out: std::io::Stderr,
    /// Colours are ours (a terminal): their escape sequences pass.
    ansi: bool,
}

impl Write for OneLine {
    fn write(&mut self, event: &[u8]) -> std::io::Result<usize> {
        self.out.write_all(&one_line(event, self.ansi))?;
        Ok(event.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// `event` with every control character but a final line break and tabs escaped (`\n`,
/// `\r`, `\x1b`); escape characters kept when `ansi` colours are on.
fn one_line(event: &[u8], ansi: bool) -> Vec<u8> {
    let (body, end) = match event.strip_suffix(b"\n") {
        Some(body) => (body, &b"\n"[..]),
        None => (event, &b""[..]),
    };
    if !body
        .iter()
        .any(|b| (b.is_ascii_control() && *b != b'\t') || *b == 0x7f)
    {
        return event.to_vec();
    }
    let mut out = Vec::with_capacity(event.len() + 16);
    for &byte in body {
        match byte {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.push(byte),
            0x1b if ansi => out.push(byte),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.extend_from_slice(end);
    out
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

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn an_event_is_written_as_one_line_whatever_it_carries() {
        let forged = b"INFO sign-in refused username=x\nINFO signed in username=admin\n";
        assert_eq!(
            one_line(forged, false),
            b"INFO sign-in refused username=x\\nINFO signed in username=admin\n"
        );
        assert_eq!(
            one_line(b"a\rb\x1b[31mred\x07\tok\n", false),
            b"a\\rb\\x1b[31mred\\x07\tok\n"
        );
        assert_eq!(
            one_line(b"\x1b[32mINFO\x1b[0m plain\n", true),
            b"\x1b[32mINFO\x1b[0m plain\n"
        );
        assert_eq!(one_line(b"plain line\n", false), b"plain line\n");
    }
}
