//! `claimcheck reconcile`: claim the events Stripe never delivered, now.

use claimcheck_core::now_ms;
use claimcheck_core::ops::{self, Actor};
use claimcheck_core::reconcile::ReconcileConfig;

use super::open;
use super::output::{Output, print, print_json, table, time};
use crate::config::flags::{DatabaseArgs, ModeArg, StripeArgs};
use crate::config::span::parse_duration;
use crate::error::ServerError;

/// `claimcheck reconcile`: one run now, audited as `cli:$USER`.
#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    /// List events created since then: `72h`, `3d` ago, or a time like
    /// 2026-11-28T00:00:00Z. Default: the reconciler's cursor minus an hour (three days back
    /// the first time); never more than 30 days.
    #[arg(long)]
    since: Option<String>,
    /// Count what would be claimed; claim nothing, keep the cursor.
    #[arg(long)]
    dry_run: bool,
    /// Which Stripe mode's events are claimed.
    #[arg(
        long = "stripe-mode",
        env = "CLAIMCHECK_STRIPE_MODE",
        value_name = "CLAIMCHECK_STRIPE_MODE",
        default_value = "test"
    )]
    stripe_mode: ModeArg,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    stripe: StripeArgs,
}

/// When `--since` means: a duration ago, or an RFC 3339 time; unix seconds.
fn since_secs(text: &str, now_secs: i64) -> Result<i64, ServerError> {
    if let Ok(ago) = parse_duration(text) {
        return Ok(now_secs - i64::try_from(ago.as_secs()).unwrap_or(i64::MAX / 2));
    }
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.timestamp())
        .map_err(|_| {
            ServerError::Command(format!(
                "--since '{text}': a duration (72h, 3d) or a time like 2026-11-28T00:00:00Z"
            ))
        })
}

pub async fn run(args: ReconcileArgs) -> Result<(), ServerError> {
    let api = args.stripe.api()?.ok_or_else(|| {
        ServerError::Config(
            "reconciling needs STRIPE_API_KEY (and STRIPE_API_BASE for a simulator)".into(),
        )
    })?;
    let since = args
        .since
        .as_deref()
        .map(|s| since_secs(s, now_ms() / 1000))
        .transpose()?;
    let store = open(&args.database).await?;
    let config = ReconcileConfig {
        mode: args.stripe_mode.into(),
        ..ReconcileConfig::default()
    };
    let report = ops::reconcile_now(
        &store,
        &api,
        &config,
        &Actor::cli(),
        "claimcheck reconcile",
        since,
        args.dry_run,
    )
    .await
    .map_err(|e| ServerError::Command(format!("reconcile: {e}")))?;
    if args.output.json {
        return print_json(&report);
    }
    let rows: Vec<Vec<String>> = report
        .per_type
        .iter()
        .map(|(kind, c)| {
            vec![
                kind.clone(),
                c.listed.to_string(),
                c.already_claimed.to_string(),
                c.claimed.to_string(),
            ]
        })
        .collect();
    let claimed = if report.dry_run {
        "WOULD CLAIM"
    } else {
        "CLAIMED NOW"
    };
    let mut text = format!(
        "events since {} ({} page(s)): {} listed, {} already claimed, {} {}{}\n\n",
        time(Some(report.since * 1000)),
        report.pages,
        report.listed,
        report.already_claimed,
        report.claimed,
        if report.dry_run {
            "would be claimed"
        } else {
            "claimed now"
        },
        if report.skipped > 0 {
            format!(", {} skipped (other mode)", report.skipped)
        } else {
            String::new()
        }
    );
    text.push_str(&table(
        &["TYPE", "LISTED", "ALREADY CLAIMED", claimed],
        &rows,
    ));
    print(&text);
    Ok(())
}
