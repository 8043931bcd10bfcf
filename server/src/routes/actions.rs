//! The dashboard's mutating actions as plain form posts (`POST /dashboard/actions/…`): they
//! work with or without WASM, check the operator's role on the server, go through the same
//! engine functions as the CLI, land in the audit log, and answer with a redirect to the page
//! they came from carrying a notice or an error.

use app::i18n::explain;
use app::i18n::{names, td_string};
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::auth::{AccessRefused, Role, SignedIn};
use claimcheck_core::money::parse_money;
use claimcheck_core::ops::{self, AccessChange, Actor, OpsError, Username};
use claimcheck_core::payments::{self, PaymentError};
use claimcheck_core::worker::{Attempt, RedriveRefused, Worker};
use claimcheck_core::{EventId, OrderId, StoreError};
use serde::Deserialize;

use super::AppState;
use super::auth::urlencode;
use super::words::Reading;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/actions/redrive", post(redrive))
        .route("/dashboard/actions/refund", post(refund))
        .route("/dashboard/actions/operators", post(add_operator))
        .route("/dashboard/actions/operators/access", post(set_access))
        .route("/dashboard/actions/reconcile", post(reconcile))
}

/// The operator, if signed in with at least `needed` (the engine's one guard); otherwise
/// the refusal, 401 or 403, in the reader's words. (The refusal is the handler's answer as
/// it stands, so it is not boxed.)
#[allow(clippy::result_large_err)]
pub(crate) fn require(
    reading: Reading,
    operator: Option<&SignedIn>,
    needed: Role,
) -> Result<&SignedIn, Response> {
    claimcheck_core::auth::require(operator, needed).map_err(|refused| {
        let locale = reading.locale();
        match refused {
            AccessRefused::SignIn => (
                StatusCode::UNAUTHORIZED,
                td_string!(locale, messages.sign_in).to_string(),
            )
                .into_response(),
            AccessRefused::Role { needed, have } => {
                let (needed, role) = (names::role(locale, needed), names::role(locale, have));
                (
                    StatusCode::FORBIDDEN,
                    td_string!(locale, messages.refused_role, needed, role),
                )
                    .into_response()
            }
        }
    })
}

/// Back to `page` (a dashboard path, possibly with a query) with a notice or an error.
pub(super) fn back(page: &str, key: &str, message: &str) -> Response {
    let joiner = if page.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{page}{joiner}{key}={}", urlencode(message))).into_response()
}

/// A storage failure, logged here once, as the sentence the operator sees.
pub(super) fn unavailable(reading: Reading, what: &str, error: &StoreError) -> String {
    tracing::error!(error = error as &dyn std::error::Error, "{what}: storage");
    td_string!(reading.locale(), messages.db_unavailable).to_string()
}

#[derive(Deserialize)]
pub(super) struct RedriveForm {
    event_id: String,
    reason: String,
}

async fn redrive(
    State(state): State<AppState>,
    reading: Reading,
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<RedriveForm>,
) -> Response {
    let operator = match require(reading, operator.as_deref(), Role::Support) {
        Ok(op) => op.clone(),
        Err(refused) => return refused,
    };
    let locale = reading.locale();
    let Ok(event_id) = EventId::parse(form.event_id.trim()) else {
        return back(
            "/claims",
            "error",
            td_string!(locale, messages.not_an_event_id),
        );
    };
    let page = format!("/events/{event_id}");
    let actor = Actor::Dashboard(operator.username.clone());
    let worker = Worker::new(
        state.store.clone(),
        actor.to_string(),
        (*state.worker).clone(),
    )
    .with_observer(state.webhook.metrics.clone());
    match worker.redrive(&event_id, &actor, form.reason.trim()).await {
        Ok(Ok(Attempt::Processed { .. })) => {
            back(&page, "notice", td_string!(locale, messages.redriven))
        }
        Ok(Ok(Attempt::Failed { error, gave_up, .. })) => {
            let message = if gave_up {
                td_string!(locale, messages.redrive_failed_final, error)
            } else {
                td_string!(locale, messages.redrive_failed_retry, error)
            };
            back(&page, "error", &message)
        }
        Ok(Ok(Attempt::LeaseLost { .. })) => back(
            &page,
            "error",
            td_string!(locale, messages.redrive_lease_lost),
        ),
        Ok(Ok(Attempt::Deferred { .. })) => back(
            &page,
            "error",
            td_string!(locale, messages.redrive_deferred),
        ),
        // Back to the form, which asks for the reason.
        Ok(Err(RedriveRefused::NoReason)) => back(
            &format!("{page}/redrive"),
            "error",
            td_string!(locale, messages.redrive_no_reason),
        ),
        Ok(Err(refused)) => {
            let why = explain::redrive(locale, &refused);
            back(
                &page,
                "error",
                &td_string!(locale, messages.not_redriven, why),
            )
        }
        Err(error) => back(&page, "error", &unavailable(reading, "re-drive", &error)),
    }
}

