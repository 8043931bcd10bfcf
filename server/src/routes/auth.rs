//! Who may use the dashboard: sign-in and sign-out, the session check in front of every
//! dashboard request, login throttling, and the cross-origin guard on mutating requests.
//!
//! The webhook and the order API are outside all of this (see `routes.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use axum::Form;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use claimcheck_core::auth::{MAX_PASSWORD_CHARS, SignedIn, verify_queued};
use claimcheck_core::{Store, now_ms};
use serde::Deserialize;
use tower_sessions::Session;

use app::i18n::{Reader, names, td_string};
use app::links;

use super::AppState;
use super::redirect::{back, local_path};
use super::throttle::{LoginThrottle, MAX_USERNAME};
use crate::client_ip::ClientAddress;
use crate::sessions::OPERATOR_KEY as USER_KEY;
use claimcheck_core::two_factor::{FreshRecoveryCodes, MustEnrol, TwoFactorPolicy};

const SIGNED_IN_AT_KEY: &str = "signed_in_at";
/// Passed the password, waiting for the second factor: the username and since when.
pub(super) const PENDING_KEY: &str = "pending_second_factor";
pub(super) const PENDING_AT_KEY: &str = "pending_since";
/// How long the second step may take after the password.
pub(super) const PENDING_FOR_MS: i64 = 5 * 60 * 1000;
/// Recovery codes just made, until the enrolment page has shown them once.
pub(super) const FRESH_CODES_KEY: &str = "fresh_recovery_codes";

/// Session lifetimes: idle expiry is the cookie's (tower-sessions), absolute expiry is
/// checked here against the sign-in time.
#[derive(Debug, Clone, Copy)]
pub struct SessionPolicy {
    pub idle: Duration,
    pub absolute: Duration,
    /// Whether the cookie is `Secure` (everywhere but plain HTTP on a loopback address).
    pub secure: bool,
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    username: String,
    password: String,
    #[serde(default)]
    next: Option<String>,
}

pub(super) fn login_again(message: &str, next: Option<&str>) -> Response {
    let url = match next {
        Some(next) => format!("/login?next={}", links::encode(local_path(Some(next)))),
        None => "/login".to_owned(),
    };
    back(&url, "error", message)
}

/// `POST /login`: the same answer for an unknown user and a wrong password; a new session id
/// on success.
pub(super) async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Response {
    // Names are kept in Unicode's normal form (see `Username`): "ａｄｍｉｎ" is "admin".
    let username: String = claimcheck_core::ops::Username::normal_form(&form.username);
    let next = form.next.as_deref();
    let locale = Reader::of(&headers, None, state.auth.language).locale();
    let unavailable = td_string!(locale, messages.db_unavailable).to_string();
    if username.chars().count() > MAX_USERNAME || form.password.chars().count() > MAX_PASSWORD_CHARS
    {
        return login_again(
            &td_string!(
                locale,
                messages.login_too_long,
                user = MAX_USERNAME,
                password = MAX_PASSWORD_CHARS
            ),
            next,
        );
    }
    let address = state.auth.client_address.of(peer.ip(), &headers);
    if let Some(wait) = state.auth.throttle.attempt(&username, address) {
        tracing::warn!(username = ?username, %address, "sign-in throttled");
        let minutes = wait.div_ceil(60);
        let mut response = login_again(&names::throttled(locale, minutes), next);
        *response.status_mut() = StatusCode::SEE_OTHER;
        return response;
    }
    let credentials = match state.store.operators().credentials(&username).await {
        Ok(found) => found.filter(|c| c.operator.disabled_at.is_none()),
        Err(error) => {
            tracing::error!(error = &error as &dyn std::error::Error, "sign-in: storage");
            return login_again(&unavailable, next);
        }
    };
    let hash = credentials.as_ref().map(|c| c.password_hash.clone());
    // At most one hash per core runs at once; the rest of a burst waits here.
    let matches = verify_queued(form.password, hash).await;
    let Some(credentials) = credentials.filter(|_| matches) else {
        tracing::info!(username = ?username, %address, "sign-in refused");
        return login_again(td_string!(locale, messages.login_wrong), next);
    };
    state.auth.throttle.succeeded(&username, address);
    let operator = &credentials.operator;
    if operator.two_factor {
        // The password was right; the session only remembers that, until the code is.
        let pending = async {
            session.cycle_id().await?;
            session.insert(PENDING_KEY, &operator.username).await?;
            session.insert(PENDING_AT_KEY, now_ms()).await
        };
        if let Err(error) = pending.await {
            tracing::error!(%error, "sign-in: session store");
            return login_again(&unavailable, next);
        }
        let url = format!("/login/2fa?next={}", links::encode(local_path(next)));
        return Redirect::to(&url).into_response();
    }
    if let Err(error) = complete_sign_in(&session, &operator.username).await {
        tracing::error!(%error, "sign-in: session store");
        return login_again(&unavailable, next);
    }
    tracing::info!(username = ?operator.username, %address, "signed in");
    if state.auth.two_factor.requires(operator.role) {
        return Redirect::to("/account/2fa").into_response();
    }
    Redirect::to(local_path(next)).into_response()
}

