//! Support adjusts a customer's balance (`POST /dashboard/actions/credits/adjust`): goodwill
//! credits or a correction, with a reason, through the same engine call as the CLI and the
//! spend API. The form carries its Idempotency-Key, so sending it twice adjusts once. Support
//! may move at most `CLAIMCHECK_SUPPORT_ADJUST_LIMIT` credits at once; admins any number. A
//! form post that works without WASM, answered with a redirect to the customer's page.

use app::i18n::td_string;
use app::links;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::auth::Role;
use claimcheck_core::now_ms;
use claimcheck_core::ops::Actor;
use claimcheck_core::spending::{
    CreditOutcome, CreditRequest, IdempotencyKey, KeyScope, Keyed, SpendError,
};
use serde::Deserialize;

use super::AppState;
use super::actions::unavailable;
use super::redirect::back;
use super::words::{Reading, Signed, Support};

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/dashboard/actions/credits/adjust", post(adjust))
}

#[derive(Deserialize)]
pub(super) struct AdjustForm {
    customer: String,
    key: String,
    credits: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    expires: String,
    #[serde(default)]
    confirm: Option<String>,
}

async fn adjust(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Support>,
    Form(form): Form<AdjustForm>,
) -> Response {
    let locale = reading.locale();
    let page = links::customer(form.customer.trim());
    let refuse = |message: &str| back(&page, "error", message);
    let Ok(credits) = form.credits.trim().parse::<i64>() else {
        return refuse(td_string!(locale, messages.adjust_bad_credits));
    };
    if form.confirm.as_deref() != Some("yes") {
        return refuse(td_string!(locale, messages.adjust_unconfirmed));
    }
    let limit = state.adjust_limit.0;
    if operator.role != Role::Admin && credits.unsigned_abs() > limit.unsigned_abs() {
        return refuse(&td_string!(locale, messages.adjust_over_limit, limit));
    }
    let lasts = match form.expires.trim() {
        "" => None,
        text => match claimcheck_core::text::duration_ms(text) {
            Some(ms) => Some(ms),
            None => return refuse(td_string!(locale, messages.adjust_bad_expiry)),
        },
    };
    let actor = Actor::Dashboard(operator.username.clone()).to_string();
    let request = match CreditRequest::adjust(&form.customer, credits, &form.reason, &actor, lasts)
    {
        Ok(request) => request,
        Err(SpendError::BadReason) => {
            return refuse(td_string!(locale, messages.adjust_no_reason));
        }
        Err(SpendError::BadLotExpiry) => {
            return refuse(td_string!(locale, messages.adjust_bad_expiry));
        }
        Err(SpendError::BadEmail(_)) => {
            return refuse(td_string!(locale, messages.adjust_bad_customer));
        }
        Err(_) => return refuse(td_string!(locale, messages.adjust_bad_credits)),
    };
    let Ok(key) = IdempotencyKey::parse(form.key.trim()) else {
        return refuse(td_string!(locale, messages.adjust_bad_form));
    };
    let mut outcome = None;
    let keyed = state
        .store
        .credits()
        .apply(
            KeyScope::Dashboard,
            &key,
            &request,
            &state.worker.packages,
            now_ms(),
            |o| {
                outcome = Some(o.clone());
                super::spends::render(o)
            },
        )
        .await;
    let result = match &keyed {
        Ok(keyed) => keyed.result(outcome.as_ref().map_or("", CreditOutcome::result)),
        Err(_) => "storage_error",
    };
    state.webhook.metrics.credit_request("adjust", result);
    match (keyed, outcome) {
        (Err(error), _) => refuse(&unavailable(reading, "adjust credits", &error)),
        (Ok(Keyed::Fresh(_)), Some(CreditOutcome::Adjusted(done))) => {
            let (change, balance) = (format!("{:+}", done.credits), done.balance_after);
            back(
                &page,
                "notice",
                &td_string!(locale, messages.adjusted, change, balance),
            )
        }
        (Ok(Keyed::Fresh(_)), Some(CreditOutcome::Insufficient { available, .. })) => {
            refuse(&td_string!(locale, messages.adjust_insufficient, available))
        }
        // The form was sent before: say what its first answer was.
        (Ok(Keyed::Replayed(answer)), _) if answer.status >= 400 => {
            let available = serde_json::from_str::<serde_json::Value>(&answer.body)
                .ok()
                .and_then(|body| body["available"].as_i64())
                .unwrap_or(0);
            refuse(&td_string!(locale, messages.adjust_insufficient, available))
        }
        (Ok(Keyed::Replayed(_)), _) => back(
            &page,
            "notice",
            td_string!(locale, messages.adjust_replayed),
        ),
        _ => refuse(td_string!(locale, messages.adjust_bad_form)),
    }
}
