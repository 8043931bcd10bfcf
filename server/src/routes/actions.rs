//! The dashboard's mutating actions as plain form posts (`POST /dashboard/actions/…`): they
//! work with or without WASM, check the operator's role on the server, go through the same
//! engine functions as the CLI, land in the audit log, and answer with a redirect to the page
//! they came from carrying a notice or an error.

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::auth::{Role, SignedIn};
use claimcheck_core::money::{format_money, parse_money};
use claimcheck_core::ops::{self, AccessChange, Actor, OpsError, Username};
use claimcheck_core::payments;
use claimcheck_core::worker::{Attempt, Worker};
use claimcheck_core::{EventId, OrderId};
use serde::Deserialize;

use super::AppState;
use super::auth::urlencode;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/actions/redrive", post(redrive))
        .route("/dashboard/actions/refund", post(refund))
        .route("/dashboard/actions/operators", post(add_operator))
        .route("/dashboard/actions/operators/access", post(set_access))
        .route("/dashboard/actions/reconcile", post(reconcile))
}

/// Why an action was refused before it ran.
pub(crate) enum Refused {
    SignIn,
    Role { needed: Role, have: Role },
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::SignIn => (StatusCode::UNAUTHORIZED, "Sign in first.").into_response(),
            Refused::Role { needed, have } => (
                StatusCode::FORBIDDEN,
                format!("Refused: this needs the {needed} role; you are {have}."),
            )
                .into_response(),
        }
    }
}

/// The operator, if signed in with at least `needed`.
pub(crate) fn require(operator: Option<&SignedIn>, needed: Role) -> Result<&SignedIn, Refused> {
    match operator {
        None => Err(Refused::SignIn),
        Some(op) if !op.role.allows(needed) => Err(Refused::Role {
            needed,
            have: op.role,
        }),
        Some(op) => Ok(op),
    }
}

/// Back to `page` (a dashboard path, possibly with a query) with a notice or an error.
pub(super) fn back(page: &str, key: &str, message: &str) -> Response {
    let joiner = if page.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{page}{joiner}{key}={}", urlencode(message))).into_response()
}

#[derive(Deserialize)]
pub(super) struct RedriveForm {
    event_id: String,
    reason: String,
}

