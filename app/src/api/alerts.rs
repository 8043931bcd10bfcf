//! What the dashboard shows of alerts: the header's badge and the Alerts page (every role
//! may read them).

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertRow {
    pub id: i64,
    pub condition: AlertCondition,
    pub open: bool,
    pub count: i64,
    pub summary: String,
    pub samples: Vec<String>,
    pub since: Option<String>,
    pub opened_at: String,
    pub resolved_at: Option<String>,
    pub checked_at: String,
    pub messages: Vec<AlertMessageRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertHistory {
    /// Open alerts first, then the latest resolved ones.
    pub alerts: Vec<AlertRow>,
    /// The latest `claimcheck alerts test` messages.
    pub tests: Vec<AlertMessageRow>,
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
    use crate::i18n::{AlertWords, reader};
    use claimcheck_core::alerts::AlertWording;
    use claimcheck_core::auth::Role;

    let (store, _) = super::server::require(Role::Viewer).await?;
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
    Ok(AlertHistory {
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
                id: a.id,
                condition: a.condition,
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
