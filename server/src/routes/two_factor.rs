//! Two-factor sign-in on the dashboard: the second step after the password
//! (`POST /login/2fa`, a code from the authenticator app or a recovery code), and enrolment
//! (`/dashboard/actions/2fa/begin` makes a secret, `…/confirm` checks a first code and makes
//! the recovery codes). The rules live in the engine's `two_factor`; this is the HTTP side.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::audit::{Actor, AuditAction, AuditRecord};
use claimcheck_core::now_ms;
use claimcheck_core::two_factor::{TotpSecret, new_recovery_codes, recovery_hash};
use serde::Deserialize;
use tower_sessions::Session;

use app::i18n::{Locale, Reader, names, td_string};
use app::links;

use super::AppState;
use super::auth::{FRESH_CODES_KEY, PENDING_AT_KEY, PENDING_FOR_MS, PENDING_KEY, complete_sign_in};
use super::redirect::back;
use super::redirect::local_path;
use super::words::{Reading, Signed, Viewer};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/login/2fa", post(second_step))
        .route("/dashboard/actions/2fa/begin", post(begin))
        .route("/dashboard/actions/2fa/confirm", post(confirm))
}

fn again(message: &str, next: Option<&str>) -> Response {
    let url = match next {
        Some(next) => format!("/login/2fa?next={}", links::encode(local_path(Some(next)))),
        None => "/login/2fa".to_owned(),
    };
    back(&url, "error", message)
}

fn unavailable(locale: Locale, error: &(dyn std::error::Error + 'static)) -> Response {
    tracing::error!(error, "two-factor: storage");
    let message = td_string!(locale, messages.db_unavailable).to_string();
    back("/login", "error", &message)
}

#[derive(Deserialize)]
pub(super) struct CodeForm {
    code: String,
    #[serde(default)]
    next: Option<String>,
}

/// `POST /login/2fa`: the code of the operator who passed the password step a moment ago.
/// A six-digit code is checked against the authenticator secret (each time step once), any
/// other text against the unused recovery codes. Failures count in the sign-in throttle.
async fn second_step(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    Form(form): Form<CodeForm>,
) -> Response {
    let next = form.next.as_deref();
    let locale = Reader::of(&headers, None, state.auth.language).locale();
    let pending: Option<String> = session.get(PENDING_KEY).await.ok().flatten();
    let since: Option<i64> = session.get(PENDING_AT_KEY).await.ok().flatten();
    let Some(username) = pending.filter(|_| since.is_some_and(|t| now_ms() - t < PENDING_FOR_MS))
    else {
        let message = td_string!(locale, messages.code_step_expired).to_string();
        return back("/login", "error", &message);
    };
    let address = state.auth.client_address.of(peer.ip(), &headers);
    if let Some(wait) = state
        .auth
        .throttle
        .second_factor_attempt(&username, address)
    {
        tracing::warn!(username = ?username, %address, "second factor throttled");
        let minutes = wait.div_ceil(60);
        return again(&names::throttled(locale, minutes), next);
    }
    let code = form.code.trim();
    if code.is_empty() || code.len() > 64 {
        return again(td_string!(locale, messages.code_missing), next);
    }
    let credentials = match state.store.operators().credentials(&username).await {
        Ok(Some(c)) if c.operator.disabled_at.is_none() && c.operator.two_factor => c,
        Ok(_) => return Redirect::to("/login").into_response(),
        Err(error) => return unavailable(locale, &error),
    };
    let accepted = if code.chars().filter(|c| !c.is_whitespace()).count() == 6
        && code
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_whitespace())
    {
        match credentials
            .totp_secret
            .as_ref()
            .and_then(|s| s.check(code, now_ms() / 1000))
        {
            Some(step) => {
                state
                    .store
                    .operators()
                    .accept_totp_step(&username, step)
                    .await
            }
            None => Ok(false),
        }
    } else {
        state
            .store
            .operators()
            .use_recovery_code(&username, &recovery_hash(code), now_ms())
            .await
    };
    match accepted {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(username = ?username, %address, "second factor refused");
            return again(td_string!(locale, messages.code_wrong), next);
        }
        Err(error) => return unavailable(locale, &error),
    }
    state.auth.throttle.signed_in(&username, address);
    if let Err(error) = complete_sign_in(&session, &username).await {
        return unavailable(locale, &error);
    }
    tracing::info!(username = ?username, %address, "signed in with a second factor");
    Redirect::to(local_path(next)).into_response()
}

fn account(key: &str, message: &str) -> Response {
    back("/account/2fa", key, message)
}

/// Starts enrolment: a new secret, shown on `/account/2fa` until a code confirms it.
async fn begin(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Viewer>,
) -> Response {
    let locale = reading.locale();
    let secret = match TotpSecret::generate() {
        Ok(secret) => secret,
        Err(error) => {
            tracing::error!(%error, "two-factor: no randomness");
            return account("error", td_string!(locale, messages.no_secret));
        }
    };
    match state
        .store
        .operators()
        .begin_two_factor(&operator.username, &secret)
        .await
    {
        Ok(true) => Redirect::to("/account/2fa").into_response(),
        Ok(false) => account("error", td_string!(locale, messages.two_factor_on_already)),
        Err(error) => unavailable(locale, &error),
    }
}

#[derive(Deserialize)]
pub(super) struct ConfirmForm {
    code: String,
}

/// Confirms enrolment with a first code; makes ten recovery codes, shown once.
async fn confirm(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Viewer>,
    session: Session,
    Form(form): Form<ConfirmForm>,
) -> Response {
    let locale = reading.locale();
    let credentials = match state
        .store
        .operators()
        .credentials(&operator.username)
        .await
    {
        Ok(Some(c)) => c,
        Ok(None) => return Redirect::to("/login").into_response(),
        Err(error) => return unavailable(locale, &error),
    };
    let Some(secret) = credentials
        .totp_secret
        .filter(|_| !credentials.operator.two_factor)
    else {
        return account("error", td_string!(locale, messages.start_set_up));
    };
    let Some(step) = secret.check(&form.code, now_ms() / 1000) else {
        return account("error", td_string!(locale, messages.code_mismatch));
    };
    let codes = match new_recovery_codes() {
        Ok(codes) => codes,
        Err(error) => {
            tracing::error!(%error, "two-factor: no randomness");
            return account("error", td_string!(locale, messages.no_codes));
        }
    };
    let hashes: Vec<String> = codes.iter().map(|c| recovery_hash(c)).collect();
    match state
        .store
        .operators()
        .confirm_two_factor(&operator.username, step, &hashes, now_ms())
        .await
    {
        Ok(true) => {}
        Ok(false) => return account("error", td_string!(locale, messages.start_set_up)),
        Err(error) => return unavailable(locale, &error),
    }
    let actor = Actor::Dashboard(operator.username.clone());
    if let Err(error) = state
        .store
        .audit()
        .record(
            &AuditRecord {
                actor: &actor,
                action: AuditAction::TwoFactorEnrol,
                target: &operator.username,
                reason: "enrolled from the dashboard",
                outcome: "two-factor sign-in on; 10 recovery codes made",
            },
            now_ms(),
        )
        .await
    {
        tracing::error!(
            error = &error as &dyn std::error::Error,
            "two-factor: audit"
        );
    }
    if let Err(error) = session.insert(FRESH_CODES_KEY, &codes).await {
        return unavailable(locale, &error);
    }
    account("notice", td_string!(locale, messages.two_factor_on))
}
