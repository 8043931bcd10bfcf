//! Small pieces shared by the pages.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// A server function's error as one sentence for the operator, without the framework's
/// prefix.
pub fn error_message(error: &ServerFnError) -> String {
    match error {
        ServerFnError::ServerError(message) => message.clone(),
        other => format!(
            "The server could not be reached ({other}). Check your connection and try again."
        ),
    }
}

#[component]
pub fn ErrorNotice(message: String) -> impl IntoView {
    view! { <p class="notice notice-error" role="alert">{message}</p> }
}

/// The outcome of the last action, carried back in the query (`?notice=…` / `?error=…`).
#[component]
pub fn ActionNotices() -> impl IntoView {
    let query = use_query_map();
    view! {
        {move || {
            query
                .read()
                .get("notice")
                .map(|text| view! { <p class="notice notice-ok" role="status">{text}</p> })
        }}
        {move || query.read().get("error").map(|text| view! { <ErrorNotice message=text/> })}
    }
}

/// A claim state as a coloured label.
#[component]
pub fn StateBadge(state: ClaimState) -> impl IntoView {
    let class = format!("badge state-{state}");
    view! { <span class=class>{state.as_str()}</span> }
}

/// Shows `resource`'s value with `view`, its error as a notice, and a line while loading.
#[component]
pub fn Loaded<T, V>(resource: Resource<Result<T, ServerFnError>>, view: fn(T) -> V) -> impl IntoView
where
    T: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static,
    V: IntoView + 'static,
{
    view! {
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || {
                resource
                    .get()
                    .map(|result| match result {
                        Ok(value) => view(value).into_any(),
                        Err(error) => view! { <ErrorNotice message=error_message(&error)/> }.into_any(),
                    })
            }}
        </Transition>
    }
}
