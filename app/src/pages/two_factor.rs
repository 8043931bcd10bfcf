//! Two-factor sign-in: the code step after the password, and setting it up (a QR code for the
//! authenticator app, a first code to confirm, ten recovery codes shown once). Plain form
//! posts, so both work before (and without) WASM.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{TwoFactor, get_two_factor};
use crate::components::{ActionNotices, Loaded};

#[component]
pub fn TwoFactorLoginPage() -> impl IntoView {
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_else(|| "/".into());
    view! {
        <Title text="Sign-in code"/>
        <section class="page narrow">
            <h1>"Sign-in code"</h1>
            <ActionNotices/>
            <form method="post" action="/login/2fa" class="stack">
                <input type="hidden" name="next" value=next/>
                <label for="code">"Code from your authenticator app (or a recovery code)"</label>
                <input
                    id="code"
                    name="code"
                    inputmode="numeric"
                    autocomplete="one-time-code"
                    required
                    autofocus
                />
                <button type="submit" class="button">"Sign in"</button>
            </form>
        </section>
    }
}

#[component]
pub fn TwoFactorPage() -> impl IntoView {
    let state = Resource::new(|| (), |_| get_two_factor());
    view! {
        <Title text="Two-factor sign-in"/>
        <section class="page narrow">
            <h1>"Two-factor sign-in"</h1>
            <ActionNotices/>
            <Loaded resource=state view=two_factor_view/>
        </section>
    }
}

fn two_factor_view(state: TwoFactor) -> impl IntoView {
    let required = state.required.then(|| {
        view! {
            <p class="notice notice-error" role="alert">
                "Your role must sign in with a second factor: set it up to go on."
            </p>
        }
    });
    let codes = (!state.fresh_codes.is_empty()).then(|| {
        view! {
            <h2>"Recovery codes"</h2>
            <p>
                "Each one signs you in once if your phone is lost. They are shown only now: "
                "print them or keep them in a password manager."
            </p>
            <ul class="recovery-codes mono" data-testid="recovery-codes">
                {state.fresh_codes.into_iter().map(|c| view! { <li>{c}</li> }).collect_view()}
            </ul>
        }
    });
    let body = if state.enabled {
        view! {
            <p data-testid="two-factor-status">
                "On. Sign-in asks for a code from your authenticator app. Recovery codes left: "
                {state.recovery_codes_left} "."
            </p>
            <p class="muted">
                "Lost your phone? An admin resets it: claimcheck operator reset-2fa YOUR-NAME."
            </p>
        }
        .into_any()
    } else if let Some(pending) = state.pending {
        view! {
            <p>"Scan this code with an authenticator app, then enter the code it shows."</p>
            <div class="qr" role="img" aria-label="QR code for your authenticator app" inner_html=pending.qr_svg></div>
            <p>"Or type this key in by hand: " <code data-testid="totp-secret">{pending.secret}</code></p>
            <form method="post" action="/dashboard/actions/2fa/confirm" class="stack">
                <label for="code">"Code from the app"</label>
                <input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" required/>
                <button type="submit" class="button">"Turn on"</button>
            </form>
        }
            .into_any()
    } else {
        view! {
            <p data-testid="two-factor-status">
                "Off. With it on, signing in needs your password and a code from an "
                "authenticator app on your phone."
            </p>
            <form method="post" action="/dashboard/actions/2fa/begin">
                <button type="submit" class="button">"Set up"</button>
            </form>
        }
        .into_any()
    };
    view! { {required} {codes} {body} }
}
