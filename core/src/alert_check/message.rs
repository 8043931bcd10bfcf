//! What an alert's messages say, as facts, and the trait that puts them into words. The
//! engine decides when a message goes out and what it is about; the words (language, time
//! zone, the layout of a line) belong to the application that runs it.

use std::fmt;

use serde::Serialize;

use crate::alert::{AlertCondition, AlertDetail, MessageKind};

/// What a message says about an alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertFacts {
    pub condition: AlertCondition,
    pub count: i64,
    pub since: Option<i64>,
    /// The alert in the checking instance's words ([`AlertWording::summary`]).
    pub summary: String,
    pub samples: Vec<String>,
    pub opened_at: i64,
    pub resolved_at: Option<i64>,
    /// The operator who resolved it by hand; `None` when the condition cleared.
    pub resolved_by: Option<String>,
    /// Their note, with `resolved_by`.
    pub note: Option<String>,
    /// What the alert is about, as data (`None` for alerts recorded before details were
    /// kept): the link can name exactly what it found (a reconcile run's events).
    pub detail: Option<AlertDetail>,
}

/// One message, ready for any channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub subject: String,
    pub text: String,
}

/// The words of alerts: one sentence for what an alert is about, and the messages that go
/// out on every channel. Links point into `dashboard_url` (no trailing slash): the page
/// that shows what the alert is about (the dashboard's `links::alert`) and `/alerts`.
pub trait AlertWording: fmt::Debug + Send + Sync {
    /// What a finding is about, in one or two sentences.
    fn summary(&self, detail: &AlertDetail) -> String;

    /// The message of `kind` about an alert: what, how many, since when, a few of the ids
    /// concerned (not once resolved) and where to look.
    fn message(&self, kind: MessageKind, facts: &AlertFacts, dashboard_url: &str) -> Message;

    /// What `claimcheck alerts test` sends: where it came from, and that nothing is wrong.
    fn test_message(&self, dashboard_url: &str, from_host: &str) -> Message;
}
