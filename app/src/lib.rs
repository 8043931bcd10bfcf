//! Claimcheck's dashboard: the HTML shell, the router and the pages. Server functions live
//! next to the page that calls them; each one runs on the server and calls the engine.
//!
//! Pages are rendered on the server only, and every form posts to the server, so the
//! dashboard works without WASM. The few controls that need the browser are islands
//! (`#[island]`: the header search's shortcut, a running batch's live progress, the
//! hydration marker); only they are compiled into the browser bundle and hydrated.
#![forbid(unsafe_code)]
// The claims table nests deep enough that the release build (without erase_components) needs
// more than the default 128 to lay out its hydration future.
#![recursion_limit = "256"]

pub mod api;
mod components;
pub mod flash;
pub mod i18n;
pub mod links;
mod pages;
mod refresh;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::hooks::use_location;
use leptos_router::{SsrMode, path};

use crate::api::get_me;
use crate::i18n::*;
use crate::pages::{
    AlertBadge, AlertsPage, AuditPage, BulkBatchPage, BulkRedrivePage, ClaimsPage, CustomerPage,
    EventPage, EventsPage, LoginPage, NotFound, OperatorsPage, OrderPage, OrdersPage, OverviewPage,
    PreferencesPage, ReconcilePage, RedrivePage, RefundPage, RequestsPage, SearchPage,
    SubscriptionPage, SubscriptionsPage, TwoFactorLoginPage, TwoFactorPage,
};

/// The document around the app, rendered on the server only. The bundle's files are named
/// after `options.output_name` (`claimcheck`, or `claimcheck.<content hash>` when the
/// server serves the site it carries).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    content_security_policy();
    let stylesheet = format!("/{}/{}.css", options.site_pkg_dir, options.output_name);
    view! {
        <!DOCTYPE html>
        <html>
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="stylesheet" href=stylesheet/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options islands=true/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// A strict Content-Security-Policy for the page: scripts only from this site or carrying
/// this response's nonce (the hydration script), WebAssembly allowed to compile, no framing,
/// forms only to this site. Inline styles stay allowed (the overview's bars are sized inline).
#[cfg(feature = "ssr")]
fn content_security_policy() {
    use leptos::nonce::{provide_nonce, use_nonce};
    provide_nonce();
    let (Some(nonce), Some(response)) =
        (use_nonce(), use_context::<leptos_axum::ResponseOptions>())
    else {
        return;
    };
    let policy = format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
         object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    );
    if let Ok(value) = http::HeaderValue::from_str(&policy) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // The language is the server's choice for the request (the operator's, else the
    // browser's), never a cookie of leptos_i18n's own.
    #[cfg(feature = "ssr")]
    let chosen = leptos_use::UseLocalesOptions::default()
        .ssr_lang_header_getter(|| Some(i18n::reader().language.tag().to_owned()));
    #[cfg(not(feature = "ssr"))]
    let chosen = leptos_use::UseLocalesOptions::default();
    view! {
        <I18nContextProvider enable_cookie=false ssr_lang_header_getter=chosen>
            <Frame/>
        </I18nContextProvider>
    }
}

