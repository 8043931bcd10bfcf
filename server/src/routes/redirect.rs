//! Where a dashboard answer may send the browser: only to a path on this site, with the
//! outcome of a form post carried in the flash cookie ([`app::flash`]), never in the URL.

use app::flash::{Flash, KeptForm};
use axum::http::HeaderValue;
use axum::http::header::SET_COOKIE;
use axum::response::{IntoResponse, Redirect, Response};

/// Only a path on this site: never an absolute URL to somewhere else.
pub(super) fn local_path(next: Option<&str>) -> &str {
    // Browsers drop tabs and newlines from URLs, so "/\t/evil.example" would become
    // "//evil.example": no whitespace or control characters at all, and never two slashes
    // (or a backslash) after the first.
    match next {
        Some(path)
            if path.starts_with('/')
                && !path[1..].starts_with(['/', '\\'])
                && !path.contains('\\')
                && !path.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            path
        }
        _ => "/",
    }
}

/// Back to `page` (a dashboard path, possibly with a query) with a notice (`key` "notice") or
/// an error, carried in the flash cookie ([`app::flash`]), never in the URL; to the overview
/// if `page` is not a path on this site (a redirect never leaves it, nor fails).
pub(super) fn back(page: &str, key: &str, message: &str) -> Response {
    let flash = if key == "notice" {
        Flash::Notice(message.to_owned())
    } else {
        Flash::Error(message.to_owned())
    };
    redirect_with(page, &flash)
}

/// Back to the page of a form that is not sent, which shows what to correct next to each
/// field with what was typed still in it ([`KeptForm`]).
pub(super) fn send_back(form: KeptForm) -> Response {
    let page = form.page.clone();
    redirect_with(&page, &Flash::Form(form))
}

fn redirect_with(page: &str, flash: &Flash) -> Response {
    let page = local_path(Some(page));
    let mut response = Redirect::to(page).into_response();
    if let Ok(cookie) = HeaderValue::from_str(&flash.set_cookie()) {
        response.headers_mut().append(SET_COOKIE, cookie);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(local_path(Some("/orders/ord_1")), "/orders/ord_1");
        assert_eq!(local_path(Some("https://evil.example/")), "/");
        assert_eq!(local_path(Some("//evil.example/")), "/");
        assert_eq!(local_path(None), "/");
        assert_eq!(local_path(Some("/\t/evil.example")), "/");
        assert_eq!(local_path(Some("/\n/evil.example")), "/");
        assert_eq!(local_path(Some("/\\evil.example")), "/");
        assert_eq!(local_path(Some("/events?q=a%20b")), "/events?q=a%20b");
    }
}
