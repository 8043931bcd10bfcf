//! `claimcheck claims redrive --status … --reason …` and `claimcheck claims batch`: the
//! command-line adapter over `claimcheck_core::ops::bulk_redrive` (preview, confirmation,
//! the run with its progress on stderr, cancel and resume).

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use claimcheck_core::bulk::{BulkFilter, parse_age};
use claimcheck_core::observe::Unobserved;
use claimcheck_core::ops::Actor;
use claimcheck_core::ops::bulk_redrive::{self, BulkError, BulkPreview, Started, describe_filter};
use claimcheck_core::worker::WorkerConfig;
use claimcheck_core::{BatchId, BatchView, ClaimState, Store, now_ms};
use clap::Args;

use super::output::{Output, print, print_json, table, time};
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

/// Which claims a bulk re-drive takes (only pending, stale and failed ones, whatever else
/// is given).
#[derive(Debug, Clone, Default, Args)]
pub struct FilterArgs {
    /// Only claims in this state: pending, stale or failed.
    #[arg(long, value_parser = parse_redrivable, conflicts_with = "event_id")]
    pub status: Option<ClaimState>,
    /// Only events of this type (checkout.session.completed, charge.refunded, …).
    #[arg(long = "type", value_name = "TYPE", conflicts_with = "event_id")]
    pub event_type: Option<String>,
    /// Only claims received at least this long ago: 90s, 10m, 2h, 3d.
    #[arg(long, value_name = "AGE", conflicts_with = "event_id")]
    pub older_than: Option<String>,
    /// Only claims received at most this long ago.
    #[arg(long, value_name = "AGE", conflicts_with = "event_id")]
    pub newer_than: Option<String>,
    /// Only claims received at or after this time (2026-11-28 or 2026-11-28T10:00:00Z).
    #[arg(long, value_name = "TIME", conflicts_with = "event_id")]
    pub received_after: Option<String>,
    /// Only claims received before this time.
    #[arg(long, value_name = "TIME", conflicts_with = "event_id")]
    pub received_before: Option<String>,
    /// Only claims whose last error contains this text (any case).
    #[arg(long, value_name = "TEXT", conflicts_with = "event_id")]
    pub error_contains: Option<String>,
    /// Only claims about this event, session, order, payment intent or customer email.
    #[arg(long, value_name = "TERM", conflicts_with = "event_id")]
    pub search: Option<String>,
}

fn parse_redrivable(value: &str) -> Result<ClaimState, String> {
    match value.parse::<ClaimState>() {
        Ok(state) if state.is_redrivable() => Ok(state),
        _ => Err("expected one of pending, stale, failed".to_owned()),
    }
}

impl FilterArgs {
    pub fn given(&self) -> bool {
        self.status.is_some()
            || self.event_type.is_some()
            || self.older_than.is_some()
            || self.newer_than.is_some()
            || self.received_after.is_some()
            || self.received_before.is_some()
            || self.error_contains.is_some()
            || self.search.is_some()
    }

    /// The filter with its times made absolute at `now`.
    fn resolve(&self, now: i64) -> Result<BulkFilter, ServerError> {
        let age = |flag: &str, text: &Option<String>| -> Result<Option<i64>, ServerError> {
            text.as_deref()
                .map(|t| {
                    parse_age(t)
                        .map(|ms| now - ms)
                        .map_err(|e| ServerError::Command(format!("--{flag}: {e}")))
                })
                .transpose()
        };
        let at = |flag: &str, text: &Option<String>| -> Result<Option<i64>, ServerError> {
            text.as_deref().map(|t| parse_time(flag, t)).transpose()
        };
        let later = |a: Option<i64>, b: Option<i64>| a.max(b);
        let earlier = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(BulkFilter {
            state: self.status,
            event_type: self.event_type.clone(),
            received_after: later(
                age("newer-than", &self.newer_than)?,
                at("received-after", &self.received_after)?,
            ),
            received_before: earlier(
                age("older-than", &self.older_than)?,
                at("received-before", &self.received_before)?,
            ),
            error_contains: self.error_contains.clone(),
            search: self.search.clone(),
            // The command line names one claim with --event-id, or selects by filter.
            event_ids: Vec::new(),
        })
    }
}

fn parse_time(flag: &str, text: &str) -> Result<i64, ServerError> {
    let text = text.trim();
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
        .ok_or_else(|| {
            ServerError::Command(format!(
                "--{flag} '{text}': a date like 2026-11-28 or a time like 2026-11-28T10:00:00Z"
            ))
        })
}

/// What the operator asked for on the command line.
pub struct BulkRequest<'a> {
    pub filter: &'a FilterArgs,
    pub reason: &'a str,
    pub dry_run: bool,
    pub yes: bool,
    pub output: &'a Output,
    pub database: &'a DatabaseArgs,
    pub worker: WorkerConfig,
}

fn refused(error: BulkError, database: &DatabaseArgs) -> ServerError {
    match error {
        BulkError::Store(source) => (database.error())(source),
        other => ServerError::Command(format!("bulk re-drive: {other}")),
    }
}

