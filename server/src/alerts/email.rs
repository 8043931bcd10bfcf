//! Alert e-mail over SMTP: `smtps://` (TLS from the first byte), `smtp://…?tls=starttls` (the
//! upgrade is required), or plain `smtp://HOST:PORT` for a relay on this machine or network.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use claimcheck_core::alert_check::Message;

use crate::telemetry::error_chain;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

/// An SMTP server's URL, as lettre reads it (our `tls=starttls` is its `tls=required`). Its
/// password never shows in logs or errors.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpUrl(String);

impl SmtpUrl {
    /// `scheme://host:port`, without the credentials.
    pub fn shown(&self) -> String {
        let (scheme, rest) = self.0.split_once("://").unwrap_or(("smtp", &self.0));
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        format!("{scheme}://{host}")
    }
}

impl fmt::Debug for SmtpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

impl FromStr for SmtpUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let shown = SmtpUrl(text.to_owned()).shown();
        if !(text.starts_with("smtp://") || text.starts_with("smtps://")) {
            return Err(format!(
                "'{shown}' is not smtps://USER:PASS@HOST:465, \
                 smtp://USER:PASS@HOST:587?tls=starttls or smtp://HOST:PORT"
            ));
        }
        let (base, query) = text.split_once('?').unwrap_or((text, ""));
        let mut pairs = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            pairs.push(match pair {
                "tls=starttls" | "tls=required" => "tls=required",
                "tls=opportunistic" => "tls=opportunistic",
                other => {
                    return Err(format!(
                        "'{other}' in '{shown}': the only option is tls=starttls \
                         (or tls=opportunistic, which a man in the middle can turn off)"
                    ));
                }
            });
        }
        let url = if pairs.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", pairs.join("&"))
        };
        AsyncSmtpTransport::<Tokio1Executor>::from_url(&url)
            .map_err(|e| format!("'{shown}' is not a usable SMTP URL: {e}"))?;
        Ok(SmtpUrl(url))
    }
}

/// Where alert e-mail goes, and the server that takes it.
#[derive(Clone)]
pub struct EmailChannel {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    server: SmtpUrl,
    from: Mailbox,
    to: Vec<Mailbox>,
}

impl fmt::Debug for EmailChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl EmailChannel {
    /// Every SMTP step (connect, TLS, each command) gives up after `timeout`.
    pub fn new(
        server: SmtpUrl,
        from: Mailbox,
        to: Vec<Mailbox>,
        timeout: Duration,
    ) -> Result<EmailChannel, String> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(&server.0)
            .map_err(|e| format!("'{}': {e}", server.shown()))?
            .timeout(Some(timeout))
            .build();
        Ok(EmailChannel {
            transport,
            server,
            from,
            to,
        })
    }

    /// `to a@shop.ch, b@shop.ch via smtps://mail.shop.ch:465`.
    pub fn describe(&self) -> String {
        let to: Vec<String> = self.to.iter().map(ToString::to_string).collect();
        format!("to {} via {}", to.join(", "), self.server.shown())
    }

    pub async fn send(&self, message: &Message) -> Result<(), String> {
        let mut email = lettre::Message::builder()
            .from(self.from.clone())
            .subject(&message.subject)
            .header(ContentType::TEXT_PLAIN);
        for to in &self.to {
            email = email.to(to.clone());
        }
        let email = email
            .body(message.text.clone())
            .map_err(|e| format!("cannot write the e-mail: {e}"))?;
        self.transport.send(email).await.map(|_| ()).map_err(|e| {
            format!(
                "{} refused or failed: {}",
                self.server.shown(),
                error_chain(&e)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_kinds_of_url_are_read_and_the_password_never_shows() {
        let tls: SmtpUrl = "smtps://alerts:s3cret@mail.shop.ch:465".parse().unwrap();
        assert_eq!(tls.shown(), "smtps://mail.shop.ch:465");
        assert!(!format!("{tls:?}").contains("s3cret"));
        let starttls: SmtpUrl = "smtp://alerts:s3cret@mail.shop.ch:587?tls=starttls"
            .parse()
            .unwrap();
        assert!(starttls.0.ends_with("?tls=required"));
        let relay: SmtpUrl = "smtp://127.0.0.1:25".parse().unwrap();
        assert_eq!(relay.shown(), "smtp://127.0.0.1:25");
    }

    #[test]
    fn wrong_urls_are_refused_without_their_password() {
        let error = "http://u:s3cret@mail.shop.ch"
            .parse::<SmtpUrl>()
            .unwrap_err();
        assert!(!error.contains("s3cret"), "{error}");
        let error = "smtp://u:s3cret@mail.shop.ch?tls=maybe"
            .parse::<SmtpUrl>()
            .unwrap_err();
        assert!(
            error.contains("tls=maybe") && !error.contains("s3cret"),
            "{error}"
        );
    }
}
