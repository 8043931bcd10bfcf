//! `claimcheck alerts`: send a test message to every configured channel, or list the open
//! and recent alerts with their messages.

use std::sync::Arc;

use app::i18n::AlertWords;
use claimcheck_core::alert::AlertChannel;
use claimcheck_core::alert_check::AlertWording;
use claimcheck_core::language::Language;
use claimcheck_core::{AlertDeliveryView, AlertView, now_ms};
use clap::Subcommand;
use serde::Serialize;

use super::open;
use super::output::{Output, print, print_json, table, time};
use crate::config::PublicUrl;
use crate::config::alerts::AlertChannelArgs;
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

#[derive(Debug, Subcommand)]
pub enum AlertsCommand {
    /// Send a test message to every configured channel and say how each went (exit 1 if
    /// one failed).
    Test {
        #[command(flatten)]
        channels: AlertChannelArgs,
        /// Where people reach the dashboard (the link in the message).
        #[arg(
            long = "public-url",
            env = "CLAIMCHECK_PUBLIC_URL",
            value_name = "CLAIMCHECK_PUBLIC_URL"
        )]
        public_url: Option<PublicUrl>,
        /// The language of the message (en or de-CH), as `serve` writes alerts.
        #[arg(
            long = "language",
            env = "CLAIMCHECK_LANGUAGE",
            value_name = "CLAIMCHECK_LANGUAGE",
            default_value = "en"
        )]
        language: Language,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// The open alerts, then the most recent ones, with the messages each sent.
    List {
        /// How many alerts at most.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

/// One channel's test, as `alerts test --json` reports it.
#[derive(Debug, Serialize)]
struct TestResult {
    channel: AlertChannel,
    target: String,
    ok: bool,
    error: Option<String>,
    millis: u128,
}

/// One alert and its messages, as `alerts list --json` reports it.
#[derive(Debug, Serialize)]
struct Listed {
    #[serde(flatten)]
    alert: AlertView,
    open: bool,
    deliveries: Vec<AlertDeliveryView>,
}

pub async fn run(command: AlertsCommand) -> Result<(), ServerError> {
    match command {
        AlertsCommand::Test {
            channels,
            public_url,
            language,
            output,
            database,
        } => test(&channels, public_url, language, &output, &database).await,
        AlertsCommand::List {
            limit,
            output,
            database,
        } => list(limit, &output, &database).await,
    }
}

async fn test(
    args: &AlertChannelArgs,
    public_url: Option<PublicUrl>,
    language: Language,
    output: &Output,
    database: &DatabaseArgs,
) -> Result<(), ServerError> {
    let channels = Arc::new(args.channels()?);
    let configured = channels.configured();
    if configured.is_empty() {
        return Err(ServerError::Config(
            "no alert channel is configured: set CLAIMCHECK_SMTP_URL (with \
             CLAIMCHECK_ALERT_EMAIL_FROM and CLAIMCHECK_ALERT_EMAIL_TO) or \
             CLAIMCHECK_ALERT_WEBHOOK_URL"
                .into(),
        ));
    }
    let store = open(database).await?;
    let dashboard = public_url
        .map(|u| u.as_str().to_owned())
        .unwrap_or_else(|| "http://127.0.0.1:3000".to_owned());
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "this machine".to_owned());
    let message = AlertWords::messages_in(language).test_message(&dashboard, &host);
    let mut results = Vec::new();
    for channel in configured {
        let started = std::time::Instant::now();
        let outcome = channels.send(channel, &message).await;
        store
            .alerts()
            .record_test(
                channel,
                &message,
                now_ms(),
                outcome.as_ref().map(|_| ()).map_err(String::as_str),
            )
            .await
            .map_err(database.error())?;
        results.push(TestResult {
            channel,
            target: channels.describe(channel),
            ok: outcome.is_ok(),
            error: outcome.err(),
            millis: started.elapsed().as_millis(),
        });
    }
    if output.json {
        print_json(&results)?;
    } else {
        let rows: Vec<Vec<String>> = results
            .iter()
            .map(|r| {
                vec![
                    r.channel.to_string(),
                    if r.ok { "sent".into() } else { "FAILED".into() },
                    format!("{} ms", r.millis),
                    r.target.clone(),
                    r.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        print(&table(&["CHANNEL", "RESULT", "TOOK", "TO", "ERROR"], &rows));
    }
    let failed = results.iter().filter(|r| !r.ok).count();
    if failed > 0 {
        return Err(ServerError::Command(format!(
            "{failed} of {} channel(s) failed the test",
            results.len()
        )));
    }
    Ok(())
}

async fn list(limit: i64, output: &Output, database: &DatabaseArgs) -> Result<(), ServerError> {
    let store = open(database).await?;
    let alerts = store
        .alerts()
        .recent(limit.clamp(1, 1000))
        .await
        .map_err(database.error())?;
    let deliveries = store
        .alerts()
        .deliveries(2000)
        .await
        .map_err(database.error())?;
    let listed: Vec<Listed> = alerts
        .into_iter()
        .map(|alert| Listed {
            open: alert.resolved_at.is_none(),
            deliveries: deliveries
                .iter()
                .filter(|d| d.alert_id == Some(alert.id))
                .cloned()
                .collect(),
            alert,
        })
        .collect();
    if output.json {
        return print_json(&listed);
    }
    if listed.is_empty() {
        print("No alert has been opened.");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|l| {
            let a = &l.alert;
            let sent = l
                .deliveries
                .iter()
                .map(|d| format!("{} {} {}", d.kind.as_str(), d.channel, d.status.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                a.id.to_string(),
                if l.open {
                    "OPEN".into()
                } else {
                    "resolved".into()
                },
                a.condition.to_string(),
                a.count.to_string(),
                time(a.since),
                time(Some(a.opened_at)),
                time(a.resolved_at),
                if sent.is_empty() { "-".into() } else { sent },
                a.summary.clone(),
            ]
        })
        .collect();
    print(&table(
        &[
            "ID",
            "STATE",
            "CONDITION",
            "COUNT",
            "SINCE",
            "OPENED",
            "RESOLVED",
            "MESSAGES",
            "SUMMARY",
        ],
        &rows,
    ));
    Ok(())
}
