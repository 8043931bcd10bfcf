//! Small pieces shared by the pages.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::i18n::*;

/// A server function's error as one sentence for the operator, without the framework's
/// prefix.
pub fn error_message(error: &ServerFnError) -> String {
    match error {
        ServerFnError::ServerError(message) => message.clone(),
        other => {
            let error = other.to_string();
            t_string!(use_i18n(), common.unreachable, error).to_string()
        }
    }
}

#[component]
pub fn ErrorNotice(message: String) -> impl IntoView {
    view! { <p class="notice notice-error" role="alert">{message}</p> }
}

/// The outcome of the last action, carried back in the query (`?notice=…` / `?error=…`).
/// The page that shows it is a new page, which screen readers read from the top: once the
/// page is live the notice takes the focus, so the result is read out first and the next
/// Tab continues from it.
#[component]
pub fn ActionNotices() -> impl IntoView {
    let query = use_query_map();
    let notice = NodeRef::<leptos::html::Div>::new();
    Effect::new(move || {
        if let Some(region) = notice.get()
            && region.child_element_count() > 0
        {
            let _ = region.focus();
        }
    });
    view! {
        <div node_ref=notice tabindex="-1" class="notices">
            {move || {
                query
                    .read()
                    .get("notice")
                    .map(|text| {
                        view! {
                            <p class="notice notice-ok" role="status" aria-live="polite" aria-atomic="true">
                                {text}
                            </p>
                        }
                    })
            }}
            {move || query.read().get("error").map(|text| view! { <ErrorNotice message=text/> })}
        </div>
    }
}

/// A claim state as a label: its name in words, its colour only a second cue.
#[component]
pub fn StateBadge(state: ClaimState) -> impl IntoView {
    let class = format!("badge state-{state}");
    view! { <span class=class data-state=state.as_str()><StateName state/></span> }
}

/// Shows `resource`'s value with `view`, its error as a notice, and a line while loading.
#[component]
pub fn Loaded<T, V>(resource: Resource<Result<T, ServerFnError>>, view: fn(T) -> V) -> impl IntoView
where
    T: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static,
    V: IntoView + 'static,
{
    view! {
        <Transition fallback=|| view! { <p class="muted">{t!(use_i18n(), common.loading)}</p> }>
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

/// A claim state in the reader's words.
#[component]
pub fn StateName(state: ClaimState) -> impl IntoView {
    let i18n = use_i18n();
    state_name(i18n, state)
}

/// A claim state in the reader's words, as text.
pub fn state_name(i18n: I18nContext<Locale>, state: ClaimState) -> String {
    names::state(i18n.get_locale(), state)
}
