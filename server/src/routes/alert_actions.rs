//! What operators on call do with an open alert, as plain form posts from the Alerts page
//! (`POST /dashboard/actions/alerts/{id}/acknowledge|snooze|resolve`): they work without
//! WASM, refuse a role that may not (support acknowledges and snoozes, admins resolve) before
//! reading anything, go through the engine's rules and its compare-and-set
//! (`claimcheck_core::alert_handling`), and answer with a redirect to the Alerts page
//! carrying what was done, or what happened instead. A refused note goes back to its form.

use app::api::alerts::action_path;
use app::flash::KeptForm;
use app::i18n::{names, td_string};
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::alert::{AlertCondition, Handling, SnoozeFor};
use claimcheck_core::alert_handling::{self, Handled, HandlingError, Refusal};
use claimcheck_core::audit::{Actor, ReasonError};
use claimcheck_core::language::group_thousands;
use claimcheck_core::{AlertView, now_ms};
use serde::Deserialize;

use super::AppState;
use super::actions::unavailable;
use super::redirect::{back, send_back};
use super::words::{Admin, Reading, Signed, Support};

/// Where every answer goes: the page the forms are on.
const PAGE: &str = "/alerts";

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/dashboard/actions/alerts/{id}/acknowledge",
            post(acknowledge),
        )
        .route("/dashboard/actions/alerts/{id}/snooze", post(snooze))
        .route("/dashboard/actions/alerts/{id}/resolve", post(resolve))
}

/// Acknowledge or snooze: the handling version the page showed, and an optional note.
#[derive(Deserialize)]
pub(super) struct TakeForm {
    #[serde(default)]
    seen: String,
    #[serde(default)]
    note: String,
    /// Snoozing only: `1h` or `1d`.
    #[serde(default)]
    length: String,
}

#[derive(Deserialize)]
pub(super) struct ResolveForm {
    #[serde(default)]
    note: String,
}

/// The version a form says its page showed; a form that does not say saw nothing current.
fn seen(form: &TakeForm) -> Option<i64> {
    form.seen.trim().parse().ok()
}

async fn acknowledge(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Support>,
    Path(id): Path<i64>,
    Form(form): Form<TakeForm>,
) -> Response {
    let actor = Actor::Dashboard(operator.username);
    let done =
        alert_handling::acknowledge(&state.store, id, seen(&form), &actor, &form.note, now_ms())
            .await;
    answer(reading, id, "acknowledge", &form.note, done)
}

async fn snooze(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Support>,
    Path(id): Path<i64>,
    Form(form): Form<TakeForm>,
) -> Response {
    let Ok(length) = form.length.trim().parse::<SnoozeFor>() else {
        let locale = reading.locale();
        return back(PAGE, "error", td_string!(locale, alerts.not_a_snooze));
    };
    let actor = Actor::Dashboard(operator.username);
    let done = alert_handling::snooze(
        &state.store,
        id,
        seen(&form),
        length,
        &actor,
        &form.note,
        now_ms(),
    )
    .await;
    answer(reading, id, "snooze", &form.note, done)
}

async fn resolve(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Admin>,
    Path(id): Path<i64>,
    Form(form): Form<ResolveForm>,
) -> Response {
    let actor = Actor::Dashboard(operator.username);
    let done = alert_handling::resolve(
        &state.store,
        &state.alert_policy,
        id,
        &actor,
        &form.note,
        now_ms(),
    )
    .await;
    answer(reading, id, "resolve", &form.note, done)
}

/// Back to the Alerts page with what was done, or why not; a note that was refused goes
/// back into the form of `action` it came from.
fn answer(
    reading: Reading,
    id: i64,
    action: &str,
    note: &str,
    done: Result<Handled, HandlingError>,
) -> Response {
    let locale = reading.locale();
    let title = |condition: AlertCondition| names::condition(locale, condition);
    let time = |ms: i64| reading.0.time(ms);
    let message = match done {
        Ok(handled) => {
            let title = title(handled.condition);
            let text = match (action, &handled.handling) {
                ("resolve", _) => td_string!(locale, alerts.done_resolved, title),
                (_, Handling::Snoozed { until, .. }) => {
                    td_string!(locale, alerts.done_snoozed, title, until = time(*until))
                }
                _ => td_string!(locale, alerts.done_acknowledged, title),
            };
            return back(PAGE, "notice", &text);
        }
        Err(HandlingError::Note(why)) => {
            let message = match why {
                ReasonError::Missing => td_string!(locale, alerts.note_required).to_string(),
                ReasonError::TooLong { max } => {
                    let separator = reading.0.language.thousands_separator();
                    let n = group_thousands(&note.trim().chars().count().to_string(), separator);
                    let max = group_thousands(&max.to_string(), separator);
                    if action == "resolve" {
                        td_string!(locale, alerts.note_too_long, n, max)
                    } else {
                        td_string!(locale, alerts.take_note_too_long, n, max)
                    }
                }
            };
            return keep(id, action, note, message);
        }
        Err(HandlingError::Refused { refusal, alert }) => refused(reading, refusal, &alert),
        Err(HandlingError::NotFound(id)) => td_string!(locale, alerts.no_alert, id),
        Err(HandlingError::Store(error)) => unavailable(reading, "alert action", &error),
    };
    back(PAGE, "error", &message)
}

/// What happened instead, from the alert as it now stands.
fn refused(reading: Reading, refusal: Refusal, alert: &AlertView) -> String {
    let locale = reading.locale();
    let title = names::condition(locale, alert.condition);
    let time = |ms: i64| reading.0.time(ms);
    match (refusal, alert.resolved_at, &alert.resolved_by) {
        (Refusal::Resolved, Some(at), Some(by)) => {
            td_string!(
                locale,
                alerts.refused_resolved_by_hand,
                by,
                title,
                at = time(at)
            )
        }
        (Refusal::Resolved, at, _) => td_string!(
            locale,
            alerts.refused_resolved_by_itself,
            title,
            at = time(at.unwrap_or(alert.checked_at))
        ),
        (Refusal::Changed | Refusal::AlreadyAcknowledged, ..) => {
            match alert.handling.at(now_ms()) {
                Handling::Acknowledged { by, at } => {
                    td_string!(
                        locale,
                        alerts.refused_acknowledged,
                        by,
                        title,
                        at = time(*at)
                    )
                }
                Handling::Snoozed { by, until, .. } => {
                    td_string!(
                        locale,
                        alerts.refused_snoozed,
                        by,
                        title,
                        until = time(*until)
                    )
                }
                Handling::Open => td_string!(locale, alerts.refused_changed, title),
            }
        }
    }
}

/// Back to the Alerts page with the refusal, the note given back to the form it came from
/// (the flash carries both: a link cannot put words in a form).
fn keep(id: i64, action: &str, note: &str, message: String) -> Response {
    send_back(KeptForm {
        page: PAGE.to_owned(),
        summary: message.clone(),
        errors: vec![("note".to_owned(), message)],
        values: vec![
            ("form".to_owned(), action_path(id, action)),
            ("note".to_owned(), note.to_owned()),
        ],
    })
}
