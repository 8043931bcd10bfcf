//! Who reads the answer to a dashboard request (their language and time zone), so that the
//! form actions' notices and errors are written in the reader's words, as the pages are.

use std::convert::Infallible;

use app::i18n::{Locale, Reader};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use claimcheck_core::auth::SignedIn;

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
