//! Where Claimcheck may send what it sends out (Stripe's API, the alert webhook): over
//! https, or plain http to this machine only (the simulator, a test receiver).

/// Why an outbound URL is refused.
pub fn check(url: &str) -> Result<(), String> {
    let uri: hyper::Uri = url
        .trim()
        .parse()
        .map_err(|_| format!("'{url}' is not a URL"))?;
    let host = uri.host().filter(|h| !h.is_empty());
    match (uri.scheme_str(), host) {
        (Some("https"), Some(_)) => Ok(()),
        (Some("http"), Some(host)) if is_loopback(host) => Ok(()),
        (Some("http"), Some(host)) => Err(format!(
            "'{url}' is plain http to {host}: use https (plain http goes to this machine only, \
             127.0.0.1, ::1 or localhost)"
        )),
        _ => Err(format!("'{url}' is not an https:// URL naming a host")),
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn https_anywhere_and_plain_http_to_this_machine_only() {
        for good in [
            "https://api.stripe.com/",
            "https://hooks.slack.com/services/x",
            "http://127.0.0.1:12111/",
            "http://127.5.0.1/",
            "http://localhost:8080/hook",
            "http://[::1]:9000/",
        ] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        for bad in [
            "http://api.stripe.com/",
            "http://10.0.0.5/",
            "http://localhost.evil.example/",
            "http://127.0.0.1.nip.io/",
            "ftp://api.stripe.com/",
            "api.stripe.com",
            "https://",
            "",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        assert!(
            check("http://stripe.internal/")
                .unwrap_err()
                .contains("use https")
        );
    }
}