#[derive(Deserialize)]
pub(super) struct RefundForm {
    order_id: String,
    /// In the order's major unit (`24.50`); empty for what is left.
    #[serde(default)]
    amount: String,
    reason: String,
}

async fn refund(
    State(state): State<AppState>,
    reading: Reading,
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<RefundForm>,
) -> Response {
    let operator = match require(reading, operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused,
    };
    let locale = reading.locale();
    let Ok(order_id) = OrderId::parse(form.order_id.trim()) else {
        return back(
            "/orders",
            "error",
            td_string!(locale, messages.not_an_order_id),
        );
    };
    let page = format!("/orders/{order_id}");
    let form_page = format!("{page}/refund");
    let Some(stripe) = state.api.stripe.as_ref() else {
        return back(&page, "error", td_string!(locale, messages.refund_no_key));
    };
    let amount = if form.amount.trim().is_empty() {
        None
    } else {
        let currency = match state.store.orders().get(&order_id).await {
            Ok(Some(order)) => order.currency.unwrap_or_else(|| "chf".into()),
            Ok(None) => {
                return back(
                    "/orders",
                    "error",
                    &td_string!(locale, messages.no_order, id = order_id),
                );
            }
            Err(error) => return back(&page, "error", &unavailable(reading, "refund", &error)),
        };
        match parse_money(&form.amount, &currency) {
            Ok(minor) => Some(minor),
            Err(_) => {
                let amount = form.amount.trim();
                return back(
                    &form_page,
                    "error",
                    &td_string!(locale, messages.not_an_amount, amount),
                );
            }
        }
    };
    let actor = Actor::Dashboard(operator.username.clone());
    match payments::refund(
        &state.store,
        stripe,
        &order_id,
        amount,
        &actor,
        form.reason.trim(),
    )
    .await
    {
        Ok(done) if done.already_refunded => back(
            &page,
            "notice",
            td_string!(locale, messages.already_refunded),
        ),
        Ok(done) => {
            let currency = done.order.currency.as_deref().unwrap_or("chf");
            let amount = done
                .amount
                .map(|a| reading.0.money(a, currency))
                .unwrap_or_default();
            let refund = done
                .refund_id
                .unwrap_or_else(|| td_string!(locale, messages.refund_id_unknown).to_string());
            back(
                &page,
                "notice",
                &td_string!(locale, messages.refunded, amount, refund),
            )
        }
        Err(PaymentError::NoReason) => back(
            &form_page,
            "error",
            td_string!(locale, messages.refund_no_reason),
        ),
        Err(PaymentError::Store(error)) => {
            back(&page, "error", &unavailable(reading, "refund", &error))
        }
        Err(error) => {
            let why = explain::payment(locale, &error);
            back(
                &page,
                "error",
                &td_string!(locale, messages.not_refunded, why),
            )
        }
    }
}

#[derive(Deserialize)]
pub(super) struct OperatorForm {
    username: String,
    role: String,
    password: String,
}

