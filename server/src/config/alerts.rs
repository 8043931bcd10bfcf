//! Alerting's settings: when each condition holds, how often they are checked and repeated
//! ([`AlertArgs`], `serve` only), and the channels messages go out on ([`AlertChannelArgs`],
//! shared by `serve` and `claimcheck alerts test`).

use std::time::Duration;

use claimcheck_core::alert_check::AlertThresholds;
use clap::Args;
use lettre::message::Mailbox;

use super::span::Span;
use crate::alerts::{Channels, ChatChannel, EmailChannel, RetryPolicy, SmtpUrl, WebhookUrl};
use crate::error::ServerError;

/// What `serve` does about alerts.
#[derive(Debug, Clone)]
pub struct AlertsConfig {
    /// How often the conditions are checked; zero: this instance neither checks nor sends.
    pub check_interval: Duration,
    pub thresholds: AlertThresholds,
    /// A reminder while an alert stays open, at most this often; `None`: never.
    pub repeat: Option<Duration>,
    pub channels: Channels,
    pub retry: RetryPolicy,
}

impl Default for AlertsConfig {
    /// Checked every 30 s, reminded hourly, no channel (alerts show on the dashboard only).
    fn default() -> Self {
        AlertsConfig {
            check_interval: Duration::from_secs(30),
            thresholds: AlertThresholds::default(),
            repeat: Some(Duration::from_secs(3600)),
            channels: Channels {
                timeout: Duration::from_secs(10),
                ..Channels::default()
            },
            retry: RetryPolicy::default(),
        }
    }
}

/// Where alert messages go.
#[derive(Debug, Clone, Args)]
pub struct AlertChannelArgs {
    /// SMTP server for alert e-mail: smtps://USER:PASS@HOST:465, or
    /// smtp://USER:PASS@HOST:587?tls=starttls, or smtp://HOST:PORT for a local relay.
    #[arg(
        long = "smtp-url",
        env = "CLAIMCHECK_SMTP_URL",
        value_name = "CLAIMCHECK_SMTP_URL",
        hide_env_values = true
    )]
    pub smtp_url: Option<String>,
    /// Who gets alert e-mail (comma-separated addresses; `Name <a@b>` works too).
    #[arg(
        long = "alert-email-to",
        env = "CLAIMCHECK_ALERT_EMAIL_TO",
        value_name = "CLAIMCHECK_ALERT_EMAIL_TO",
        value_delimiter = ','
    )]
    pub email_to: Vec<String>,
    /// The sender of alert e-mail, e.g. `Claimcheck <alerts@shop.ch>`.
    #[arg(
        long = "alert-email-from",
        env = "CLAIMCHECK_ALERT_EMAIL_FROM",
        value_name = "CLAIMCHECK_ALERT_EMAIL_FROM"
    )]
    pub email_from: Option<String>,
    /// A chat's incoming webhook (Slack, Mattermost, Rocket.Chat, Teams): alerts are POSTed
    /// as JSON with a `text` field.
    #[arg(
        long = "alert-webhook-url",
        env = "CLAIMCHECK_ALERT_WEBHOOK_URL",
        value_name = "CLAIMCHECK_ALERT_WEBHOOK_URL",
        hide_env_values = true
    )]
    pub webhook_url: Option<String>,
    /// How long one step of sending (connect, TLS, each SMTP command, the chat's answer) may
    /// take before the attempt fails and is retried later.
    #[arg(
        long = "alert-timeout",
        env = "CLAIMCHECK_ALERT_TIMEOUT",
        value_name = "CLAIMCHECK_ALERT_TIMEOUT",
        default_value_t = Span(AlertsConfig::default().channels.timeout)
    )]
    pub timeout: Span,
}

fn config_error(setting: &str, text: impl std::fmt::Display) -> ServerError {
    ServerError::Config(format!("{setting}: {text}"))
}

fn mailbox(setting: &str, text: &str) -> Result<Mailbox, ServerError> {
    text.trim().parse().map_err(|e| {
        config_error(
            setting,
            format!("'{}' is not an e-mail address ({e})", text.trim()),
        )
    })
}

