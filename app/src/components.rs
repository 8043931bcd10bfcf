//! Small pieces shared by the pages.

use claimcheck_core::ClaimState;
use leptos::prelude::*;

use crate::flash::Flash;
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

/// The outcome of the last action, carried to this page in the flash cookie
/// ([`crate::flash`]) and forgotten once shown. The page that shows it is a new page, which
/// screen readers read from the top: once the page is live the notice takes the focus, so
/// the result is read out first and the next Tab continues from it.
#[component]
pub fn ActionNotices() -> impl IntoView {
    let flash = take_flash();
    let focus = flash.is_some().then(|| view! { <FocusNotices/> });
    view! {
        {focus}
        <div id=NOTICES tabindex="-1" class="notices">
            {flash.map(|flash| match flash {
                Flash::Notice(text) => view! {
                    <p class="notice notice-ok" role="status" aria-live="polite" aria-atomic="true">
                        {text}
                    </p>
                }
                .into_any(),
                Flash::Error(text) => view! { <ErrorNotice message=text/> }.into_any(),
                // The form below shows what to correct, field by field.
                Flash::Form(form) => view! { <ErrorNotice message=form.summary/> }.into_any(),
            })}
        </div>
    }
}

/// The element that holds the page's notices.
const NOTICES: &str = "notices";

/// Gives the focus to the page's notices once the page is live (the pages are the server's;
/// only islands run in the browser).
#[island]
fn FocusNotices() -> impl IntoView {
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        use wasm_bindgen::JsCast;
        if let Some(region) = document()
            .get_element_by_id(NOTICES)
            .and_then(|region| region.dyn_into::<web_sys::HtmlElement>().ok())
        {
            let _ = region.focus();
        }
    });
}

/// The flash of this request, if it carries one; the answer then forgets it.
#[cfg(feature = "ssr")]
fn take_flash() -> Option<Flash> {
    let parts = use_context::<http::request::Parts>()?;
    let cookies = parts.headers.get_all(http::header::COOKIE);
    let flash = Flash::from_cookies(cookies.iter().filter_map(|v| v.to_str().ok()))?;
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>()
        && let Ok(clear) = http::HeaderValue::from_str(&Flash::clear_cookie())
    {
        response.append_header(http::header::SET_COOKIE, clear);
    }
    Some(flash)
}

/// The browser never renders a page's notices (they are not an island).
#[cfg(not(feature = "ssr"))]
fn take_flash() -> Option<Flash> {
    None
}

/// A claim state as a label: its name in words, its colour only a second cue.
#[component]
pub fn StateBadge(state: ClaimState) -> impl IntoView {
    let class = format!("badge state-{state}");
    view! { <span class=class data-state=state.as_str()><StateName state/></span> }
}

/// Shows `resource`'s value with `view`, its error as a notice, and a line while loading:
/// the one shell of every page that loads something.
#[component]
pub fn Loaded<T, V, F>(resource: Resource<Result<T, ServerFnError>>, view: F) -> impl IntoView
where
    T: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static,
    V: IntoView + 'static,
    F: Fn(T) -> V + Send + Sync + 'static,
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

/// [`Loaded`], the signed-in operator beside the value (`None` while unknown or refused), for
/// the pages whose actions depend on the role. Both resources are the page's own.
#[component]
pub fn LoadedWithMe<T, V, F>(
    resource: Resource<Result<T, ServerFnError>>,
    me: Resource<Result<crate::api::Me, ServerFnError>>,
    view: F,
) -> impl IntoView
where
    T: Clone + Send + Sync + serde::Serialize + serde::de::DeserializeOwned + 'static,
    V: IntoView + 'static,
    F: Fn(T, Option<crate::api::Me>) -> V + Send + Sync + 'static,
{
    view! {
        <Transition fallback=|| view! { <p class="muted">{t!(use_i18n(), common.loading)}</p> }>
            {move || {
                let me = me.get().and_then(Result::ok);
                resource
                    .get()
                    .map(|result| match result {
                        Ok(value) => view(value, me).into_any(),
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

/// The sending button of a form whose action cannot be undone, asking first: the summary
/// only opens the question, and the button under it, which names what it does, sends the
/// form it stands in. A `<details>`, so it works without WASM, opens with Enter or Space
/// and is announced as expandable. Its words are the caller's (it also renders inside
/// islands, which carry no translations).
#[component]
pub fn ConfirmButton(
    /// What the closed control says: `Refund…`.
    #[prop(into)]
    open: Signal<String>,
    /// What happens, and that it cannot be undone.
    #[prop(into)]
    question: Signal<String>,
    /// The button that sends, naming the action: `Refund CHF 24.50 — confirm`.
    #[prop(into)]
    confirm: Signal<String>,
) -> impl IntoView {
    view! {
        <details class="confirm">
            <summary class="button danger">{move || open.get()}</summary>
            <p>{move || question.get()}</p>
            <button type="submit" class="button danger">{move || confirm.get()}</button>
        </details>
    }
}
