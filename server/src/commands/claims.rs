//! `claimcheck claims`: list and show claims, re-drive a stuck one or every claim a filter
//! selects (see `bulk_redrive.rs`), and follow, cancel or resume a batch.

use claimcheck_core::ops::Actor;
use claimcheck_core::worker::{Attempt, Worker, WorkerConfig};
use claimcheck_core::{ClaimState, EventId, now_ms};
use clap::Subcommand;
use serde::Serialize;

use super::bulk_redrive::{self, BatchArgs, BulkRequest, FilterArgs};
use super::open;
use super::output::{Output, print, print_json, table, time};
use crate::config::flags::{DatabaseArgs, StripeArgs, WorkerArgs};
use crate::error::ServerError;

#[derive(Debug, Subcommand)]
pub enum ClaimsCommand {
    /// Claims, newest first.
    List {
        /// Only claims in this state.
        #[arg(long, value_parser = parse_state)]
        status: Option<ClaimState>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: i64,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// One claim with its deliveries.
    Show {
        event_id: EventId,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Run a pending, stale or failed claim now, through the worker's idempotent path; or,
    /// with a filter instead of an event id, every claim it selects, as one batch: a preview
    /// first, then the count typed on stdin (or --yes), then each claim in turn.
    Redrive {
        /// The claim to re-drive (leave it out and give a filter for a bulk re-drive).
        #[arg(required_unless_present_any = [
            "status", "event_type", "older_than", "newer_than", "received_after",
            "received_before", "error_contains", "search",
        ])]
        event_id: Option<EventId>,
        /// Why (kept in the audit log).
        #[arg(long, required_unless_present = "dry_run")]
        reason: Option<String>,
        #[command(flatten)]
        filter: FilterArgs,
        /// Bulk: show what would be re-driven, and stop.
        #[arg(long, conflicts_with = "event_id")]
        dry_run: bool,
        /// Bulk: confirm without typing the count.
        #[arg(long, conflicts_with = "event_id")]
        yes: bool,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        worker: WorkerArgs,
        /// Read what an invoice leaves out (its subscription's reference) from Stripe, as
        /// `serve`'s workers do; without a key such a claim fails again with why.
        #[command(flatten)]
        stripe: Box<StripeArgs>,
    },
    /// Bulk re-drives, newest first.
    Batches {
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// One bulk re-drive: its progress and counts; cancel it, or resume an interrupted one.
    Batch {
        #[command(flatten)]
        batch: BatchArgs,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        worker: WorkerArgs,
        #[command(flatten)]
        stripe: Box<StripeArgs>,
    },
}

/// The claim's state, and for a newer version's claim that it waits for that version.
fn status_of(claim: &claimcheck_core::ClaimView) -> String {
    if claim.waits_for_a_newer_version() {
        format!("{} (waiting for a newer version)", claim.status)
    } else {
        claim.status.to_string()
    }
}

/// The worker's settings, with the Stripe client when a key is set.
fn worker_config(worker: &WorkerArgs, stripe: &StripeArgs) -> Result<WorkerConfig, ServerError> {
    Ok(WorkerConfig {
        stripe: stripe.api()?,
        ..worker.config()
    })
}

fn parse_state(value: &str) -> Result<ClaimState, String> {
    value
        .parse()
        .map_err(|_| "expected one of pending, running, stale, failed, processed".to_owned())
}

