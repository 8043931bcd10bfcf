//! The dashboard's bulk re-drive actions as plain form posts (support and admin): start a
//! batch the operator confirmed by typing its count, cancel it, resume an interrupted one.
//! The engine does the work (`claimcheck_core::ops::bulk_redrive`); the batch runs in this
//! instance's background and its page follows it from the database.

use app::i18n::{Locale, explain, td_string};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::bulk::BulkFilter;
use claimcheck_core::ops::Actor;
use claimcheck_core::ops::bulk_redrive::{self, BulkError};
use claimcheck_core::{BatchId, ClaimState};
use serde::Deserialize;

use super::AppState;
use super::actions::unavailable;
use super::redirect::back;
use super::words::{Reading, Signed, Support};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/actions/bulk-redrive", post(start))
        .route("/dashboard/actions/bulk-redrive/cancel", post(cancel))
        .route("/dashboard/actions/bulk-redrive/resume", post(resume))
}

const PAGE: &str = "/claims/redrive";

/// An engine refusal as a sentence; storage failures are logged here and shown without
/// their internals.
fn refusal(reading: Reading, error: &BulkError) -> String {
    match error {
        BulkError::Store(cause) => unavailable(reading, "bulk re-drive", cause),
        other => explain::bulk(reading.locale(), other),
    }
}

/// The filter exactly as the preview resolved it (times in unix ms), the reason and the
/// count the operator typed.
#[derive(Deserialize)]
pub(super) struct StartForm {
    #[serde(default)]
    status: String,
    #[serde(default)]
    event_type: String,
    #[serde(default)]
    received_after: String,
    #[serde(default)]
    received_before: String,
    #[serde(default)]
    error_contains: String,
    #[serde(default)]
    search: String,
    /// The ticked claims, separated by spaces.
    #[serde(default)]
    event_ids: String,
    reason: String,
    #[serde(default)]
    confirm: String,
    /// The preview page to return to with an error (its query keeps the filter).
    #[serde(default)]
    back: String,
}

impl StartForm {
    fn filter(&self, locale: Locale) -> Result<BulkFilter, String> {
        let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        let ms = |s: &str| -> Result<Option<i64>, String> {
            match text(s) {
                None => Ok(None),
                Some(v) => v
                    .parse()
                    .map(Some)
                    .map_err(|_| td_string!(locale, messages.bulk_garbled).to_string()),
            }
        };
        let state = match text(&self.status) {
            None => None,
            Some(s) => Some(
                s.parse::<ClaimState>()
                    .map_err(|_| td_string!(locale, messages.bulk_garbled).to_string())?,
            ),
        };
        Ok(BulkFilter {
            state,
            event_type: text(&self.event_type),
            received_after: ms(&self.received_after)?,
            received_before: ms(&self.received_before)?,
            error_contains: text(&self.error_contains),
            search: text(&self.search),
            event_ids: self
                .event_ids
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
        })
    }
}

async fn start(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Support>,
    Form(form): Form<StartForm>,
) -> Response {
    let locale = reading.locale();
    if form.back.chars().any(char::is_control) {
        let detail = td_string!(locale, messages.back_not_a_path);
        return (
            StatusCode::BAD_REQUEST,
            td_string!(locale, messages.invalid, detail),
        )
            .into_response();
    }
    // Only back to the preview page itself, never elsewhere.
    let page = if form.back.starts_with(PAGE) && !form.back.contains("//") {
        form.back.clone()
    } else {
        PAGE.to_owned()
    };
    let filter = match form.filter(locale) {
        Ok(filter) => filter,
        Err(problem) => return back(&page, "error", &problem),
    };
    let Ok(confirmed) = form.confirm.trim().parse::<i64>() else {
        return back(&page, "error", td_string!(locale, messages.bulk_type_count));
    };
    let actor = Actor::Dashboard(operator.username);
    match bulk_redrive::start(&state.store, &actor, filter, &form.reason, confirmed).await {
        Ok(started) => {
            let batch_id = started.batch_id.clone();
            let total = started.total;
            state.bulk.spawn(started, actor);
            back(
                &format!("{PAGE}/{batch_id}"),
                "notice",
                &td_string!(locale, messages.bulk_started, total),
            )
        }
        Err(BulkError::Reason(claimcheck_core::audit::ReasonError::Missing)) => {
            back(&page, "error", td_string!(locale, messages.bulk_no_reason))
        }
        Err(error) => back(&page, "error", &refusal(reading, &error)),
    }
}

#[derive(Deserialize)]
pub(super) struct CancelForm {
    batch_id: String,
    /// The guard: a checkbox the operator ticks.
    #[serde(default)]
    confirm: String,
}

async fn cancel(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Support>,
    Form(form): Form<CancelForm>,
) -> Response {
    let locale = reading.locale();
    let Ok(batch_id) = BatchId::parse(form.batch_id.trim()) else {
        return back(PAGE, "error", td_string!(locale, messages.not_a_batch_id));
    };
    let page = format!("{PAGE}/{batch_id}");
    if form.confirm != "yes" {
        return back(&page, "error", td_string!(locale, messages.bulk_tick_box));
    }
    let actor = Actor::Dashboard(operator.username);
    match bulk_redrive::cancel(&state.store, &actor, &batch_id).await {
        Ok(batch) if batch.state.is_over() => {
            let (done, total, left) = (batch.done(), batch.total, batch.remaining());
            back(
                &page,
                "notice",
                &td_string!(locale, messages.bulk_cancelled, done, total, left),
            )
        }
        Ok(_) => back(&page, "notice", td_string!(locale, messages.bulk_stopping)),
        Err(error) => back(&page, "error", &refusal(reading, &error)),
    }
}

#[derive(Deserialize)]
pub(super) struct ResumeForm {
    batch_id: String,
    reason: String,
}

async fn resume(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Support>,
    Form(form): Form<ResumeForm>,
) -> Response {
    let locale = reading.locale();
    let Ok(batch_id) = BatchId::parse(form.batch_id.trim()) else {
        return back(PAGE, "error", td_string!(locale, messages.not_a_batch_id));
    };
    let page = format!("{PAGE}/{batch_id}");
    let actor = Actor::Dashboard(operator.username);
    match bulk_redrive::resume(&state.store, &actor, &batch_id, &form.reason).await {
        Ok(started) => {
            state.bulk.spawn(started, actor);
            back(&page, "notice", td_string!(locale, messages.bulk_resumed))
        }
        Err(error) => back(&page, "error", &refusal(reading, &error)),
    }
}
