//! The dashboard's mutating actions as plain form posts (`POST /dashboard/actions/…`): they
//! work with or without WASM, check the operator's role on the server, go through the same
//! engine functions as the CLI, land in the audit log, and answer with a redirect to the page
//! they came from carrying a notice or an error.

use app::flash::KeptForm;
use app::i18n::explain;
use app::i18n::{names, td_string};
use app::links;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::audit::ReasonError;
use claimcheck_core::auth::Role;
use claimcheck_core::money::parse_money;
use claimcheck_core::ops::{self, AccessChange, Actor, OpsError, Username};
use claimcheck_core::payments::{self, PaymentError};
use claimcheck_core::worker::{Attempt, RedriveRefused, Worker};
use claimcheck_core::{EventId, OrderId, StoreError};
use serde::Deserialize;

use super::AppState;
use super::redirect::{back, send_back};
use super::words::{Admin, Reading, Signed, Support};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/actions/redrive", post(redrive))
        .route("/dashboard/actions/refund", post(refund))
        .route("/dashboard/actions/operators", post(add_operator))
        .route("/dashboard/actions/operators/access", post(set_access))
        .route("/dashboard/actions/reconcile", post(reconcile))
        .route(
            "/dashboard/actions/reconcile/preview",
            post(reconcile_preview),
        )
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
    Signed { operator, .. }: Signed<Support>,
    Form(form): Form<RedriveForm>,
) -> Response {
    let locale = reading.locale();
    let Ok(event_id) = EventId::parse(form.event_id.trim()) else {
        return back(
            "/claims",
            "error",
            td_string!(locale, messages.not_an_event_id),
        );
    };
    let page = links::event(event_id.as_str());
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
        Ok(Err(RedriveRefused::Reason(ReasonError::Missing))) => back(
            &format!("{page}/redrive"),
            "error",
            td_string!(locale, messages.redrive_no_reason),
        ),
        Ok(Err(RedriveRefused::Reason(why))) => back(
            &format!("{page}/redrive"),
            "error",
            &explain::reason(locale, &why),
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
    /// In the order's currency (`24.50`, `CHF 24.50`, `24.–`); required.
    #[serde(default)]
    amount: String,
    #[serde(default)]
    reason: String,
}

/// A refund (admins): the amount and the reason are checked before anything is sent, and a
/// form that is not right goes back to the refund page with what to correct next to each
/// field and what was typed still in it; the refund itself goes through the engine's one
/// idempotent path and lands on the order's page.
async fn refund(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Admin>,
    Form(form): Form<RefundForm>,
) -> Response {
    let locale = reading.locale();
    let Ok(order_id) = OrderId::parse(form.order_id.trim()) else {
        return back(
            "/orders",
            "error",
            td_string!(locale, messages.not_an_order_id),
        );
    };
    let page = links::order(order_id.as_str());
    let Some(stripe) = state.api.stripe.as_ref() else {
        return back(&page, "error", td_string!(locale, messages.refund_no_key));
    };
    let order = match state.store.orders().get(&order_id).await {
        Ok(Some(order)) => order,
        Ok(None) => {
            return back(
                "/orders",
                "error",
                &td_string!(locale, messages.no_order, id = order_id),
            );
        }
        Err(error) => return back(&page, "error", &unavailable(reading, "refund", &error)),
    };
    let left = match payments::refundable(&order) {
        // A second click after the last refund went through.
        Ok(0) => {
            return back(
                &page,
                "notice",
                td_string!(locale, messages.already_refunded),
            );
        }
        Ok(left) => left,
        Err(error) => return not_refunded(reading, &page, &error),
    };
    let currency = order.currency.clone().unwrap_or_else(|| "chf".into());
    let money = |minor: i64| reading.0.money(minor, &currency);

    // Everything wrong with the form at once, each next to its field.
    let typed = form.amount.trim();
    let amount = if typed.is_empty() {
        let left = money(left);
        Err(td_string!(locale, messages.refund_amount_missing, left))
    } else {
        parse_money(typed, &currency)
            .map_err(|_| td_string!(locale, messages.not_an_amount, amount = typed))
            .and_then(|minor| {
                payments::check_refund_amount(&order, minor)
                    .map(|()| minor)
                    .map_err(|error| amount_refused(reading, &error, &currency))
            })
    };
    let reason = match claimcheck_core::audit::reason(&form.reason) {
        Ok(_) => Ok(()),
        Err(ReasonError::Missing) => Err(td_string!(locale, messages.refund_no_reason).to_string()),
        Err(why) => Err(explain::reason(locale, &why)),
    };
    let send_back_with = |errors: Vec<(String, String)>| {
        send_back(KeptForm {
            page: links::refund(order_id.as_str()),
            summary: td_string!(locale, messages.refund_sent_back).to_string(),
            errors,
            values: vec![
                ("amount".into(), form.amount.clone()),
                ("reason".into(), form.reason.clone()),
            ],
        })
    };
    let amount = match (amount, reason) {
        (Ok(amount), Ok(())) => amount,
        (amount, reason) => {
            let errors = [("amount", amount.err()), ("reason", reason.err())]
                .into_iter()
                .filter_map(|(field, error)| Some((field.to_owned(), error?)))
                .collect();
            return send_back_with(errors);
        }
    };

    let actor = Actor::Dashboard(operator.username.clone());
    match payments::refund(
        &state.store,
        stripe,
        &order_id,
        Some(amount),
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
            let amount = done.amount.map(money).unwrap_or_default();
            let refund = done
                .refund_id
                .unwrap_or_else(|| td_string!(locale, messages.refund_id_unknown).to_string());
            back(
                &page,
                "notice",
                &td_string!(locale, messages.refunded, amount, refund),
            )
        }
        // Someone refunded in between: the form again, with what is left now.
        Err(error @ PaymentError::BadAmount { .. }) => send_back_with(vec![(
            "amount".into(),
            amount_refused(reading, &error, &currency),
        )]),
        Err(PaymentError::Reason(why)) => {
            send_back_with(vec![("reason".into(), explain::reason(locale, &why))])
        }
        Err(error) => not_refunded(reading, &page, &error),
    }
}

