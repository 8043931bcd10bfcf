//! Who reads the answer to a dashboard request (their language and time zone), so that the
//! form actions' notices and errors are written in the reader's words, as the pages are; and
//! who may ask for it: the operator a form action needs, as an extractor, refused (401, 403)
//! in the reader's words before the action reads anything.

use std::convert::Infallible;
use std::marker::PhantomData;

use app::i18n::{Locale, Reader, names, td_string};
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use claimcheck_core::auth::{AccessRefused, Role, SignedIn};

use super::AppState;

/// The reader of this request: the signed-in operator's choices, else the browser's, else
/// `CLAIMCHECK_LANGUAGE` (see `Reader::of`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading(pub Reader);

impl Reading {
    pub fn locale(self) -> Locale {
        self.0.locale()
    }
}

impl FromRequestParts<AppState> for Reading {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        Ok(Reading(Reader::of(
            &parts.headers,
            parts.extensions.get::<SignedIn>(),
            state.auth.language,
        )))
    }
}

/// The role an action needs, as a type: `Signed<Support>`.
pub(crate) trait Needs: Send + Sync {
    const ROLE: Role;
}

pub(crate) struct Viewer;
pub(crate) struct Support;
pub(crate) struct Admin;

impl Needs for Viewer {
    const ROLE: Role = Role::Viewer;
}
impl Needs for Support {
    const ROLE: Role = Role::Support;
}
impl Needs for Admin {
    const ROLE: Role = Role::Admin;
}

/// The signed-in operator, who has at least the role `R` needs (the engine's one guard,
/// `auth::require`); otherwise the request is refused before the handler runs: 401 to sign in,
/// 403 with the role needed, in the reader's words.
pub(crate) struct Signed<R> {
    pub operator: SignedIn,
    needs: PhantomData<R>,
}

impl<R: Needs> FromRequestParts<AppState> for Signed<R> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Ok(reading) = Reading::from_request_parts(parts, state).await;
        match require(reading, parts.extensions.get::<SignedIn>(), R::ROLE) {
            Ok(operator) => Ok(Signed {
                operator: operator.clone(),
                needs: PhantomData,
            }),
            Err(refused) => Err(refused),
        }
    }
}

/// The operator, if signed in with at least `needed`; otherwise the refusal, 401 or 403, in
/// the reader's words. (The refusal is the handler's answer as it stands, so it is not
/// boxed.)
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