/// Makes the session the operator's: a new id, who, since when.
pub(super) async fn complete_sign_in(
    session: &Session,
    username: &str,
) -> Result<(), tower_sessions::session::Error> {
    session.cycle_id().await?;
    session.remove_value(PENDING_KEY).await?;
    session.remove_value(PENDING_AT_KEY).await?;
    session.insert(USER_KEY, username).await?;
    session.insert(SIGNED_IN_AT_KEY, now_ms()).await
}

#[derive(Deserialize, Default)]
pub(super) struct LogoutForm {
    /// Any value: end every session of this operator, on every device.
    #[serde(default)]
    everywhere: Option<String>,
}

/// `POST /logout`: this session ends (and stays ended, whatever requests still run with
/// it); with `everywhere`, every session of the operator does.
pub(super) async fn logout(
    State(state): State<AppState>,
    session: Session,
    form: Result<Form<LogoutForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    // A bare POST (no form) signs out here only.
    let everywhere = form.is_ok_and(|Form(f)| f.everywhere.is_some());
    let username: Option<String> = session.get(USER_KEY).await.ok().flatten();
    if let Err(error) = session.flush().await {
        tracing::error!(%error, "sign-out: session store");
    }
    match username {
        Some(username) if everywhere => match state.store.sessions().delete_of(&username).await {
            Ok(ended) => {
                tracing::info!(username = ?username, ended, "signed out everywhere");
                back("/login", "notice", "Signed out everywhere.")
            }
            Err(error) => {
                tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "sign-out everywhere: storage"
                );
                back(
                    "/login",
                    "error",
                    "Signed out here, but the other sessions could not be ended: try again.",
                )
            }
        },
        _ => back("/login", "notice", "Signed out."),
    }
}

/// Who is signed in, if the session is valid: the operator still exists, is enabled, and the
/// sign-in is younger than the absolute limit; and whether they have a second factor. An
/// invalid session is ended.
async fn signed_in(
    store: &Store,
    session: &Session,
    policy: &SessionPolicy,
) -> Option<(SignedIn, bool)> {
    let username: String = session.get(USER_KEY).await.ok()??;
    let at: i64 = session.get(SIGNED_IN_AT_KEY).await.ok()??;
    let fresh = now_ms() - at < policy.absolute.as_millis() as i64;
    let operator = match store.operators().credentials(&username).await {
        Ok(Some(c)) if c.operator.disabled_at.is_none() && fresh => c.operator,
        Ok(_) => {
            let _ = session.flush().await;
            return None;
        }
        Err(error) => {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "session check: storage"
            );
            return None;
        }
    };
    Some((
        SignedIn {
            username: operator.username,
            role: operator.role,
            language: operator.language,
            time_zone: operator.time_zone,
        },
        operator.two_factor,
    ))
}