/// The page around every route: the header, the main content, the hydration marker.
#[component]
fn Frame() -> impl IntoView {
    let i18n = use_i18n();
    // The `<title>` is put together after the page's body, outside the request's reactive
    // arena (and possibly on another thread): the formatter holds the language itself, never
    // a signal. The language is the server's choice and does not change on the page.
    let language = i18n.get_locale_untracked();
    let title = move |page: String| td_string!(language, common.title_suffix, page).to_string();
    view! {
        <Title formatter=title/>
        <Router>
            <a href="#main" class="skip-link">{t!(i18n, common.skip_to_content)}</a>
            <TopBar/>
            <main id="main" data-hydrated="false" tabindex="-1">
                // Every page waits for its data before the first byte, so that its status
                // (404 for a missing order, 401, 403, 503) is the one the data decided.
                <Routes fallback=NotFound>
                    <Route path=path!("") view=OverviewPage ssr=SsrMode::Async/>
                    <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async/>
                    <Route path=path!("/login/2fa") view=TwoFactorLoginPage ssr=SsrMode::Async/>
                    <Route path=path!("/account") view=PreferencesPage ssr=SsrMode::Async/>
                    <Route path=path!("/account/2fa") view=TwoFactorPage ssr=SsrMode::Async/>
                    <Route path=path!("/claims") view=ClaimsPage ssr=SsrMode::Async/>
                    <Route path=path!("/claims/redrive") view=BulkRedrivePage ssr=SsrMode::Async/>
                    <Route path=path!("/claims/redrive/:id") view=BulkBatchPage ssr=SsrMode::Async/>
                    <Route path=path!("/events") view=EventsPage ssr=SsrMode::Async/>
                    <Route path=path!("/events/:id") view=EventPage ssr=SsrMode::Async/>
                    <Route path=path!("/events/:id/redrive") view=RedrivePage ssr=SsrMode::Async/>
                    <Route path=path!("/customers/:who") view=CustomerPage ssr=SsrMode::Async/>
                    <Route path=path!("/orders") view=OrdersPage ssr=SsrMode::Async/>
                    <Route path=path!("/orders/:id") view=OrderPage ssr=SsrMode::Async/>
                    <Route path=path!("/orders/:id/refund") view=RefundPage ssr=SsrMode::Async/>
                    <Route path=path!("/subscriptions") view=SubscriptionsPage ssr=SsrMode::Async/>
                    <Route path=path!("/subscriptions/:id") view=SubscriptionPage ssr=SsrMode::Async/>
                    <Route path=path!("/requests") view=RequestsPage ssr=SsrMode::Async/>
                    <Route path=path!("/audit") view=AuditPage ssr=SsrMode::Async/>
                    <Route path=path!("/alerts") view=AlertsPage ssr=SsrMode::Async/>
                    <Route path=path!("/reconcile") view=ReconcilePage ssr=SsrMode::Async/>
                    <Route path=path!("/operators") view=OperatorsPage ssr=SsrMode::Async/>
                    <Route path=path!("/search") view=SearchPage ssr=SsrMode::Async/>
                </Routes>
            </main>
            // Last in the page: islands hydrate in document order, so when this one has,
            // every island before it has too.
            <HydrationMarker/>
        </Router>
    }
}

/// Marks `<main>` with `data-hydrated="true"` once the browser has hydrated the page's
/// islands: end-to-end tests wait for it before they test what needs WASM.
#[island]
fn HydrationMarker() -> impl IntoView {
    Effect::new(move |_| {
        if let Some(main) = document().get_element_by_id("main") {
            let _ = main.set_attribute("data-hydrated", "true");
        }
    });
}

/// The navigation and, once signed in, who is signed in and the sign-out button; the
/// language switch on every page.
#[component]
fn TopBar() -> impl IntoView {
    let i18n = use_i18n();
    let location = use_location();
    let on_login = location.pathname.get_untracked().starts_with("/login");
    // The search page shows its term in the box again.
    let search_term = (location.pathname.get_untracked() == "/search")
        .then(|| location.query.get_untracked().get("q"))
        .flatten();
    let search = SearchWords {
        label: t_string!(i18n, common.search_label).to_string(),
        placeholder: t_string!(i18n, common.search_placeholder).to_string(),
        go: t_string!(i18n, common.search_go).to_string(),
    };
    view! {
        <header class="topbar">
            <A href="/" attr:class="brand">{t!(i18n, common.brand)}</A>
            {(!on_login).then(|| {
                let me = Resource::new(|| (), |_| get_me());
                let menu = t_string!(i18n, common.menu).to_string();
                view! {
                    <MenuButton label=menu/>
                    <HeaderSearch term=search_term.clone() words=search.clone()/>
                    <div class="menu" id=MENU>
                    <nav aria-label=move || t_string!(i18n, common.nav_label)>
                        <A href="/">{t!(i18n, common.nav_overview)}</A>
                        <A href="/claims">{t!(i18n, common.nav_claims)}</A>
                        <A href="/events">{t!(i18n, common.nav_events)}</A>
                        <A href="/orders">{t!(i18n, common.nav_orders)}</A>
                        <A href="/subscriptions">{t!(i18n, common.nav_subscriptions)}</A>
                        <A href="/requests">{t!(i18n, common.nav_requests)}</A>
                        <A href="/audit">{t!(i18n, common.nav_audit)}</A>
                        <AlertBadge/>
                        <Transition fallback=|| ()>
                            {move || {
                                me.get()
                                    .and_then(Result::ok)
                                    .filter(|me| me.is_admin())
                                    .map(|_| view! { <A href="/operators">{t!(i18n, common.nav_operators)}</A> })
                            }}
                        </Transition>
                    </nav>
                    <div class="who">
                        <Transition fallback=|| ()>
                            {move || {
                                me.get()
                                    .and_then(Result::ok)
                                    .map(|me| {
                                        let role = role_name(i18n, me.role);
                                        view! {
                                            <span data-testid="signed-in-as">
                                                {t!(i18n, common.signed_in_as, name = me.username.clone(), role)}
                                            </span>
                                        }
                                    })
                            }}
                        </Transition>
                        <A href="/account">{t!(i18n, common.nav_account)}</A>
                        <form method="post" action="/logout" class="inline">
                            <button type="submit" class="link-button">{t!(i18n, common.sign_out)}</button>
                        </form>
                        <form method="post" action="/logout" class="inline">
                            <input type="hidden" name="everywhere" value="1"/>
                            <button
                                type="submit"
                                class="link-button"
                                title=move || t_string!(i18n, common.sign_out_everywhere_title)
                            >
                                {t!(i18n, common.sign_out_everywhere)}
                            </button>
                        </form>
                    </div>
                    <LanguageSwitch/>
                    </div>
                }
            })}
            {on_login.then(|| view! { <LanguageSwitch/> })}
        </header>
    }
}

