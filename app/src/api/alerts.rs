//! What the dashboard shows of alerts: the header's badge and the Alerts page (every role
//! may read them), with what operators did with each. Acknowledging, snoozing and resolving
//! are form posts to [`action_path`] (the server's `routes/alert_actions.rs`).

use claimcheck_core::alert::{AlertChannel, AlertCondition, DeliveryStatus, MessageKind};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The open alerts, for the header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertBadge {
    pub open: usize,
    /// What they are about, for the badge's tooltip.
    pub conditions: Vec<AlertCondition>,
}

/// One message of an alert on one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertMessageRow {
    pub kind: MessageKind,
    pub channel: AlertChannel,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub queued_at: String,
    pub sent_at: Option<String>,
}

/// Where the form of `action` (`acknowledge`, `snooze`, `resolve`) on alert `id` posts.
pub fn action_path(id: i64, action: &str) -> String {
    format!("/dashboard/actions/alerts/{id}/{action}")
}

/// What operators did with an open alert, as it stands when the page is read; times in the
/// reader's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HandlingRow {
    /// Nobody has acted on it.
    Open,
    Acknowledged {
        by: String,
        at: String,
    },
    Snoozed {
        by: String,
        until: String,
    },
    /// Snoozed, and the snooze is over: open again, reminders as before.
    SnoozeOver {
        by: String,
        until: String,
    },
}

impl HandlingRow {
    /// The state's name for the page's tests and styles.
    pub fn as_str(&self) -> &'static str {
        match self {
            HandlingRow::Open | HandlingRow::SnoozeOver { .. } => "open",
            HandlingRow::Acknowledged { .. } => "acknowledged",
            HandlingRow::Snoozed { .. } => "snoozed",
        }
    }
}

/// A note an operator wrote about an alert, refused (empty, or too long) and given back to
/// the form it came from: the one that acknowledges and snoozes (`resolve` false) or the one
/// that resolves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptNote {
    pub alert_id: i64,
    pub resolve: bool,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertRow {
    pub id: i64,
    pub condition: AlertCondition,
    /// The page that shows what it is about.
    pub page: String,
    pub open: bool,
    pub count: i64,
    pub summary: String,
    pub samples: Vec<String>,
    pub since: Option<String>,
    pub opened_at: String,
    pub resolved_at: Option<String>,
    pub checked_at: String,
    pub messages: Vec<AlertMessageRow>,
    pub handling: HandlingRow,
    /// What the operator wrote when they acknowledged or snoozed it.
    pub handling_note: Option<String>,
    /// The handling's version the page shows: the forms send it back, and an action lands
    /// only if nobody acted since.
    pub handling_version: i64,
    /// The admin who resolved it by hand, and their note.
    pub resolved_by: Option<String>,
    pub resolution_note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertHistory {
    /// Open alerts first, then the latest resolved ones.
    pub alerts: Vec<AlertRow>,
    /// The latest `claimcheck alerts test` messages.
    pub tests: Vec<AlertMessageRow>,
    /// A resolution's note that was refused, for its form.
    pub kept: Option<KeptNote>,
}

#[server(prefix = "/dashboard/fn", endpoint = "alert_badge")]
pub async fn get_alert_badge() -> Result<AlertBadge, ServerFnError> {
    use claimcheck_core::auth::Role;

    let (store, _) = super::server::require(Role::Viewer).await?;
    let open = store
        .alerts()
        .open()
        .await
        .map_err(super::server::unavailable)?;
    Ok(AlertBadge {
        open: open.len(),
        conditions: open.iter().map(|a| a.condition).collect(),
    })
}

#[server(prefix = "/dashboard/fn", endpoint = "alerts")]
pub async fn get_alerts() -> Result<AlertHistory, ServerFnError> {
    use super::server::time;
    use crate::flash::Flash;
    use crate::i18n::{AlertWords, reader};
    use claimcheck_core::alert::Handling;
    use claimcheck_core::alert_check::AlertWording;
    use claimcheck_core::auth::Role;

    let (store, _) = super::server::require(Role::Viewer).await?;
    let kept = Flash::kept_form("/alerts");
    let now = claimcheck_core::now_ms();
    // In the reader's words where the alert kept what it is about.
    let words = AlertWords(reader());
    let alerts = store
        .alerts()
        .recent(100)
        .await
        .map_err(super::server::unavailable)?;
    let deliveries = store
        .alerts()
        .deliveries(1000)
        .await
        .map_err(super::server::unavailable)?;
    let row = |d: &claimcheck_core::AlertDeliveryView| AlertMessageRow {
        kind: d.kind,
        channel: d.channel,
        status: d.status,
        attempts: d.attempts,
        last_error: d.last_error.clone(),
        queued_at: time(d.created_at),
        sent_at: d.sent_at.map(time),
    };
    let handling = |h: &Handling| match h {
        Handling::Open => HandlingRow::Open,
        Handling::Acknowledged { by, at } => HandlingRow::Acknowledged {
            by: by.clone(),
            at: time(*at),
        },
        Handling::Snoozed { by, until, .. } if *until <= now => HandlingRow::SnoozeOver {
            by: by.clone(),
            until: time(*until),
        },
        Handling::Snoozed { by, until, .. } => HandlingRow::Snoozed {
            by: by.clone(),
            until: time(*until),
        },
    };
    // The take form posts to two places (its snooze buttons to another): either is its own.
    let kept = kept.and_then(|kept| {
        alerts.iter().find_map(|a| {
            let (resolve, note) =
                ["acknowledge", "snooze", "resolve"]
                    .into_iter()
                    .find_map(|action| {
                        if kept.value("form")? != action_path(a.id, action) {
                            return None;
                        }
                        let note = kept.value("note")?;
                        Some((action == "resolve", note))
                    })?;
            Some(KeptNote {
                alert_id: a.id,
                resolve,
                note: note.to_owned(),
            })
        })
    });
    Ok(AlertHistory {
        kept,
        tests: deliveries
            .iter()
            .filter(|d| d.alert_id.is_none())
            .take(10)
            .map(row)
            .collect(),
        alerts: alerts
            .into_iter()
            .map(|a| AlertRow {
                messages: deliveries
                    .iter()
                    .filter(|d| d.alert_id == Some(a.id))
                    .rev()
                    .map(row)
                    .collect(),
                handling: handling(&a.handling),
                handling_note: a.handling_note,
                handling_version: a.handling_version,
                resolved_by: a.resolved_by,
                resolution_note: a.resolution_note,
                id: a.id,
                condition: a.condition,
                page: crate::links::alert(a.condition, a.detail.as_ref()),
                open: a.resolved_at.is_none(),
                count: a.count,
                summary: a
                    .detail
                    .as_ref()
                    .map(|d| words.summary(d))
                    .unwrap_or(a.summary),
                samples: a.samples,
                since: a.since.map(time),
                opened_at: time(a.opened_at),
                resolved_at: a.resolved_at.map(time),
                checked_at: time(a.checked_at),
            })
            .collect(),
    })
}
