//! Bulk re-drive's vocabulary, shared with the browser: what selects the claims of a batch,
//! and the states a batch goes through.
//!
//! ```text
//!  start ──▶ running ──every claim worked──▶ finished
//!              │  ▲
//!              │  └── resumed (another runner takes the lapsed heartbeat)
//!              ├── cancel asked ──▶ (stops before its next claim) ──▶ cancelled
//!              └── heartbeat lapsed (process died or shut down) ──▶ interrupted
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::claim::ClaimState;

/// Which claims a bulk re-drive selects. Empty fields do not filter; every claim it selects
/// is re-drivable (pending, stale or failed), whatever else it says. Times are absolute
/// (unix ms), resolved once when the operator asks for the preview, so the preview and the
/// start select the same claims.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkFilter {
    /// One re-drivable state; `None` selects all three.
    pub state: Option<ClaimState>,
    pub event_type: Option<String>,
    /// Received at or after (unix ms).
    pub received_after: Option<i64>,
    /// Received before (unix ms).
    pub received_before: Option<i64>,
    /// The last error contains this (case-insensitive).
    pub error_contains: Option<String>,
    /// An event id, an object id, an order id, a payment intent or a customer email, as the
    /// events list searches.
    pub search: Option<String>,
    /// Exactly these claims (the rows an operator ticked), at most [`MAX_SELECTED`]; empty
    /// selects by the other fields alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_ids: Vec<String>,
}

/// Claims one selection names at most: a few pages of the claims list.
pub const MAX_SELECTED: usize = 500;

/// Why a filter cannot select a batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("{0} claims cannot be re-driven; pick pending, stale or failed")]
    NotRedrivable(ClaimState),
    #[error("'{0}' is not an age: write a number and a unit, such as 10m, 2h or 3d")]
    Age(String),
    #[error("the received-after time is not before the received-before time")]
    EmptyRange,
    #[error("'{0}' is not an event id")]
    EventId(String),
    #[error("at most {max} claims can be selected at once")]
    TooManySelected { max: usize },
}

impl BulkFilter {
    /// Trims the text fields (empty ones filter nothing) and checks the state and times.
    pub fn normalized(mut self) -> Result<BulkFilter, FilterError> {
        if let Some(state) = self.state
            && !state.is_redrivable()
        {
            return Err(FilterError::NotRedrivable(state));
        }
        for field in [
            &mut self.event_type,
            &mut self.error_contains,
            &mut self.search,
        ] {
            *field = field
                .take()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty());
        }
        if let (Some(after), Some(before)) = (self.received_after, self.received_before)
            && after >= before
        {
            return Err(FilterError::EmptyRange);
        }
        let mut ids = Vec::with_capacity(self.event_ids.len());
        for id in std::mem::take(&mut self.event_ids) {
            let id = crate::ids::EventId::parse(id.trim())
                .map_err(|_| FilterError::EventId(id.clone()))?
                .to_string();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        if ids.len() > MAX_SELECTED {
            return Err(FilterError::TooManySelected { max: MAX_SELECTED });
        }
        self.event_ids = ids;
        Ok(self)
    }

    /// Whether the filter narrows anything beyond "re-drivable".
    pub fn is_empty(&self) -> bool {
        *self == BulkFilter::default()
    }

    /// The states it selects.
    pub fn states(&self) -> Vec<ClaimState> {
        match self.state {
            Some(state) => vec![state],
            None => vec![ClaimState::Pending, ClaimState::Stale, ClaimState::Failed],
        }
    }
}

/// Milliseconds in an age such as `90s`, `10m`, `2h` or `3d` (the unit is required: a bare
/// number could mean seconds or minutes).
pub fn parse_age(text: &str) -> Result<i64, FilterError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit_ms: i64 = match unit.trim() {
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(FilterError::Age(text.to_owned())),
    };
    number
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_ms))
        .ok_or_else(|| FilterError::Age(text.to_owned()))
}

/// A batch's state as the progress page shows it, derived from the stored state and the
/// heartbeat at a given instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchState {
    /// Its runner works through the claims and its heartbeat holds.
    Running,
    /// Stopped by an operator between two claims; the claims after stay untouched.
    Cancelled,
    /// Every claim was worked.
    Finished,
    /// Stored as running, but its heartbeat lapsed: the process running it died or shut
    /// down. Its remaining claims are untouched; it may be resumed.
    Interrupted,
}

impl BatchState {
    pub const ALL: [BatchState; 4] = [
        BatchState::Running,
        BatchState::Cancelled,
        BatchState::Finished,
        BatchState::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Running => "running",
            BatchState::Cancelled => "cancelled",
            BatchState::Finished => "finished",
            BatchState::Interrupted => "interrupted",
        }
    }

    /// Whether it has stopped for good (nothing will run it again).
    pub fn is_over(self) -> bool {
        matches!(self, BatchState::Cancelled | BatchState::Finished)
    }
}

impl fmt::Display for BatchState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BatchState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BatchState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| format!("unknown batch state '{s}'"))
    }
}

/// What re-driving one claim of a batch came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemOutcome {
    /// Re-driven and processed.
    Processed,
    /// Re-driven and failed again (or the database stayed away).
    Failed,
    /// Not run by this batch: another batch or a worker held it, or had processed it.
    Skipped,
}

impl ItemOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemOutcome::Processed => "processed",
            ItemOutcome::Failed => "failed",
            ItemOutcome::Skipped => "skipped",
        }
    }
}

impl FromStr for ItemOutcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            ItemOutcome::Processed,
            ItemOutcome::Failed,
            ItemOutcome::Skipped,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| format!("unknown item outcome '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_operators_write_them() {
        assert_eq!(parse_age("90s"), Ok(90_000));
        assert_eq!(parse_age("10m"), Ok(600_000));
        assert!(parse_age("10").is_err());
        assert_eq!(parse_age(" 2h "), Ok(7_200_000));
        assert_eq!(parse_age("3d"), Ok(3 * 86_400_000));
        assert!(parse_age("ten minutes").is_err());
        assert!(parse_age("10w").is_err());
        assert!(parse_age("").is_err());
    }

    #[test]
    fn a_filter_selects_only_redrivable_states() {
        let running = BulkFilter {
            state: Some(ClaimState::Running),
            ..BulkFilter::default()
        };
        assert_eq!(
            running.normalized(),
            Err(FilterError::NotRedrivable(ClaimState::Running))
        );
        assert_eq!(
            BulkFilter::default().states(),
            [ClaimState::Pending, ClaimState::Stale, ClaimState::Failed]
        );
        let trimmed = BulkFilter {
            event_type: Some("  ".into()),
            search: Some(" ord_1 ".into()),
            ..BulkFilter::default()
        }
        .normalized()
        .unwrap();
        assert_eq!(trimmed.event_type, None);
        assert_eq!(trimmed.search.as_deref(), Some("ord_1"));
        let backwards = BulkFilter {
            received_after: Some(10),
            received_before: Some(5),
            ..BulkFilter::default()
        };
        assert_eq!(backwards.normalized(), Err(FilterError::EmptyRange));
    }

    #[test]
    fn batch_states_round_trip_through_their_names() {
        for state in BatchState::ALL {
            assert_eq!(state.as_str().parse::<BatchState>(), Ok(state));
        }
        assert!(BatchState::Finished.is_over());
        assert!(!BatchState::Interrupted.is_over());
    }
}
