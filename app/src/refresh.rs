//! Lists that keep themselves current while someone looks at them: the claims, the events
//! and the orders. The pages are the server's (islands), so the list is read again the way
//! it was first read: the island asks the server for this same page every few seconds while
//! it is visible, and puts the fresh list in place of the old one when it changed. It waits
//! while the operator is choosing something a refresh would throw away (a box ticked, a
//! question open, the focus inside the list). Without WASM the list is as the server sent it.

use leptos::prelude::*;

/// The element a refreshed page's list is read from and written to.
pub const LIVE_REGION: &str = "live-list";

/// How often a visible list asks again.
#[cfg(feature = "hydrate")]
const REFRESH_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Keeps the page's [`LIVE_REGION`] current (in the browser; nothing on the server).
#[island]
pub fn RefreshWhileVisible() -> impl IntoView {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        let handle = set_interval_with_handle(
            || {
                if !document().hidden() && !choosing() {
                    leptos::task::spawn_local(async {
                        // A page that cannot be read now is read at the next tick.
                        let _ = swap().await;
                    });
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
}

/// The operator is in the middle of something the list holds: a ticked box, an open
/// question, the focus on one of its controls.
#[cfg(feature = "hydrate")]
fn choosing() -> bool {
    let document = document();
    let ticked = document
        .query_selector("input[name=id]:checked, details[open]")
        .ok()
        .flatten()
        .is_some();
    let focused = document
        .active_element()
        .zip(document.get_element_by_id(LIVE_REGION))
        .is_some_and(|(active, region)| region.contains(Some(&active)));
    ticked || focused
}

/// Reads this page again and replaces the live region's content with the fresh one when it
/// differs (a page that moved elsewhere, e.g. to sign-in, changes nothing).
#[cfg(feature = "hydrate")]
async fn swap() -> Result<(), wasm_bindgen::JsValue> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;

    let window = window();
    let href = window.location().href()?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str(&href))
        .await?
        .dyn_into()?;
    if !response.ok() || response.redirected() {
        return Ok(());
    }
    let html = JsFuture::from(response.text()?)
        .await?
        .as_string()
        .unwrap_or_default();
    let fresh = web_sys::DomParser::new()?
        .parse_from_string(&html, web_sys::SupportedType::TextHtml)?
        .get_element_by_id(LIVE_REGION);
    let current = document().get_element_by_id(LIVE_REGION);
    if let (Some(fresh), Some(current)) = (fresh, current) {
        let fresh = fresh.inner_html();
        // Something may have been chosen while the page was on its way.
        if fresh != current.inner_html() && !choosing() {
            current.set_inner_html(&fresh);
        }
    }
    Ok(())
}