/// Preview, confirm, run: the whole of `claims redrive` with a filter.
pub async fn redrive(store: Store, request: BulkRequest<'_>) -> Result<(), ServerError> {
    let database = request.database;
    let filter = request.filter.resolve(now_ms())?;
    let preview = bulk_redrive::preview(&store, &request.worker, filter, now_ms())
        .await
        .map_err(|e| refused(e, database))?;
    if request.dry_run || !request.output.json {
        show_preview(&preview, request.output)?;
    }
    if request.dry_run {
        return Ok(());
    }
    if preview.claims == 0 {
        return Err(ServerError::Command(
            "bulk re-drive: no pending, stale or failed claim matches the filter".into(),
        ));
    }
    if request.reason.trim().is_empty() {
        return Err(ServerError::Command(
            "bulk re-drive: a reason is required (--reason)".into(),
        ));
    }
    if !request.yes {
        confirm(preview.claims).await?;
    }
    let actor = Actor::cli();
    let started = bulk_redrive::start(
        &store,
        &actor,
        preview.filter.clone(),
        request.reason,
        preview.claims,
    )
    .await
    .map_err(|e| refused(e, database))?;
    let batch = run_in_foreground(&store, &request.worker, &started, &actor)
        .await
        .map_err(|e| refused(e, database))?;
    finish(&batch, request.output)
}

/// Reads the count from stdin; anything else (nothing, end of input) refuses.
async fn confirm(count: i64) -> Result<(), ServerError> {
    let refuse = |why: String| {
        ServerError::Command(format!(
            "bulk re-drive refused: {why}; nothing was re-driven. Type the count ({count}) \
             when asked, or pass --yes"
        ))
    };
    let answer = tokio::task::spawn_blocking(move || {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            eprint!("Type {count} to re-drive these {count} claims: ");
            let _ = std::io::stderr().flush();
        }
        let mut line = String::new();
        stdin.lock().read_line(&mut line).map(|n| (n, line))
    })
    .await
    .map_err(|e| refuse(format!("cannot read the confirmation ({e})")))?;
    match answer {
        Ok((0, _)) => Err(refuse("no confirmation on stdin".into())),
        Ok((_, line)) if line.trim() == count.to_string() => Ok(()),
        Ok((_, line)) => Err(refuse(format!("'{}' is not {count}", line.trim()))),
        Err(e) => Err(refuse(format!("cannot read stdin ({e})"))),
    }
}

/// Runs the batch in this process, its progress on stderr once a second; Ctrl-C stops it
/// between two claims and leaves it interrupted (resume it with `claims batch ID --resume`).
async fn run_in_foreground(
    store: &Store,
    worker: &WorkerConfig,
    started: &Started,
    actor: &Actor,
) -> Result<BatchView, BulkError> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let interrupt = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stop.send(true);
        }
    });
    progress(&format!(
        "batch {}: {} claims, running (cancel from the dashboard or with \
         `claimcheck claims batch {} --cancel`)",
        started.batch_id, started.total, started.batch_id
    ));
    // A command's attempts are its own process's; the server's metrics never see them.
    let run = bulk_redrive::run(store, worker, Arc::new(Unobserved), started, actor, stopped);
    tokio::pin!(run);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let batch = loop {
        tokio::select! {
            batch = &mut run => break batch?,
            _ = tick.tick() => {
                if let Ok(Some(batch)) = store.bulk_redrives().get(&started.batch_id, now_ms()).await {
                    progress(&format!("  {}/{} ({})", batch.done(), batch.total, counts(&batch)));
                }
            }
        }
    };
    interrupt.abort();
    Ok(batch)
}

#[allow(clippy::print_stderr)]
fn progress(line: &str) {
    eprintln!("{line}");
}

fn counts(batch: &BatchView) -> String {
    format!(
        "{} processed, {} failed, {} skipped",
        batch.processed, batch.failed, batch.skipped
    )
}

