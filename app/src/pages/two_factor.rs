//! Two-factor sign-in: the code step after the password, and setting it up (a QR code for the
//! authenticator app, a first code to confirm, ten recovery codes shown once). Plain form
//! posts, so both work before (and without) WASM.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{TwoFactor, get_two_factor};
use crate::components::{ActionNotices, Loaded};
use crate::i18n::*;

#[component]
pub fn TwoFactorLoginPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_else(|| "/".into());
    view! {
        <Title text=t_string!(i18n, account.code_title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, account.code_title)}</h1>
            <ActionNotices/>
            <form method="post" action="/login/2fa" class="stack">
                <input type="hidden" name="next" value=next/>
                <label for="code">{t!(i18n, account.code_label)}</label>
                <input
                    id="code"
                    name="code"
                    inputmode="numeric"
                    autocomplete="one-time-code"
                    required
                    autofocus
                />
                <button type="submit" class="button">{t!(i18n, account.sign_in)}</button>
            </form>
        </section>
    }
}

#[component]
pub fn TwoFactorPage() -> impl IntoView {
    let i18n = use_i18n();
    let state = Resource::new(|| (), |_| get_two_factor());
    view! {
        <Title text=t_string!(i18n, account.title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, account.title)}</h1>
            <ActionNotices/>
            <Loaded resource=state view=two_factor_view/>
        </section>
    }
}

fn two_factor_view(state: TwoFactor) -> impl IntoView {
    let i18n = use_i18n();
    let required = state.required.then(|| {
        view! {
            <p class="notice notice-error" role="alert">{t!(i18n, account.required)}</p>
        }
    });
    let codes = (!state.fresh_codes.is_empty()).then(|| {
        view! {
            <h2>{t!(i18n, account.recovery_heading)}</h2>
            <p>{t!(i18n, account.recovery_intro)}</p>
            <ul class="recovery-codes mono" data-testid="recovery-codes">
                {state.fresh_codes.into_iter().map(|c| view! { <li>{c}</li> }).collect_view()}
            </ul>
        }
    });
    let body = if state.enabled {
        let left = state.recovery_codes_left;
        view! {
            <p data-testid="two-factor-status">{t!(i18n, account.status_on, left)}</p>
            <p class="muted">{t!(i18n, account.lost_phone)}</p>
        }
        .into_any()
    } else if let Some(pending) = state.pending {
        view! {
            <p>{t!(i18n, account.scan)}</p>
            <div
                class="qr"
                role="img"
                aria-label=t_string!(i18n, account.qr_label).to_string()
                inner_html=pending.qr_svg
            ></div>
            <p>{t!(i18n, account.by_hand)} " " <code data-testid="totp-secret">{pending.secret}</code></p>
            <form method="post" action="/dashboard/actions/2fa/confirm" class="stack">
                <label for="code">{t!(i18n, account.app_code)}</label>
                <input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" required/>
                <button type="submit" class="button">{t!(i18n, account.turn_on)}</button>
            </form>
        }
            .into_any()
    } else {
        view! {
            <p data-testid="two-factor-status">{t!(i18n, account.status_off)}</p>
            <form method="post" action="/dashboard/actions/2fa/begin">
                <button type="submit" class="button">{t!(i18n, account.set_up)}</button>
            </form>
        }
        .into_any()
    };
    view! { {required} {codes} {body} }
}
