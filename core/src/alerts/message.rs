//! The words of an alert's messages: the same text for e-mail and chat, saying what, how
//! many, since when, a few of the ids concerned and the dashboard page that shows them.

use serde::Serialize;

use super::time;
use crate::alert::{AlertCondition, MessageKind};

/// What a message says about an alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertFacts {
    pub condition: AlertCondition,
    pub count: i64,
    pub since: Option<i64>,
    pub summary: String,
    pub samples: Vec<String>,
    pub opened_at: i64,
    pub resolved_at: Option<i64>,
}

/// One message, ready for any channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    pub subject: String,
    pub text: String,
}

/// The message of `kind` about an alert; links point into `dashboard_url`.
pub fn message(kind: MessageKind, facts: &AlertFacts, dashboard_url: &str) -> Message {
    let title = facts.condition.title();
    let link = format!("{dashboard_url}{}", facts.condition.page());
    let mut text = Vec::new();
    let subject = match kind {
        MessageKind::Resolved => {
            text.push(format!("Resolved: {title}."));
            text.push(format!(
                "The condition cleared at {} (open since {}). Last seen: {}",
                time(facts.resolved_at.unwrap_or(facts.opened_at)),
                time(facts.opened_at),
                facts.summary
            ));
            format!("[Claimcheck] Resolved: {title}")
        }
        MessageKind::Reminder => {
            text.push(format!("Still open: {title} ({}).", facts.count));
            text.push(facts.summary.clone());
            format!("[Claimcheck] Still open: {title} ({})", facts.count)
        }
        MessageKind::Opened | MessageKind::Test => {
            text.push(format!("{title} ({}).", facts.count));
            text.push(facts.summary.clone());
            format!("[Claimcheck] {title} ({})", facts.count)
        }
    };
    if kind != MessageKind::Resolved {
        if let Some(since) = facts.since {
            text.push(format!("Since: {}", time(since)));
        }
        if !facts.samples.is_empty() {
            let more = if facts.count > facts.samples.len() as i64 {
                ", ..."
            } else {
                ""
            };
            text.push(format!("Among them: {}{more}", facts.samples.join(", ")));
        }
    }
    text.push(format!("Dashboard: {link}"));
    text.push(format!("All alerts: {dashboard_url}/alerts"));
    Message {
        subject,
        text: text.join("\n"),
    }
}

/// What `claimcheck alerts test` sends: says where it came from and that nothing is wrong.
pub fn test_message(dashboard_url: &str, from_host: &str) -> Message {
    Message {
        subject: "[Claimcheck] Test message".to_owned(),
        text: format!(
            "This is a test of Claimcheck's alerts, sent by `claimcheck alerts test` on \
             {from_host}. Nothing is wrong: alerts reach this channel.\n\
             All alerts: {dashboard_url}/alerts"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> AlertFacts {
        AlertFacts {
            condition: AlertCondition::FailedClaims,
            count: 3,
            since: Some(1_800_000_000_000),
            summary: "3 claims failed.".into(),
            samples: vec!["evt_a".into(), "evt_b".into()],
            opened_at: 1_800_000_060_000,
            resolved_at: None,
        }
    }

    #[test]
    fn an_opened_alert_says_what_how_many_since_when_and_where() {
        let m = message(MessageKind::Opened, &facts(), "https://pay.shop.ch");
        assert_eq!(m.subject, "[Claimcheck] Claims failed (3)");
        assert!(m.text.contains("3 claims failed."), "{}", m.text);
        assert!(m.text.contains("Since: 2027-01-15 08:00 UTC"), "{}", m.text);
        assert!(
            m.text.contains("Among them: evt_a, evt_b, ..."),
            "{}",
            m.text
        );
        assert!(
            m.text
                .contains("Dashboard: https://pay.shop.ch/claims?status=failed"),
            "{}",
            m.text
        );
    }

    #[test]
    fn reminders_and_resolutions_say_so() {
        let m = message(MessageKind::Reminder, &facts(), "http://x");
        assert!(
            m.subject
                .starts_with("[Claimcheck] Still open: Claims failed")
        );
        let resolved = AlertFacts {
            resolved_at: Some(1_800_000_600_000),
            ..facts()
        };
        let m = message(MessageKind::Resolved, &resolved, "http://x");
        assert_eq!(m.subject, "[Claimcheck] Resolved: Claims failed");
        assert!(
            m.text.contains("cleared at 2027-01-15 08:10 UTC"),
            "{}",
            m.text
        );
        assert!(!m.text.contains("Among them"), "{}", m.text);
    }
}