/// The menu that folds behind [`MenuButton`] on a phone.
const MENU: &str = "menu";

/// The button that opens and closes the menu on a phone. Once the page is live it marks the
/// header (`data-menu`), which folds the menu on narrow screens only (style/main.css);
/// without WASM there is no button and the menu stays open.
#[island]
fn MenuButton(label: String) -> impl IntoView {
    let (open, set_open) = signal(false);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let state = if open.get() { "open" } else { "closed" };
        if let Some(bar) = document().query_selector("header.topbar").ok().flatten() {
            let _ = bar.set_attribute("data-menu", state);
        }
    });
    view! {
        <button
            type="button"
            class="menu-button"
            aria-controls=MENU
            aria-expanded=move || open.get().to_string()
            on:click=move |_| set_open.update(|open| *open = !*open)
        >
            {label}
        </button>
    }
}

/// A role in the reader's words.
pub(crate) fn role_name(i18n: I18nContext<Locale>, role: claimcheck_core::auth::Role) -> String {
    names::role(i18n.get_locale(), role)
}

/// A plain form that posts the language to `/language` (remembered for the operator and
/// in this browser) and comes back to this page.
#[component]
fn LanguageSwitch() -> impl IntoView {
    use claimcheck_core::language::Language;
    let i18n = use_i18n();
    let location = use_location();
    let here = {
        let path = location.pathname.get_untracked();
        let query = location.search.get_untracked();
        if query.is_empty() {
            path
        } else {
            format!("{path}?{}", query.trim_start_matches('?'))
        }
    };
    let current = Language::ALL
        .into_iter()
        .find(|l| Locale::from(*l) == i18n.get_locale_untracked())
        .unwrap_or_default();
    view! {
        <form method="post" action="/language" class="language inline">
            <input type="hidden" name="next" value=here/>
            <label for="language-choice" class="visually-hidden">{t!(i18n, common.language)}</label>
            <select id="language-choice" name="language">
                {Language::ALL
                    .into_iter()
                    .map(|language| {
                        view! {
                            <option value=language.tag() selected=language == current lang=language.tag()>
                                {language.name()}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
            <button type="submit" class="button small">{t!(i18n, common.language_switch)}</button>
        </form>
    }
}

/// The header search's words, from the server (the island itself carries no translations).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SearchWords {
    pub label: String,
    pub placeholder: String,
    pub go: String,
}

/// The search box on every page: a plain GET form to `/search/go`, which opens the one
/// match or lists them. `/` anywhere outside a text field puts the cursor in it (the island's
/// part: without WASM the box works, the shortcut does not).
#[island]
fn HeaderSearch(term: Option<String>, words: SearchWords) -> impl IntoView {
    let input = NodeRef::<leptos::html::Input>::new();
    let handle = window_event_listener(leptos::ev::keydown, move |ev| {
        if ev.key() != "/" || ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
            return;
        }
        let typing = document()
            .active_element()
            .map(|el| {
                let tag = el.tag_name().to_ascii_lowercase();
                tag == "input"
                    || tag == "textarea"
                    || tag == "select"
                    || el.has_attribute("contenteditable")
            })
            .unwrap_or(false);
        if typing {
            return;
        }
        if let Some(field) = input.get() {
            ev.prevent_default();
            let _ = field.focus();
            field.select();
        }
    });
    on_cleanup(move || handle.remove());
    view! {
        <form method="get" action="/search/go" role="search" class="header-search">
            <label for="header-search" class="visually-hidden">{words.label}</label>
            <input
                id="header-search"
                node_ref=input
                type="search"
                name="q"
                value=term
                placeholder=words.placeholder
                aria-keyshortcuts="/"
                autocomplete="off"
                maxlength="320"
            />
            <button type="submit" class="button small">{words.go}</button>
        </form>
    }
}
