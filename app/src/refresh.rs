//! Lists that keep themselves current while someone looks at them: the claims, the events
//! and the orders ask again every few seconds while the page is visible, and not while the
//! operator is choosing something a refresh would throw away.

#[cfg(feature = "hydrate")]
use leptos::prelude::*;

/// How often a visible list asks again.
#[cfg(feature = "hydrate")]
const REFRESH_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Calls `refresh` every [`REFRESH_EVERY`] while the page is visible and the operator is
/// not choosing (no box ticked, no question open): a list that changed under a half-made
/// choice would lose it. In the browser only; the server renders once.
pub fn refresh_while_visible(refresh: impl Fn() + Clone + 'static) {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let refresh = refresh.clone();
        let handle = set_interval_with_handle(
            move || {
                let document = document();
                let choosing = document
                    .query_selector("input[name=id]:checked, details[open]")
                    .ok()
                    .flatten()
                    .is_some();
                if !document.hidden() && !choosing {
                    refresh();
                }
            },
            REFRESH_EVERY,
        );
        on_cleanup(move || {
            if let Ok(handle) = handle {
                handle.clear();
            }
        });
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = refresh;
}