fn show_preview(preview: &BulkPreview, output: &Output) -> Result<(), ServerError> {
    if output.json {
        return print_json(preview);
    }
    let mut text = format!(
        "{} claims selected ({})\n{} distinct orders; {} already have their credits (a \
         re-drive does not grant them again)\n",
        preview.claims,
        describe_filter(&preview.filter),
        preview.orders,
        preview.orders_credited,
    );
    if preview.without_order > 0 {
        text.push_str(&format!(
            "{} claims are about a payment no order is known for yet\n",
            preview.without_order
        ));
    }
    if preview.unplannable > 0 {
        text.push_str(&format!(
            "{} claims cannot be fulfilled as they stand and will fail again\n",
            preview.unplannable
        ));
    }
    if !preview.first.is_empty() {
        let rows: Vec<Vec<String>> = preview
            .first
            .iter()
            .map(|r| {
                vec![
                    r.claim.event_id.clone(),
                    r.claim.event_type.clone(),
                    r.claim.status.to_string(),
                    r.claim.attempts.to_string(),
                    r.order_id.clone().unwrap_or_else(|| "-".into()),
                    if r.credited { "yes" } else { "no" }.to_owned(),
                    r.claim.last_error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        text.push('\n');
        text.push_str(&table(
            &[
                "EVENT",
                "TYPE",
                "STATE",
                "ATTEMPTS",
                "ORDER",
                "CREDITED",
                "LAST ERROR",
            ],
            &rows,
        ));
        if preview.claims > preview.first.len() as i64 {
            text.push_str(&format!(
                "\n… and {} more",
                preview.claims - preview.first.len() as i64
            ));
        }
    }
    print(text.trim_end());
    Ok(())
}

/// Prints the batch and fails the command when claims failed again or it did not finish.
fn finish(batch: &BatchView, output: &Output) -> Result<(), ServerError> {
    if output.json {
        print_json(batch)?;
    } else {
        show_batch(batch);
    }
    match batch.state {
        claimcheck_core::bulk::BatchState::Finished if batch.failed == 0 => Ok(()),
        claimcheck_core::bulk::BatchState::Finished => Err(ServerError::Command(format!(
            "batch {}: {} claims failed again",
            batch.batch_id, batch.failed
        ))),
        state => Err(ServerError::Command(format!(
            "batch {} is {state} after {} of {} claims",
            batch.batch_id,
            batch.done(),
            batch.total
        ))),
    }
}

fn show_batch(batch: &BatchView) {
    let mut text = format!(
        "batch      {}\nstate      {}\nprogress   {}/{} ({})\nfilter     {}\nby         {}\n\
         reason     {}\nstarted    {}\nended      {}\n",
        batch.batch_id,
        batch.state,
        batch.done(),
        batch.total,
        counts(batch),
        describe_filter(&batch.filter),
        batch.actor,
        batch.reason,
        time(Some(batch.created_at)),
        time(batch.finished_at),
    );
    if let Some(by) = &batch.cancel_requested_by {
        text.push_str(&format!(
            "cancelled  by {by}; {} claims untouched\n",
            batch.remaining()
        ));
    }
    print(text.trim_end());
}

/// `claimcheck claims batch ID [--cancel | --resume --reason …]`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    pub batch_id: BatchId,
    /// Stop the batch before its next claim.
    #[arg(long, conflicts_with = "resume")]
    pub cancel: bool,
    /// Run the claims an interrupted batch had not reached, here and now.
    #[arg(long, requires = "reason")]
    pub resume: bool,
    /// Why you resume it (kept in the audit log).
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub output: Output,
}

pub async fn batch(
    store: Store,
    args: BatchArgs,
    database: &DatabaseArgs,
    worker: WorkerConfig,
) -> Result<(), ServerError> {
    let actor = Actor::cli();
    if args.cancel {
        let batch = bulk_redrive::cancel(&store, &actor, &args.batch_id)
            .await
            .map_err(|e| refused(e, database))?;
        if args.output.json {
            return print_json(&batch);
        }
        print(&format!(
            "batch {}: asked to stop; it stops before its next claim ({} of {} done)",
            batch.batch_id,
            batch.done(),
            batch.total
        ));
        return Ok(());
    }
    if args.resume {
        let started = bulk_redrive::resume(
            &store,
            &actor,
            &args.batch_id,
            args.reason.as_deref().unwrap_or_default(),
        )
        .await
        .map_err(|e| refused(e, database))?;
        let batch = run_in_foreground(&store, &worker, &started, &actor)
            .await
            .map_err(|e| refused(e, database))?;
        return finish(&batch, &args.output);
    }
    let batch = store
        .bulk_redrives()
        .get(&args.batch_id, now_ms())
        .await
        .map_err(database.error())?
        .ok_or_else(|| ServerError::Command(format!("no batch {}", args.batch_id)))?;
    if args.output.json {
        return print_json(&batch);
    }
    show_batch(&batch);
    Ok(())
}

/// `claimcheck claims batches`: the latest batches.
pub async fn batches(store: Store, limit: i64, output: &Output) -> Result<(), ServerError> {
    let batches = store
        .bulk_redrives()
        .recent(now_ms(), limit)
        .await
        .map_err(|e| ServerError::Command(format!("cannot read the batches: {e}")))?;
    if output.json {
        return print_json(&batches);
    }
    if batches.is_empty() {
        print("No bulk re-drives yet.");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = batches
        .iter()
        .map(|b| {
            vec![
                b.batch_id.clone(),
                b.state.to_string(),
                format!("{}/{}", b.done(), b.total),
                b.failed.to_string(),
                b.skipped.to_string(),
                b.actor.clone(),
                time(Some(b.created_at)),
                b.reason.clone(),
            ]
        })
        .collect();
    print(&table(
        &[
            "BATCH", "STATE", "DONE", "FAILED", "SKIPPED", "BY", "STARTED", "REASON",
        ],
        &rows,
    ));
    Ok(())
}
