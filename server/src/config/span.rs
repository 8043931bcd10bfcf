//! Spans of time as settings take them and `--help` shows them: `90s`, `15m`, `1h`, `3d`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A span of time on the command line: `90s`, `15m`, `1h`, `3d`, or plain seconds; written
/// in its largest whole unit (days from two on: a day reads `24h`), so a default shows in
/// `--help` as one would type it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

impl Span {
    /// A setting that is off when zero.
    pub fn off_when_zero(self) -> Option<Duration> {
        (!self.0.is_zero()).then_some(self.0)
    }

    /// The span of a setting that may be off (`None`: 0).
    pub fn or_zero(duration: Option<Duration>) -> Span {
        Span(duration.unwrap_or_default())
    }
}

impl FromStr for Span {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s).map(Span)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let (n, unit) = [(86_400, "d"), (3600, "h"), (60, "m")]
            .into_iter()
            .filter(|(size, _)| *size != 86_400 || secs >= 2 * 86_400)
            .find(|(size, _)| secs > 0 && secs.is_multiple_of(*size))
            .map_or((secs, "s"), |(size, unit)| (secs / size, unit));
        write!(f, "{n}{unit}")
    }
}

/// `90s`, `15m`, `1h`, `3d`, or plain seconds (the engine's parser, shared with the packages'
/// credit lifetimes).
pub use claimcheck_core::text::parse_duration;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_written_as_they_are_typed() {
        for text in ["90s", "15m", "1h", "24h", "3d", "0s", "25h", "61s"] {
            let span: Span = text.parse().unwrap();
            assert_eq!(span.to_string(), text);
        }
        assert_eq!("120".parse::<Span>().unwrap().to_string(), "2m");
        assert_eq!("48h".parse::<Span>().unwrap().to_string(), "2d");
        assert!("15 minutes".parse::<Span>().is_err());
        assert_eq!("0".parse::<Span>().unwrap().off_when_zero(), None);
        assert_eq!(Span::or_zero(None).to_string(), "0s");
    }
}