/// Paths anyone may fetch: the sign-in pages, the bundle and static files.
fn public_path(path: &str) -> bool {
    path == "/login"
        || path == "/login/2fa"
        || path == "/language"
        || path.starts_with("/pkg/")
        || path == "/favicon.svg"
        || path == "/favicon.ico"
}

/// In front of every dashboard request: resolves the operator into the request's extensions
/// (server functions and actions check the role themselves), sends signed-out page views to
/// the sign-in page, and refuses mutating requests from another origin.
pub(super) async fn guard(
    State(state): State<AppState>,
    session: Session,
    mut request: Request,
    next: Next,
) -> Response {
    if !matches!(*request.method(), Method::GET | Method::HEAD) && !same_origin(request.headers()) {
        let locale = Reader::of(request.headers(), None, state.auth.language).locale();
        return (
            StatusCode::FORBIDDEN,
            td_string!(locale, messages.cross_origin).to_string(),
        )
            .into_response();
    }
    let operator = signed_in(&state.store, &session, &state.auth.policy).await;
    let path = request.uri().path().to_owned();
    let is_page = matches!(*request.method(), Method::GET | Method::HEAD)
        && !path.starts_with("/dashboard/")
        && !public_path(&path);
    // An operator who must have a second factor and has none may only enrol (and sign out).
    let must_enrol = operator
        .as_ref()
        .is_some_and(|(op, has)| !has && state.auth.two_factor.requires(op.role));
    if must_enrol && !enrolment_path(&path) && !public_path(&path) {
        if is_page {
            return Redirect::to("/account/2fa").into_response();
        }
        let locale = Reader::of(
            request.headers(),
            operator.as_ref().map(|(op, _)| op),
            state.auth.language,
        )
        .locale();
        return (
            StatusCode::FORBIDDEN,
            td_string!(locale, messages.enrol_first).to_string(),
        )
            .into_response();
    }
    if must_enrol {
        request.extensions_mut().insert(MustEnrol);
    }
    if operator.is_some() && path == "/account/2fa" {
        // Codes made at confirmation are shown by this one page view, then forgotten.
        if let Ok(Some(codes)) = session.remove::<Vec<String>>(FRESH_CODES_KEY).await {
            request.extensions_mut().insert(FreshRecoveryCodes(codes));
        }
    }
    let operator = operator.map(|(op, _)| op);
    if operator.is_none() && is_page {
        let target = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".into());
        return Redirect::to(&format!("/login?next={}", links::encode(&target))).into_response();
    }
    if let Some(operator) = operator {
        request.extensions_mut().insert(operator);
    }
    next.run(request).await
}

/// What an operator who must enrol a second factor may still reach.
fn enrolment_path(path: &str) -> bool {
    path == "/account/2fa"
        || path == "/logout"
        || path.starts_with("/dashboard/actions/2fa/")
        || path == "/dashboard/fn/me"
        || path == "/dashboard/fn/two_factor"
}

/// A browser sends `Origin` (and `Sec-Fetch-Site`) with every cross-origin POST: refuse it
/// unless it names this host.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return false;
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let origin_host = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .map(|(_, rest)| rest.trim_end_matches('/'));
        if host.is_none() || origin_host != host {
            return false;
        }
    }
    true
}

/// What the sign-in and guard need.
pub(crate) struct AuthState {
    pub throttle: LoginThrottle,
    pub policy: SessionPolicy,
    pub client_address: ClientAddress,
    /// Who must sign in with a second factor.
    pub two_factor: TwoFactorPolicy,
    /// The language for readers without a choice of their own (`CLAIMCHECK_LANGUAGE`).
    pub language: claimcheck_core::language::Language,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_origin_posts_are_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "127.0.0.1:3000".parse().unwrap());
        assert!(same_origin(&headers));
        headers.insert(header::ORIGIN, "http://127.0.0.1:3000".parse().unwrap());
        assert!(same_origin(&headers));
        headers.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(!same_origin(&headers));
        headers.remove(header::ORIGIN);
        headers.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(!same_origin(&headers));
    }
}
