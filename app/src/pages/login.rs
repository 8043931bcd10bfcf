//! Sign-in: a plain form posted to `/login`, so it works before (and without) WASM.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::components::ActionNotices;
use crate::i18n::*;

#[component]
pub fn LoginPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_else(|| "/".into());
    view! {
        <Title text=t_string!(i18n, login.title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, login.title)}</h1>
            <ActionNotices/>
            <form method="post" action="/login" class="stack">
                <input type="hidden" name="next" value=next/>
                <label for="username">{t!(i18n, login.username)}</label>
                <input id="username" name="username" autocomplete="username" required/>
                <label for="password">{t!(i18n, login.password)}</label>
                <input
                    id="password"
                    name="password"
                    type="password"
                    autocomplete="current-password"
                    required
                />
                <button type="submit" class="button">{t!(i18n, login.submit)}</button>
            </form>
        </section>
    }
}