async fn redrive(
    State(state): State<AppState>,
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<RedriveForm>,
) -> Response {
    let operator = match require(operator.as_deref(), Role::Support) {
        Ok(op) => op.clone(),
        Err(refused) => return refused.into_response(),
    };
    let Ok(event_id) = EventId::parse(form.event_id.trim()) else {
        return back("/claims", "error", "That is not an event id.");
    };
    let page = format!("/events/{event_id}");
    if form.reason.trim().is_empty() {
        return back(
            &format!("{page}/redrive"),
            "error",
            "Say why you re-drive it.",
        );
    }
    let actor = Actor::Dashboard(operator.username.clone());
    let worker = Worker::new(
        state.store.clone(),
        actor.to_string(),
        (*state.worker).clone(),
    )
    .with_observer(state.webhook.metrics.clone());
    match worker.redrive(&event_id, &actor, form.reason.trim()).await {
        Ok(Ok(Attempt::Processed { .. })) => back(&page, "notice", "Re-driven: processed."),
        Ok(Ok(Attempt::Failed { error, gave_up, .. })) => back(
            &page,
            "error",
            &format!(
                "Re-driven, but it failed again{}: {error}",
                if gave_up {
                    " and is failed"
                } else {
                    "; it will be retried"
                }
            ),
        ),
        Ok(Ok(Attempt::LeaseLost { .. })) => back(
            &page,
            "error",
            "Another worker took this claim over while it ran; nothing was written twice.",
        ),
        Ok(Ok(Attempt::Deferred { .. })) => back(
            &page,
            "error",
            "The database was unavailable the whole time; the claim will run again by itself.",
        ),
        Ok(Err(refused)) => back(&page, "error", &format!("Not re-driven: {refused}.")),
        Err(error) => {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "re-drive: storage"
            );
            back(
                &page,
                "error",
                "The database is unavailable. Try again in a moment.",
            )
        }
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
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<RefundForm>,
) -> Response {
    let operator = match require(operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused.into_response(),
    };
    let Ok(order_id) = OrderId::parse(form.order_id.trim()) else {
        return back("/orders", "error", "That is not an order id.");
    };
    let page = format!("/orders/{order_id}");
    if form.reason.trim().is_empty() {
        return back(&format!("{page}/refund"), "error", "Say why you refund it.");
    }
    let Some(stripe) = state.api.stripe.as_ref() else {
        return back(&page, "error", "Refunds need STRIPE_API_KEY on the server.");
    };
    let amount = if form.amount.trim().is_empty() {
        None
    } else {
        let currency = match state.store.orders().get(&order_id).await {
            Ok(Some(order)) => order.currency.unwrap_or_else(|| "chf".into()),
            Ok(None) => return back("/orders", "error", "No such order."),
            Err(error) => {
                tracing::error!(error = &error as &dyn std::error::Error, "refund: storage");
                return back(
                    &page,
                    "error",
                    "The database is unavailable. Try again in a moment.",
                );
            }
        };
        match parse_money(&form.amount, &currency) {
            Ok(minor) => Some(minor),
            Err(problem) => return back(&format!("{page}/refund"), "error", &problem),
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
        Ok(done) if done.already_refunded => back(&page, "notice", "It was already refunded."),
        Ok(done) => {
            let currency = done.order.currency.as_deref().unwrap_or("chf");
            back(
                &page,
                "notice",
                &format!(
                    "Refunded {} ({}); credits revoked in proportion.",
                    done.amount
                        .map(|a| format_money(a, currency))
                        .unwrap_or_default(),
                    done.refund_id.as_deref().unwrap_or("refund id unknown")
                ),
            )
        }
        Err(error) => back(&page, "error", &format!("Not refunded: {error}")),
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
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<OperatorForm>,
) -> Response {
    let admin = match require(operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused.into_response(),
    };
    let username = match Username::parse(&form.username) {
        Ok(username) => username,
        Err(error) => return back("/operators", "error", &sentence(&error)),
    };
    let Ok(role) = form.role.parse::<Role>() else {
        return back(
            "/operators",
            "error",
            "Pick a role: viewer, support or admin.",
        );
    };
    let actor = Actor::Dashboard(admin.username);
    match ops::add_operator(&state.store, &actor, &username, role, form.password).await {
        Ok(()) => back(
            "/operators",
            "notice",
            &format!("Added {username} ({role})."),
        ),
        Err(error) => back("/operators", "error", &refusal(&error)),
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
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<AccessForm>,
) -> Response {
    let admin = match require(operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused.into_response(),
    };
    let (username, change) = match (
        Username::parse(&form.username),
        form.action.parse::<AccessChange>(),
    ) {
        (Ok(username), Ok(change)) => (username, change),
        (Err(error), _) | (_, Err(error)) => {
            return back("/operators", "error", &sentence(&error));
        }
    };
    let actor = Actor::Dashboard(admin.username);
    match ops::change_access(&state.store, &actor, &username, change).await {
        Ok(()) => back(
            "/operators",
            "notice",
            &format!("{username}: {}.", change.done()),
        ),
        Err(error) => back("/operators", "error", &refusal(&error)),
    }
}

/// An operations error as a notice: storage failures are logged here and shown without
/// their internals.
fn refusal(error: &OpsError) -> String {
    if let OpsError::Store(cause) = error {
        tracing::error!(
            error = cause as &dyn std::error::Error,
            "operator action: storage"
        );
        return "The database is unavailable. Try again in a moment.".into();
    }
    sentence(error)
}

/// `no operator ana` → `No operator ana.`
pub(super) fn sentence(error: &dyn std::fmt::Display) -> String {
    let text = error.to_string();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => text,
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
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<ReconcileForm>,
) -> Response {
    let operator = match require(operator.as_deref(), Role::Admin) {
        Ok(op) => op.clone(),
        Err(refused) => return refused.into_response(),
    };
    if form.reason.trim().is_empty() {
        return back("/reconcile", "error", "Say why you reconcile now.");
    }
    let Some(stripe) = state.api.stripe.as_ref() else {
        return back(
            "/",
            "error",
            "Reconciling needs STRIPE_API_KEY on the server.",
        );
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
            state
                .webhook
                .metrics
                .observe_reconcile(Some((report.listed, report.claimed)));
            (
                "notice",
                format!(
                    "Reconciled: {} events listed, {} claimed that Stripe never delivered.",
                    report.listed, report.claimed
                ),
            )
        }
        Err(claimcheck_core::reconcile::ReconcileError::Busy) => (
            "error",
            "A reconcile run is under way already; look again in a moment.".to_owned(),
        ),
        Err(error) => {
            state.webhook.metrics.observe_reconcile(None);
            ("error", format!("Reconcile failed: {error}"))
        }
    };
    back("/", key, &message)
}
