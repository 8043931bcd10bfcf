//! The page for any path the dashboard does not know.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::i18n::*;

#[component]
pub fn NotFound() -> impl IntoView {
    let i18n = use_i18n();
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text=t_string!(i18n, login.not_found_title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, login.not_found_heading)}</h1>
            <p>{t!(i18n, login.not_found_text)} " " <a href="/">{t!(i18n, login.not_found_link)}</a> "."</p>
        </section>
    }
}
