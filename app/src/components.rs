//! Small pieces shared by the pages.

use leptos::prelude::*;

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