async fn add_operator(
    State(state): State<AppState>,
    reading: Reading,
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<OperatorForm>,
) -> Response {
    let admin = match require(reading, operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused,
    };
    let locale = reading.locale();
    let username = match Username::parse(&form.username) {
        Ok(username) => username,
        Err(error) => return back("/operators", "error", &refusal(reading, &error)),
    };
    let Ok(role) = form.role.parse::<Role>() else {
        return back(
            "/operators",
            "error",
            td_string!(locale, messages.pick_role),
        );
    };
    let actor = Actor::Dashboard(admin.username);
    match ops::add_operator(&state.store, &actor, &username, role, form.password).await {
        Ok(()) => {
            let (name, role) = (username, names::role(locale, role));
            back(
                "/operators",
                "notice",
                &td_string!(locale, messages.operator_added, name, role),
            )
        }
        Err(error) => back("/operators", "error", &refusal(reading, &error)),
    }
}

#[derive(Deserialize)]
pub(super) struct AccessForm {
    username: String,
    /// disable | enable | remove
    action: String,
}

async fn set_access(
    State(state): State<AppState>,
    reading: Reading,
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<AccessForm>,
) -> Response {
    let admin = match require(reading, operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused,
    };
    let locale = reading.locale();
    let (username, change) = match (
        Username::parse(&form.username),
        form.action.parse::<AccessChange>(),
    ) {
        (Ok(username), Ok(change)) => (username, change),
        (Err(error), _) | (_, Err(error)) => {
            return back("/operators", "error", &refusal(reading, &error));
        }
    };
    let actor = Actor::Dashboard(admin.username);
    match ops::change_access(&state.store, &actor, &username, change).await {
        Ok(()) => {
            let name = username;
            let message = match change {
                AccessChange::Disable => td_string!(locale, messages.operator_disabled, name),
                AccessChange::Enable => td_string!(locale, messages.operator_enabled, name),
                AccessChange::Remove => td_string!(locale, messages.operator_removed, name),
                AccessChange::ResetTwoFactor => {
                    td_string!(locale, messages.operator_two_factor_reset, name)
                }
            };
            back("/operators", "notice", &message)
        }
        Err(error) => back("/operators", "error", &refusal(reading, &error)),
    }
}

/// An operations error as a notice: storage failures are logged here and shown without
/// their internals.
fn refusal(reading: Reading, error: &OpsError) -> String {
    match error {
        OpsError::Store(cause) => unavailable(reading, "operator action", cause),
        other => explain::ops(reading.locale(), other),
    }
}

#[derive(Deserialize)]
pub(super) struct ReconcileForm {
    reason: String,
}

/// Reconcile now (admins): one run through the same path as the periodic reconciler,
/// audited with the reason and what it found.
async fn reconcile(
    State(state): State<AppState>,
    reading: Reading,
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<ReconcileForm>,
) -> Response {
    let operator = match require(reading, operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused,
    };
    let locale = reading.locale();
    if form.reason.trim().is_empty() {
        return back(
            "/reconcile",
            "error",
            td_string!(locale, messages.reconcile_no_reason),
        );
    }
    let Some(stripe) = state.api.stripe.as_ref() else {
        return back("/", "error", td_string!(locale, messages.reconcile_no_key));
    };
    let actor = Actor::Dashboard(operator.username);
    let outcome = ops::reconcile_now(
        &state.store,
        stripe,
        &state.reconcile,
        &actor,
        form.reason.trim(),
        None,
        false,
    )
    .await;
    let (key, message) = match &outcome {
        Ok(report) => {
            let (listed, claimed) = (report.listed, report.claimed);
            (
                "notice",
                td_string!(locale, messages.reconciled, listed, claimed),
            )
        }
        Err(claimcheck_core::reconcile::ReconcileError::Busy) => (
            "error",
            td_string!(locale, messages.reconcile_busy).to_string(),
        ),
        Err(error) => (
            "error",
            td_string!(locale, messages.reconcile_failed, error),
        ),
    };
    back("/", key, &message)
}