impl AlertChannelArgs {
    pub fn channels(&self) -> Result<Channels, ServerError> {
        let timeout = self.timeout.0;
        if timeout.is_zero() {
            return Err(config_error("CLAIMCHECK_ALERT_TIMEOUT", "0 is not allowed"));
        }
        let nonempty = |s: &Option<String>| {
            s.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let to: Vec<&String> = self
            .email_to
            .iter()
            .filter(|s| !s.trim().is_empty())
            .collect();
        let email = match (nonempty(&self.smtp_url), nonempty(&self.email_from)) {
            (Some(url), from) => {
                let url: SmtpUrl = url
                    .parse()
                    .map_err(|e| config_error("CLAIMCHECK_SMTP_URL", e))?;
                let from = from.ok_or_else(|| {
                    config_error(
                        "CLAIMCHECK_ALERT_EMAIL_FROM",
                        "alert e-mail needs a sender address",
                    )
                })?;
                if to.is_empty() {
                    return Err(config_error(
                        "CLAIMCHECK_ALERT_EMAIL_TO",
                        "alert e-mail needs at least one address to go to",
                    ));
                }
                let from = mailbox("CLAIMCHECK_ALERT_EMAIL_FROM", &from)?;
                let to = to
                    .iter()
                    .map(|t| mailbox("CLAIMCHECK_ALERT_EMAIL_TO", t))
                    .collect::<Result<Vec<_>, _>>()?;
                Some(
                    EmailChannel::new(url, from, to, timeout)
                        .map_err(|e| config_error("CLAIMCHECK_SMTP_URL", e))?,
                )
            }
            (None, from) if from.is_some() || !to.is_empty() => {
                return Err(config_error(
                    "CLAIMCHECK_SMTP_URL",
                    "alert e-mail addresses are set but no SMTP server to send through",
                ));
            }
            (None, _) => None,
        };
        let webhook = match nonempty(&self.webhook_url) {
            Some(url) => {
                let url: WebhookUrl = url
                    .parse()
                    .map_err(|e| config_error("CLAIMCHECK_ALERT_WEBHOOK_URL", e))?;
                Some(ChatChannel::new(url, timeout))
            }
            None => None,
        };
        Ok(Channels {
            email,
            webhook,
            timeout,
        })
    }
}

/// When conditions hold, and how often they are checked and repeated.
#[derive(Debug, Clone, Args)]
pub struct AlertArgs {
    /// How often every condition is checked (`30s`; `0` turns alerting off on this instance).
    #[arg(
        long = "alert-check-interval",
        env = "CLAIMCHECK_ALERT_CHECK_INTERVAL",
        value_name = "CLAIMCHECK_ALERT_CHECK_INTERVAL",
        default_value_t = Span(AlertsConfig::default().check_interval)
    )]
    pub check_interval: Span,
    /// A reminder while an alert stays open, at most this often (`0`: never).
    #[arg(
        long = "alert-repeat",
        env = "CLAIMCHECK_ALERT_REPEAT",
        value_name = "CLAIMCHECK_ALERT_REPEAT",
        default_value_t = Span::or_zero(AlertsConfig::default().repeat)
    )]
    pub repeat: Span,
    /// Alert when at least this many claims are failed (`0`: never).
    #[arg(
        long = "alert-failed-claims",
        env = "CLAIMCHECK_ALERT_FAILED_CLAIMS",
        value_name = "CLAIMCHECK_ALERT_FAILED_CLAIMS",
        default_value_t = AlertThresholds::default().failed_claims
    )]
    pub failed_claims: u64,
    /// Alert when a claim has been stale longer than this (`0`: never).
    #[arg(
        long = "alert-stale-after",
        env = "CLAIMCHECK_ALERT_STALE_AFTER",
        value_name = "CLAIMCHECK_ALERT_STALE_AFTER",
        default_value_t = Span::or_zero(AlertThresholds::default().stale_after)
    )]
    pub stale_after: Span,
    /// Alert when orders were opened through the order API and no delivery was accepted for
    /// this long (`0`: never).
    #[arg(
        long = "alert-quiet-after",
        env = "CLAIMCHECK_ALERT_QUIET_AFTER",
        value_name = "CLAIMCHECK_ALERT_QUIET_AFTER",
        default_value_t = Span::or_zero(AlertThresholds::default().quiet_after)
    )]
    pub quiet_after: Span,
    /// Alert when deliveries fail the signature check and none passes for this long (`0`:
    /// never).
    #[arg(
        long = "alert-signature-window",
        env = "CLAIMCHECK_ALERT_SIGNATURE_WINDOW",
        value_name = "CLAIMCHECK_ALERT_SIGNATURE_WINDOW",
        default_value_t = Span::or_zero(AlertThresholds::default().signature_window)
    )]
    pub signature_window: Span,
    /// Alert when an outgoing Stripe request stays indeterminate longer than this (`0`:
    /// never).
    #[arg(
        long = "alert-indeterminate-after",
        env = "CLAIMCHECK_ALERT_INDETERMINATE_AFTER",
        value_name = "CLAIMCHECK_ALERT_INDETERMINATE_AFTER",
        default_value_t = Span::or_zero(AlertThresholds::default().indeterminate_after)
    )]
    pub indeterminate_after: Span,
    /// Alert when a reconcile run within this long recovered events or failed (`0`: never).
    #[arg(
        long = "alert-reconcile-window",
        env = "CLAIMCHECK_ALERT_RECONCILE_WINDOW",
        value_name = "CLAIMCHECK_ALERT_RECONCILE_WINDOW",
        default_value_t = Span::or_zero(AlertThresholds::default().reconcile_window)
    )]
    pub reconcile_window: Span,
    /// Alert while the database refuses writes for lack of space (a full disk), and for this
    /// long after the last refusal (`0`: never).
    #[arg(
        long = "alert-storage-full-window",
        env = "CLAIMCHECK_ALERT_STORAGE_FULL_WINDOW",
        value_name = "CLAIMCHECK_ALERT_STORAGE_FULL_WINDOW",
        default_value_t = Span::or_zero(AlertThresholds::default().storage_full_window)
    )]
    pub storage_full_window: Span,
    /// Alert when at least this many holds ran past their expiry, uncaptured and unreleased,
    /// within `CLAIMCHECK_ALERT_EXPIRED_HOLDS_WINDOW` (`0`: never).
    #[arg(
        long = "alert-expired-holds",
        env = "CLAIMCHECK_ALERT_EXPIRED_HOLDS",
        value_name = "CLAIMCHECK_ALERT_EXPIRED_HOLDS",
        default_value_t = AlertThresholds::default().expired_holds
    )]
    pub expired_holds: u64,
    /// The window in which expired holds are counted.
    #[arg(
        long = "alert-expired-holds-window",
        env = "CLAIMCHECK_ALERT_EXPIRED_HOLDS_WINDOW",
        value_name = "CLAIMCHECK_ALERT_EXPIRED_HOLDS_WINDOW",
        default_value_t = Span(AlertThresholds::default().expired_holds_window)
    )]
    pub expired_holds_window: Span,
    /// Alert when a customer owes at least this many credits after a refund or a dispute
    /// (`0`: never).
    #[arg(
        long = "alert-credits-owed",
        env = "CLAIMCHECK_ALERT_CREDITS_OWED",
        value_name = "CLAIMCHECK_ALERT_CREDITS_OWED",
        default_value_t = AlertThresholds::default().credits_owed
    )]
    pub credits_owed: u64,
    /// Alert when a claim of a type this version does not fulfil (a newer version's, during a
    /// rolling deploy or after a rollback) has waited longer than this (`0`: never).
    #[arg(
        long = "alert-newer-version-after",
        env = "CLAIMCHECK_ALERT_NEWER_VERSION_AFTER",
        value_name = "CLAIMCHECK_ALERT_NEWER_VERSION_AFTER",
        default_value_t = Span::or_zero(AlertThresholds::default().newer_version_after)
    )]
    pub newer_version_after: Span,
    /// Alert when a subscription's failed renewal has stayed unpaid longer than this (`0`:
    /// never).
    #[arg(
        long = "alert-past-due-after",
        env = "CLAIMCHECK_ALERT_PAST_DUE_AFTER",
        value_name = "CLAIMCHECK_ALERT_PAST_DUE_AFTER",
        default_value_t = Span::or_zero(AlertThresholds::default().past_due_after)
    )]
    pub past_due_after: Span,
    #[command(flatten)]
    pub channels: AlertChannelArgs,
}

impl AlertArgs {
    pub fn into_config(self) -> Result<AlertsConfig, ServerError> {
        Ok(AlertsConfig {
            check_interval: self.check_interval.0,
            thresholds: AlertThresholds {
                failed_claims: self.failed_claims,
                stale_after: self.stale_after.off_when_zero(),
                quiet_after: self.quiet_after.off_when_zero(),
                signature_window: self.signature_window.off_when_zero(),
                indeterminate_after: self.indeterminate_after.off_when_zero(),
                reconcile_window: self.reconcile_window.off_when_zero(),
                storage_full_window: self.storage_full_window.off_when_zero(),
                expired_holds: self.expired_holds,
                expired_holds_window: self.expired_holds_window.0,
                credits_owed: self.credits_owed,
                newer_version_after: self.newer_version_after.off_when_zero(),
                past_due_after: self.past_due_after.off_when_zero(),
            },
            repeat: self.repeat.off_when_zero(),
            channels: self.channels.channels()?,
            retry: RetryPolicy::default(),
        })
    }
}