pub async fn run(command: ClaimsCommand) -> Result<(), ServerError> {
    match command {
        ClaimsCommand::List {
            status,
            limit,
            output,
            database,
        } => {
            let store = open(&database).await?;
            let claims = store
                .claims()
                .list(status, now_ms(), limit)
                .await
                .map_err(database.error())?;
            if output.json {
                return print_json(&claims);
            }
            if claims.is_empty() {
                print("No claims.");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = claims
                .iter()
                .map(|c| {
                    vec![
                        c.event_id.clone(),
                        c.event_type.clone(),
                        c.object_id.clone(),
                        status_of(c),
                        c.attempts.to_string(),
                        c.last_error.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            print(&table(
                &[
                    "EVENT",
                    "TYPE",
                    "OBJECT",
                    "STATUS",
                    "ATTEMPTS",
                    "LAST ERROR",
                ],
                &rows,
            ));
            Ok(())
        }
        ClaimsCommand::Show {
            event_id,
            output,
            database,
        } => {
            let store = open(&database).await?;
            let wrap = database.error();
            let claim = store
                .claims()
                .get(&event_id, now_ms())
                .await
                .map_err(&wrap)?
                .ok_or_else(|| ServerError::Command(format!("no claim has event id {event_id}")))?;
            let deliveries = store.claims().deliveries(&event_id).await.map_err(&wrap)?;
            if output.json {
                #[derive(Serialize)]
                struct Shown<'a> {
                    #[serde(flatten)]
                    claim: &'a claimcheck_core::ClaimView,
                    delivery_log: &'a [claimcheck_core::DeliveryView],
                }
                return print_json(&Shown {
                    claim: &claim,
                    delivery_log: &deliveries,
                });
            }
            let mut text = format!(
                "event      {}\ntype       {}\nobject     {}\nstatus     {}\nattempts   {}\n\
                 last error {}\nlease      {} until {}\nreceived   {}\nprocessed  {}\n\
                 deliveries {}\n",
                claim.event_id,
                claim.event_type,
                claim.object_id,
                status_of(&claim),
                claim.attempts,
                claim.last_error.as_deref().unwrap_or("-"),
                claim.lease_owner.as_deref().unwrap_or("-"),
                time(claim.lease_expires_at),
                time(Some(claim.received_at)),
                time(claim.processed_at),
                claim.deliveries,
            );
            for d in &deliveries {
                text.push_str(&format!(
                    "  {}  {}{}\n",
                    time(Some(d.received_at)),
                    d.outcome,
                    d.duplicate_of
                        .as_deref()
                        .map(|o| format!(" (claimed by {o})"))
                        .unwrap_or_default()
                ));
            }
            print(text.trim_end());
            Ok(())
        }
        ClaimsCommand::Batches {
            limit,
            output,
            database,
        } => bulk_redrive::batches(open(&database).await?, limit, &output).await,
        ClaimsCommand::Batch {
            batch,
            database,
            worker,
            stripe,
        } => {
            let store = open(&database).await?;
            let worker = worker_config(&worker, &stripe)?;
            bulk_redrive::batch(store, batch, &database, worker).await
        }
        ClaimsCommand::Redrive {
            event_id,
            reason,
            filter,
            dry_run,
            yes,
            output,
            database,
            worker,
            stripe,
        } => {
            let store = open(&database).await?;
            let worker = worker_config(&worker, &stripe)?;
            let Some(event_id) = event_id else {
                return bulk_redrive::redrive(
                    store,
                    BulkRequest {
                        filter: &filter,
                        reason: reason.as_deref().unwrap_or_default(),
                        dry_run,
                        yes,
                        output: &output,
                        database: &database,
                        worker,
                    },
                )
                .await;
            };
            let actor = Actor::cli();
            let runner = Worker::new(store, actor.to_string(), worker);
            let result = runner
                .redrive(&event_id, &actor, reason.as_deref().unwrap_or_default())
                .await
                .map_err(database.error())?;
            let (verdict, detail, ok) = match &result {
                Ok(Attempt::Processed { .. }) => ("processed", String::new(), true),
                Ok(Attempt::Failed { error, gave_up, .. }) => (
                    if *gave_up {
                        "failed"
                    } else {
                        "retry_scheduled"
                    },
                    error.clone(),
                    false,
                ),
                Ok(Attempt::LeaseLost { .. }) => ("lease_lost", String::new(), false),
                Ok(Attempt::Deferred { .. }) => (
                    "deferred",
                    "the database was unavailable; it will run again".to_owned(),
                    false,
                ),
                Err(refused) => ("refused", refused.to_string(), false),
            };
            if output.json {
                print_json(&serde_json::json!({
                    "event_id": event_id.as_str(),
                    "result": verdict,
                    "detail": detail,
                }))?;
            } else if detail.is_empty() {
                print(&format!("{event_id}: {verdict}"));
            } else {
                print(&format!("{event_id}: {verdict}: {detail}"));
            }
            if ok {
                Ok(())
            } else {
                Err(ServerError::Command(format!(
                    "re-drive of {event_id}: {verdict}"
                )))
            }
        }
    }
}
