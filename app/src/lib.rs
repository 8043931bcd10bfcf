//! Claimcheck's dashboard: the HTML shell, the router and the pages. Server functions live
//! next to the page that calls them; each one runs on the server and calls the engine.
//!
//! Pages are rendered on the server only, and every form posts to the server, so the
//! dashboard works without WASM. The few controls that need the browser are islands
//! (`#[island]`: the header search's shortcut, a running batch's live progress, the
//! hydration marker); only they are compiled into the browser bundle and hydrated.
#![forbid(unsafe_code)]

pub mod api;
mod components;
mod pages;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::hooks::use_location;
use leptos_router::path;

use crate::api::get_me;
use crate::pages::{
    AlertBadge, AlertsPage, AuditPage, BulkBatchPage, BulkRedrivePage, ClaimsPage, EventPage,
    EventsPage, LoginPage, NotFound, OperatorsPage, OrderPage, OrdersPage, OverviewPage,
    ReconcilePage, RedrivePage, RefundPage, SearchPage, TwoFactorLoginPage, TwoFactorPage,
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
        <html lang="en">
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
    view! {
        <Title formatter=|page: String| format!("{page} · Claimcheck")/>
        <Router>
            <TopBar/>
            <main id="main" data-hydrated="false">
                <Routes fallback=NotFound>
                    <Route path=path!("") view=OverviewPage/>
                    <Route path=path!("/login") view=LoginPage/>
                    <Route path=path!("/login/2fa") view=TwoFactorLoginPage/>
                    <Route path=path!("/account/2fa") view=TwoFactorPage/>
                    <Route path=path!("/claims") view=ClaimsPage/>
                    <Route path=path!("/claims/redrive") view=BulkRedrivePage/>
                    <Route path=path!("/claims/redrive/:id") view=BulkBatchPage/>
                    <Route path=path!("/events") view=EventsPage/>
                    <Route path=path!("/events/:id") view=EventPage/>
                    <Route path=path!("/events/:id/redrive") view=RedrivePage/>
                    <Route path=path!("/orders") view=OrdersPage/>
                    <Route path=path!("/orders/:id") view=OrderPage/>
                    <Route path=path!("/orders/:id/refund") view=RefundPage/>
                    <Route path=path!("/audit") view=AuditPage/>
                    <Route path=path!("/alerts") view=AlertsPage/>
                    <Route path=path!("/reconcile") view=ReconcilePage/>
                    <Route path=path!("/operators") view=OperatorsPage/>
                    <Route path=path!("/search") view=SearchPage/>
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

/// The navigation and, once signed in, who is signed in and the sign-out button.
#[component]
fn TopBar() -> impl IntoView {
    let location = use_location();
    let on_login = location.pathname.get_untracked().starts_with("/login");
    // The search page shows its term in the box again.
    let search_term = (location.pathname.get_untracked() == "/search")
        .then(|| location.query.get_untracked().get("q"))
        .flatten();
    view! {
        <header class="topbar">
            <A href="/" attr:class="brand">"Claimcheck"</A>
            {(!on_login).then(|| {
                let me = Resource::new(|| (), |_| get_me());
                view! {
                    <nav aria-label="Main">
                        <A href="/">"Overview"</A>
                        <A href="/claims">"Claims"</A>
                        <A href="/events">"Events"</A>
                        <A href="/orders">"Orders"</A>
                        <A href="/audit">"Audit log"</A>
                        <AlertBadge/>
                        <Transition fallback=|| ()>
                            {move || {
                                me.get()
                                    .and_then(Result::ok)
                                    .filter(|me| me.is_admin())
                                    .map(|_| view! { <A href="/operators">"Operators"</A> })
                            }}
                        </Transition>
                    </nav>
                    <HeaderSearch term=search_term.clone()/>
                    <div class="who">
                        <Transition fallback=|| ()>
                            {move || {
                                me.get()
                                    .and_then(Result::ok)
                                    .map(|me| {
                                        view! {
                                            <span data-testid="signed-in-as">
                                                {me.username} " (" {me.role.as_str()} ")"
                                            </span>
                                        }
                                    })
                            }}
                        </Transition>
                        <A href="/account/2fa">"Two-factor"</A>
                        <form method="post" action="/logout" class="inline">
                            <button type="submit" class="link-button">"Sign out"</button>
                        </form>
                        <form method="post" action="/logout" class="inline">
                            <input type="hidden" name="everywhere" value="1"/>
                            <button type="submit" class="link-button" title="End every session of yours, on every device">
                                "Sign out everywhere"
                            </button>
                        </form>
                    </div>
                }
            })}
        </header>
    }
}

/// The search box on every page: a plain GET form to `/search/go`, which opens the one
/// match or lists them. `/` anywhere outside a text field puts the cursor in it (the island's
/// part: without WASM the box works, the shortcut does not).
#[island]
fn HeaderSearch(term: Option<String>) -> impl IntoView {
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
            <label for="header-search" class="visually-hidden">"Search orders, customers and events"</label>
            <input
                id="header-search"
                node_ref=input
                type="search"
                name="q"
                value=term
                placeholder="Search id or e-mail  (/)"
                aria-keyshortcuts="/"
                autocomplete="off"
                maxlength="320"
            />
            <button type="submit" class="button small">"Go"</button>
        </form>
    }
}
