//! How an operator reads the dashboard: the language switch in the header (a plain form
//! post, remembered for the signed-in operator on every device they use and in this browser,
//! the sign-in page too) and the preferences page's form (language and time zone).

use app::i18n::{Reader, td_string, time_zones};
use axum::extract::{Extension, State};
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::auth::SignedIn;
use claimcheck_core::language::{self, Language};
use serde::Deserialize;

use super::AppState;
use super::actions::unavailable;
use super::redirect::back;
use super::redirect::local_path;
use super::words::{Reading, Signed, Viewer};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/language", post(switch))
        .route("/dashboard/actions/preferences", post(save_preferences))
}

#[derive(Deserialize)]
struct LanguageForm {
    language: String,
    next: Option<String>,
}

/// How long a browser remembers the language picked in it.
const REMEMBERED_SECS: u32 = 365 * 24 * 3600;

/// What a language field asked for: a language of ours, or (empty) none.
#[allow(clippy::result_large_err)] // the refusal is the handler's answer as it stands
fn asked_language(reading: Reading, field: &str) -> Result<Option<Language>, Response> {
    if field.trim().is_empty() {
        return Ok(None);
    }
    field.parse::<Language>().map(Some).map_err(|_| {
        let asked = field.chars().take(40).collect::<String>();
        (
            StatusCode::BAD_REQUEST,
            td_string!(reading.locale(), messages.unknown_language, asked),
        )
            .into_response()
    })
}

/// This browser's memory of the language: set to `language`, or forgotten.
fn language_cookie(state: &AppState, language: Option<Language>) -> Option<HeaderValue> {
    let secure = if state.auth.policy.secure {
        "; Secure"
    } else {
        ""
    };
    let (value, age) = match language {
        Some(language) => (language.tag(), REMEMBERED_SECS),
        None => ("", 0),
    };
    let cookie = format!(
        "{}={value}; Path=/; Max-Age={age}; SameSite=Lax; HttpOnly{secure}",
        language::COOKIE
    );
    HeaderValue::from_str(&cookie).ok()
}

async fn switch(
    State(state): State<AppState>,
    reading: Reading,
    operator: Option<Extension<SignedIn>>,
    Form(form): Form<LanguageForm>,
) -> Response {
    let language = match asked_language(reading, &form.language) {
        Ok(Some(language)) => language,
        Ok(None) => return Redirect::to(local_path(form.next.as_deref())).into_response(),
        Err(refused) => return refused,
    };
    if let Some(Extension(operator)) = operator
        && let Err(error) = state
            .store
            .operators()
            .set_preferences(
                &operator.username,
                Some(language),
                operator.time_zone.as_deref(),
            )
            .await
    {
        // The browser still switches; the operator's other devices keep the old choice.
        tracing::error!(
            error = &error as &dyn std::error::Error,
            "language switch: storage"
        );
    }
    let mut response = Redirect::to(local_path(form.next.as_deref())).into_response();
    if let Some(cookie) = language_cookie(&state, Some(language)) {
        response.headers_mut().append(SET_COOKIE, cookie);
    }
    response
}

#[derive(Deserialize)]
struct PreferencesForm {
    /// A language tag, or empty: as the browser asks.
    #[serde(default)]
    language: String,
    #[serde(default)]
    time_zone: String,
}

const PREFERENCES: &str = "/account";

async fn save_preferences(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Viewer>,
    Form(form): Form<PreferencesForm>,
) -> Response {
    let language = match asked_language(reading, &form.language) {
        Ok(language) => language,
        Err(refused) => return refused,
    };
    let zone = form.time_zone.trim();
    let Some(zone) = time_zones().find(|known| *known == zone) else {
        let zone = zone.chars().take(64).collect::<String>();
        return back(
            PREFERENCES,
            "error",
            &td_string!(reading.locale(), messages.unknown_time_zone, zone),
        );
    };
    match state
        .store
        .operators()
        .set_preferences(&operator.username, language, Some(zone))
        .await
    {
        Ok(_) => {
            // The notice is written the way the operator asked to read from now on.
            let now = SignedIn {
                language,
                time_zone: Some(zone.to_owned()),
                ..operator
            };
            let reader = Reader::of(&Default::default(), Some(&now), reading.0.language);
            let message = td_string!(reader.locale(), messages.preferences_saved);
            let mut response = back(PREFERENCES, "notice", message);
            if let Some(cookie) = language_cookie(&state, language) {
                response.headers_mut().append(SET_COOKIE, cookie);
            }
            response
        }
        Err(error) => back(
            PREFERENCES,
            "error",
            &unavailable(reading, "preferences", &error),
        ),
    }
}
