//! The browser entry point: hydrates the islands of the server-rendered dashboard.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    // Links the app's islands into the bundle: each registers itself for hydration.
    #[allow(unused_imports)]
    use app::*;
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
}
