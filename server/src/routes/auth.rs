//! Who may use the dashboard: sign-in and sign-out, the session check in front of every
//! dashboard request, login throttling, and the cross-origin guard on mutating requests.
//!
//! The webhook and the order API are outside all of this (see `routes.rs`).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Form;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use claimcheck_core::auth::{SignedIn, verify_password};
use claimcheck_core::{Store, now_ms};
use serde::Deserialize;
use tower_sessions::Session;

use super::AppState;

const USER_KEY: &str = "operator";
const SIGNED_IN_AT_KEY: &str = "signed_in_at";

/// Session lifetimes: idle expiry is the cookie's (tower-sessions), absolute expiry is
/// checked here against the sign-in time.
#[derive(Debug, Clone, Copy)]
pub struct SessionPolicy {
    pub idle: Duration,
    pub absolute: Duration,
    /// Whether the cookie is `Secure` (everywhere but plain HTTP on a loopback address).
    pub secure: bool,
}

/// Failed sign-ins per username and per client address in a sliding window.
pub struct LoginThrottle {
    window: Duration,
    per_user: usize,
    per_address: usize,
    failures: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl LoginThrottle {
    pub fn new(window: Duration, per_user: usize, per_address: usize) -> LoginThrottle {
        LoginThrottle {
            window,
            per_user,
            per_address,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn keys(username: &str, address: &SocketAddr) -> [(String, bool); 2] {
        [
            (format!("user:{}", username.to_lowercase()), true),
            (format!("addr:{}", address.ip()), false),
        ]
    }

    /// Counts a sign-in attempt as a failure in advance, unless either key has used up its
    /// failures (then: seconds to wait, nothing counted). One locked step, so concurrent
    /// guesses cannot all pass the check before the first failure is recorded.
    fn attempt(&self, username: &str, address: &SocketAddr) -> Option<u64> {
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let mut wait = None;
        for (key, is_user) in Self::keys(username, address) {
            let limit = if is_user {
                self.per_user
            } else {
                self.per_address
            };
            let times = failures.entry(key).or_default();
            while times
                .front()
                .is_some_and(|t| now.duration_since(*t) > self.window)
            {
                times.pop_front();
            }
            if times.len() >= limit
                && let Some(oldest) = times.front()
            {
                let left = self.window.saturating_sub(now.duration_since(*oldest));
                wait = Some(wait.unwrap_or(0).max(left.as_secs().max(1)));
            }
        }
        if wait.is_none() {
            for (key, _) in Self::keys(username, address) {
                failures.entry(key).or_default().push_back(now);
            }
        }
        wait
    }

    /// The password was right: the username's failures are forgotten and this attempt is
    /// taken off the address's count.
    fn succeeded(&self, username: &str, address: &SocketAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let [(user, _), (addr, _)] = Self::keys(username, address);
        failures.remove(&user);
        if let Some(times) = failures.get_mut(&addr) {
            times.pop_back();
        }
    }
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    username: String,
    password: String,
    #[serde(default)]
    next: Option<String>,
}

/// Only a path on this site: never an absolute URL to somewhere else.
fn local_path(next: Option<&str>) -> &str {
    // Browsers drop tabs and newlines from URLs, so "/\t/evil.example" would become
    // "//evil.example": no whitespace or control characters at all, and never two slashes
    // (or a backslash) after the first.
    match next {
        Some(path)
            if path.starts_with('/')
                && !path[1..].starts_with(['/', '\\'])
                && !path.contains('\\')
                && !path.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            path
        }
        _ => "/",
    }
}

fn login_again(message: &str, next: Option<&str>) -> Response {
    let mut url = format!("/login?error={}", urlencode(message));
    if let Some(next) = next {
        url.push_str(&format!("&next={}", urlencode(local_path(Some(next)))));
    }
    Redirect::to(&url).into_response()
}

pub(crate) fn urlencode(text: &str) -> String {
    serde_urlencoded::to_string([("", text)])
        .map(|s| s.trim_start_matches('=').to_owned())
        .unwrap_or_default()
}

/// `POST /login`: the same answer for an unknown user and a wrong password; a new session id
/// on success.
pub(super) async fn login(
    State(state): State<AppState>,
    ConnectInfo(address): ConnectInfo<SocketAddr>,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Response {
    let username = form.username.trim().to_owned();
    let next = form.next.as_deref();
    if let Some(wait) = state.auth.throttle.attempt(&username, &address) {
        tracing::warn!(%username, %address, "sign-in throttled");
        let minutes = wait.div_ceil(60);
        let mut response = login_again(
            &format!("Too many failed sign-ins. Try again in {minutes} minute(s)."),
            next,
        );
        *response.status_mut() = StatusCode::SEE_OTHER;
        return response;
    }
    let credentials = match state.store.operator(&username).await {
        Ok(found) => found.filter(|c| c.operator.disabled_at.is_none()),
        Err(error) => {
            tracing::error!(error = &error as &dyn std::error::Error, "sign-in: storage");
            return login_again("The database is unavailable. Try again in a moment.", next);
        }
    };
    let hash = credentials.as_ref().map(|c| c.password_hash.clone());
    let password = form.password;
    let matches = tokio::task::spawn_blocking(move || verify_password(&password, hash.as_deref()))
        .await
        .unwrap_or(false);
    let Some(credentials) = credentials.filter(|_| matches) else {
        tracing::info!(%username, %address, "sign-in refused");
        return login_again("Wrong username or password.", next);
    };
    state.auth.throttle.succeeded(&username, &address);
    let stored = async {
        session.cycle_id().await?;
        session
            .insert(USER_KEY, &credentials.operator.username)
            .await?;
        session.insert(SIGNED_IN_AT_KEY, now_ms()).await
    };
    if let Err(error) = stored.await {
        tracing::error!(%error, "sign-in: session store");
        return login_again("The database is unavailable. Try again in a moment.", next);
    }
    tracing::info!(username = %credentials.operator.username, "signed in");
    Redirect::to(local_path(next)).into_response()
}

/// `POST /logout`.
pub(super) async fn logout(session: Session) -> Response {
    if let Err(error) = session.flush().await {
        tracing::error!(%error, "sign-out: session store");
    }
    Redirect::to("/login?notice=Signed%20out.").into_response()
}

/// Who is signed in, if the session is valid: the operator still exists, is enabled, and the
/// sign-in is younger than the absolute limit. An invalid session is ended.
async fn signed_in(store: &Store, session: &Session, policy: &SessionPolicy) -> Option<SignedIn> {
    let username: String = session.get(USER_KEY).await.ok()??;
    let at: i64 = session.get(SIGNED_IN_AT_KEY).await.ok()??;
    let fresh = now_ms() - at < policy.absolute.as_millis() as i64;
    let operator = match store.operator(&username).await {
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
    Some(SignedIn {
        username: operator.username,
        role: operator.role,
    })
}

/// Paths anyone may fetch: the sign-in page, the bundle and static files.
fn public_path(path: &str) -> bool {
    path == "/login"
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
        return (
            StatusCode::FORBIDDEN,
            "Refused: this request came from another site.",
        )
            .into_response();
    }
    let operator = signed_in(&state.store, &session, &state.auth.policy).await;
    let path = request.uri().path().to_owned();
    let is_page = matches!(*request.method(), Method::GET | Method::HEAD)
        && !path.starts_with("/dashboard/")
        && !public_path(&path);
    if operator.is_none() && is_page {
        let target = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".into());
        return Redirect::to(&format!("/login?next={}", urlencode(&target))).into_response();
    }
    if let Some(operator) = operator {
        request.extensions_mut().insert(operator);
    }
    next.run(request).await
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(local_path(Some("/orders/ord_1")), "/orders/ord_1");
        assert_eq!(local_path(Some("https://evil.example/")), "/");
        assert_eq!(local_path(Some("//evil.example/")), "/");
        assert_eq!(local_path(None), "/");
        assert_eq!(local_path(Some("/\t/evil.example")), "/");
        assert_eq!(local_path(Some("/\n/evil.example")), "/");
        assert_eq!(local_path(Some("/\\evil.example")), "/");
        assert_eq!(local_path(Some("/events?q=a%20b")), "/events?q=a%20b");
    }

    #[test]
    fn throttle_blocks_after_the_limit_and_forgets_on_success() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 3, 10);
        let addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(throttle.attempt("anna", &addr), None);
        }
        assert!(throttle.attempt("Anna", &addr).is_some());
        assert_eq!(throttle.attempt("ben", &addr), None, "per username");
        throttle.succeeded("anna", &addr);
        assert_eq!(throttle.attempt("anna", &addr), None);
    }

    #[test]
    fn throttle_blocks_an_address_trying_many_usernames() {
        let throttle = LoginThrottle::new(Duration::from_secs(60), 5, 3);
        let addr: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        for name in ["a", "b", "c"] {
            assert_eq!(throttle.attempt(name, &addr), None);
        }
        assert!(throttle.attempt("d", &addr).is_some(), "per address");
        let elsewhere: SocketAddr = "10.0.0.3:5000".parse().unwrap();
        assert_eq!(throttle.attempt("d", &elsewhere), None);
    }

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
