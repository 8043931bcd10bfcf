//! Claimcheck's dashboard: the HTML shell, the router and the pages. Server functions live
//! next to the page that calls them; each one runs on the server and calls the engine.
#![forbid(unsafe_code)]

pub mod api;
mod components;
mod pages;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::StaticSegment;
use leptos_router::components::{A, Route, Router, Routes};

use crate::pages::{NotFound, OverviewPage};

/// The document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Flips once the browser has hydrated the page: end-to-end tests wait for it, and
    // controls that need WASM stay disabled until then.
    let (hydrated, set_hydrated) = signal(false);
    Effect::new(move |_| set_hydrated.set(true));
    provide_context(Hydrated(hydrated));

    view! {
        <Stylesheet id="leptos" href="/pkg/claimcheck.css"/>
        <Title formatter=|page: String| format!("{page} · Claimcheck")/>
        <Router>
            <header class="topbar">
                <A href="/" attr:class="brand">"Claimcheck"</A>
                <nav aria-label="Main">
                    <A href="/">"Overview"</A>
                </nav>
            </header>
            <main id="main" data-hydrated=move || hydrated.get().to_string()>
                <Routes fallback=NotFound>
                    <Route path=StaticSegment("") view=OverviewPage/>
                </Routes>
            </main>
        </Router>
    }
}

/// Whether the page has been hydrated in the browser.
#[derive(Clone, Copy)]
pub struct Hydrated(pub ReadSignal<bool>);

impl Hydrated {
    pub fn get(self) -> bool {
        self.0.get()
    }
}

/// `Hydrated` from context; `false` outside the app (never happens in practice).
pub fn use_hydrated() -> Hydrated {
    use_context::<Hydrated>().unwrap_or_else(|| Hydrated(signal(false).0))
}
