//! How the signed-in operator reads the dashboard: language and time zone, remembered for
//! them on every device.

use claimcheck_core::language::Language;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{Preferences, get_preferences};
use crate::components::{ActionNotices, Loaded};
use crate::i18n::*;

#[component]
pub fn PreferencesPage() -> impl IntoView {
    let i18n = use_i18n();
    let preferences = Resource::new(|| (), |_| get_preferences());
    view! {
        <Title text=t_string!(i18n, preferences.title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, preferences.title)}</h1>
            <ActionNotices/>
            <Loaded resource=preferences view=preferences_form/>
            <h2>{t!(i18n, preferences.security)}</h2>
            <p>
                <a href="/account/2fa">{t!(i18n, preferences.two_factor_link)}</a>
            </p>
        </section>
    }
}

fn preferences_form(preferences: Preferences) -> impl IntoView {
    let i18n = use_i18n();
    let chosen = preferences.language;
    let zone = preferences
        .time_zone
        .clone()
        .unwrap_or_else(|| DEFAULT_TIME_ZONE.to_owned());
    view! {
        <form method="post" action="/dashboard/actions/preferences" class="stack">
            <label for="pref-language">{t!(i18n, preferences.language)}</label>
            <select id="pref-language" name="language">
                <option value="" selected=chosen.is_none()>{t!(i18n, preferences.language_browser)}</option>
                {Language::ALL
                    .into_iter()
                    .map(|language| {
                        view! {
                            <option value=language.tag() selected=chosen == Some(language) lang=language.tag()>
                                {language.name()}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
            <label for="pref-zone">{t!(i18n, preferences.time_zone)}</label>
            <select id="pref-zone" name="time_zone" aria-describedby="pref-zone-hint">
                {preferences
                    .zones
                    .into_iter()
                    .map(|name| {
                        let selected = name == zone;
                        let value = name.clone();
                        view! { <option value=value selected=selected>{name}</option> }
                    })
                    .collect_view()}
            </select>
            <p id="pref-zone-hint" class="muted">{t!(i18n, preferences.time_zone_hint, now = preferences.now)}</p>
            <button type="submit" class="button">{t!(i18n, preferences.save)}</button>
        </form>
    }
}
