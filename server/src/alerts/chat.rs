//! Alerts to a chat's incoming webhook (Slack, Mattermost, Rocket.Chat, Microsoft Teams):
//! one POST of JSON with a `text` field, which all of them read.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use claimcheck_core::alert_check::Message;

use crate::telemetry::error_chain;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// An incoming webhook's URL. Such URLs carry their secret in the path, so only the host
/// shows in logs and errors.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookUrl(hyper::Uri);

impl WebhookUrl {
    pub fn shown(&self) -> String {
        format!(
            "{}://{}/…",
            self.0.scheme_str().unwrap_or("https"),
            self.0.authority().map(|a| a.as_str()).unwrap_or_default()
        )
    }
}

impl fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

impl FromStr for WebhookUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let uri: hyper::Uri = s
            .trim()
            .parse()
            .map_err(|_| "not a URL like https://hooks.slack.com/services/…".to_owned())?;
        crate::config::outbound::check(s)?;
        Ok(WebhookUrl(uri))
    }
}

/// Posts alerts to one incoming webhook.
#[derive(Clone)]
pub struct ChatChannel {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    url: WebhookUrl,
    timeout: Duration,
}

impl fmt::Debug for ChatChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl ChatChannel {
    /// The whole request (connect, TLS, answer) gives up after `timeout`.
    pub fn new(url: WebhookUrl, timeout: Duration) -> ChatChannel {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .build();
        ChatChannel {
            client: Client::builder(TokioExecutor::new()).build(https),
            url,
            timeout,
        }
    }

    pub fn describe(&self) -> String {
        format!("POST {}", self.url.shown())
    }

    pub async fn send(&self, message: &Message) -> Result<(), String> {
        let body =
            serde_json::json!({ "text": format!("*{}*\n{}", message.subject, message.text) });
        let request = hyper::Request::post(self.url.0.clone())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::USER_AGENT, "claimcheck-alerts")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| format!("cannot write the request: {e}"))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| format!("{}: {}", self.url.shown(), error_chain(&e)))?;
            let status = response.status();
            let answer = response
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            if status.is_success() {
                Ok(())
            } else {
                let answer = String::from_utf8_lossy(&answer);
                Err(format!(
                    "{} answered {status}: {}",
                    self.url.shown(),
                    answer.chars().take(200).collect::<String>()
                ))
            }
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "{}: no answer within {:?}",
                    self.url.shown(),
                    self.timeout
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_their_secret_path_is_hidden() {
        let url: WebhookUrl = "https://hooks.slack.com/services/T0/B0/s3cret"
            .parse()
            .unwrap();
        assert_eq!(url.shown(), "https://hooks.slack.com/…");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert!("ftp://x/y".parse::<WebhookUrl>().is_err());
        assert!("hooks.slack.com/x".parse::<WebhookUrl>().is_err());
        // Plain http leaves this machine for nobody: alert texts name customers.
        assert!("http://hooks.example/x".parse::<WebhookUrl>().is_err());
        assert!("http://127.0.0.1:9/hook".parse::<WebhookUrl>().is_ok());
    }
}