/// An amount the engine will not refund, in the reader's words and money.
fn amount_refused(reading: Reading, error: &PaymentError, currency: &str) -> String {
    let locale = reading.locale();
    let money = |minor: i64| reading.0.money(minor, currency);
    match error {
        PaymentError::BadAmount { requested, .. } if *requested < 1 => {
            td_string!(locale, messages.refund_amount_zero, zero = money(0))
        }
        PaymentError::BadAmount {
            requested,
            refundable,
            ..
        } => {
            let (amount, left) = (money(*requested), money(*refundable));
            td_string!(locale, messages.refund_amount_over, amount, left)
        }
        other => explain::payment(locale, other),
    }
}

/// A refund that cannot be made, back on the order's page (storage failures logged here).
fn not_refunded(reading: Reading, page: &str, error: &PaymentError) -> Response {
    match error {
        PaymentError::Store(cause) => back(page, "error", &unavailable(reading, "refund", cause)),
        other => {
            let locale = reading.locale();
            let why = explain::payment(locale, other);
            back(
                page,
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
    Signed {
        operator: admin, ..
    }: Signed<Admin>,
    Form(form): Form<OperatorForm>,
) -> Response {
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
    Signed {
        operator: admin, ..
    }: Signed<Admin>,
    Form(form): Form<AccessForm>,
) -> Response {
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

/// A dry run (admins): what a run would claim, recorded in the history as a dry run and
/// said in the notice; nothing is claimed and the cursor stays.
async fn reconcile_preview(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Admin>,
) -> Response {
    let locale = reading.locale();
    let Some(stripe) = state.api.stripe.as_ref() else {
        return back(
            "/reconcile",
            "error",
            td_string!(locale, messages.reconcile_no_key),
        );
    };
    let actor = Actor::Dashboard(operator.username).to_string();
    let outcome =
        claimcheck_core::reconcile::run(&state.store, stripe, &state.reconcile, &actor, None, true)
            .await;
    match outcome {
        Ok(report) => {
            let since = reading.0.time(report.since * 1000);
            let (listed, already, would) = (report.listed, report.already_claimed, report.claimed);
            back(
                "/reconcile",
                "notice",
                &td_string!(
                    locale,
                    messages.reconcile_dry_run,
                    since,
                    listed,
                    already,
                    would
                ),
            )
        }
        Err(claimcheck_core::reconcile::ReconcileError::Busy) => back(
            "/reconcile",
            "error",
            td_string!(locale, messages.reconcile_busy),
        ),
        Err(error) => back(
            "/reconcile",
            "error",
            &td_string!(locale, messages.reconcile_failed, error),
        ),
    }
}

/// Reconcile now (admins): one run through the same path as the periodic reconciler,
/// audited with the reason and what it found.
async fn reconcile(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Admin>,
    Form(form): Form<ReconcileForm>,
) -> Response {
    let locale = reading.locale();
    match claimcheck_core::audit::reason(&form.reason) {
        Ok(_) => {}
        Err(ReasonError::Missing) => {
            return back(
                "/reconcile",
                "error",
                td_string!(locale, messages.reconcile_no_reason),
            );
        }
        Err(why) => return back("/reconcile", "error", &explain::reason(locale, &why)),
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
        Err(claimcheck_core::reconcile::ReconcileError::Reason(why)) => {
            ("error", explain::reason(locale, why))
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
