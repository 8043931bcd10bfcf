//! Sign-in: a plain form posted to `/login`, so it works before (and without) WASM.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::components::ActionNotices;

#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_else(|| "/".into());
    view! {
        <Title text="Sign in"/>
        <section class="page narrow">
            <h1>"Sign in"</h1>
            <ActionNotices/>
            <form method="post" action="/login" class="stack">
                <input type="hidden" name="next" value=next/>
                <label for="username">"Username"</label>
                <input id="username" name="username" autocomplete="username" required/>
                <label for="password">"Password"</label>
                <input
                    id="password"
                    name="password"
                    type="password"
                    autocomplete="current-password"
                    required
                />
                <button type="submit" class="button">"Sign in"</button>
            </form>
        </section>
    }
}
