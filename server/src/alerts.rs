//! Alerts, server side: the channels messages go out on (e-mail, a chat webhook), the
//! sender that empties the outbox with retries, and the two tasks `serve` runs for them. The
//! conditions and the alert state are the engine's (`claimcheck_core::alert_check`).
//!
//! Both tasks are their own: a check or a send never runs on a request or a worker, and each
//! send has a timeout, so an SMTP server that never answers delays nothing but its message.

pub mod chat;
pub mod email;

use std::sync::Arc;
use std::time::Duration;

use claimcheck_core::Store;
use claimcheck_core::alert::AlertChannel;
use claimcheck_core::alert_check::{AlertPolicy, Message};
use claimcheck_core::backoff::Backoff;
use tokio::task::JoinSet;

pub use chat::{ChatChannel, WebhookUrl};
pub use email::{EmailChannel, SmtpUrl};

/// The channels this instance is configured with.
#[derive(Debug, Clone, Default)]
pub struct Channels {
    pub email: Option<EmailChannel>,
    pub webhook: Option<ChatChannel>,
    /// One send's budget, end to end.
    pub timeout: Duration,
}

impl Channels {
    pub fn configured(&self) -> Vec<AlertChannel> {
        let mut channels = Vec::new();
        if self.email.is_some() {
            channels.push(AlertChannel::Email);
        }
        if self.webhook.is_some() {
            channels.push(AlertChannel::Webhook);
        }
        channels
    }

    /// Where a channel's messages go, in words.
    pub fn describe(&self, channel: AlertChannel) -> String {
        match channel {
            AlertChannel::Email => self.email.as_ref().map(EmailChannel::describe),
            AlertChannel::Webhook => self.webhook.as_ref().map(ChatChannel::describe),
        }
        .unwrap_or_else(|| "not configured".to_owned())
    }

    /// Sends `message` on `channel`, giving up after the timeout.
    pub async fn send(&self, channel: AlertChannel, message: &Message) -> Result<(), String> {
        let sent = async {
            match channel {
                AlertChannel::Email => match &self.email {
                    Some(email) => email.send(message).await,
                    None => Err("e-mail is not configured here (CLAIMCHECK_SMTP_URL)".into()),
                },
                AlertChannel::Webhook => match &self.webhook {
                    Some(chat) => chat.send(message).await,
                    None => Err(
                        "the chat webhook is not configured here (CLAIMCHECK_ALERT_WEBHOOK_URL)"
                            .into(),
                    ),
                },
            }
        };
        // The channels time out step by step; this bounds the whole send.
        let budget = self.timeout.saturating_mul(3);
        tokio::time::timeout(budget, sent)
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "{}: no answer within {budget:?}",
                    self.describe(channel)
                ))
            })
    }
}

/// How messages that failed are tried again.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts before a message is given up (and shown as failed).
    pub max_attempts: i64,
    /// Wait before the second attempt, doubled for each further one, at most `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            base_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(30 * 60),
        }
    }
}

impl RetryPolicy {
    /// When to try again after `attempts` attempts; `None` once they are used up.
    fn next(&self, attempts: i64, now: i64) -> Option<i64> {
        if attempts >= self.max_attempts {
            return None;
        }
        let backoff = Backoff::new(self.base_backoff, self.max_backoff);
        Some(now + backoff.after_attempts_ms(attempts))
    }
}

/// What became of one attempt to send a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendResult {
    Sent,
    /// Failed; tried again after its backoff.
    Failed,
    /// Failed on its last attempt: shown as failed, not tried again.
    GaveUp,
}

impl SendResult {
    pub const ALL: [SendResult; 3] = [SendResult::Sent, SendResult::Failed, SendResult::GaveUp];

    pub fn as_str(self) -> &'static str {
        match self {
            SendResult::Sent => "sent",
            SendResult::Failed => "failed",
            SendResult::GaveUp => "gave_up",
        }
    }
}

/// What one round of sending did: each attempt's channel and result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendReport {
    pub attempts: Vec<(AlertChannel, SendResult)>,
}

impl SendReport {
    pub fn sent(&self) -> usize {
        self.count(|result| result == SendResult::Sent)
    }

    /// Failed attempts, the last ones included.
    pub fn failed(&self) -> usize {
        self.count(|result| result != SendResult::Sent)
    }

    fn count(&self, which: impl Fn(SendResult) -> bool) -> usize {
        self.attempts.iter().filter(|(_, r)| which(*r)).count()
    }
}

/// Sends every message due at `now` on the channels configured here, all at once, each under
/// a lease (so two instances never send one message twice) and its own timeout. A storage
/// error comes back with what the round had tried by then.
pub async fn deliver_due(
    store: &Store,
    channels: &Arc<Channels>,
    retry: &RetryPolicy,
    now: i64,
) -> Result<SendReport, (SendReport, claimcheck_core::StoreError)> {
    let none = |error| (SendReport::default(), error);
    let due = store
        .alerts()
        .due(&channels.configured(), now, 50)
        .await
        .map_err(none)?;
    let lease_ms = i64::try_from(channels.timeout.saturating_mul(4).as_millis())
        .unwrap_or(i64::MAX / 4)
        .max(1000);
    let mut sending = JoinSet::new();
    for delivery in due {
        if !store
            .alerts()
            .take(delivery.id, now, lease_ms)
            .await
            .map_err(none)?
        {
            continue;
        }
        let channels = Arc::clone(channels);
        sending.spawn(async move {
            let outcome = channels.send(delivery.channel, &delivery.message).await;
            (delivery, outcome)
        });
    }
    let mut report = SendReport::default();
    // Every attempt is counted, even when writing its outcome back fails: the rest of the
    // round is still recorded, and the unrecorded one is tried again once its lease ends.
    let mut unrecorded = None;
    while let Some(joined) = sending.join_next().await {
        let Ok((delivery, outcome)) = joined else {
            continue;
        };
        let recorded = match outcome {
            Ok(()) => {
                report.attempts.push((delivery.channel, SendResult::Sent));
                store.alerts().sent(delivery.id, now).await
            }
            Err(error) => {
                let attempts = delivery.attempts + 1;
                let retry_at = retry.next(attempts, now);
                let result = match retry_at {
                    Some(_) => SendResult::Failed,
                    None => SendResult::GaveUp,
                };
                report.attempts.push((delivery.channel, result));
                tracing::warn!(
                    channel = %delivery.channel,
                    attempts,
                    gave_up = retry_at.is_none(),
                    %error,
                    "alert message not sent"
                );
                store
                    .alerts()
                    .attempt_failed(delivery.id, &error, retry_at)
                    .await
            }
        };
        if let Err(error) = recorded {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                channel = %delivery.channel,
                "the outcome of an alert message could not be written"
            );
            unrecorded = Some(error);
        }
    }
    match unrecorded {
        None => Ok(report),
        Some(error) => Err((report, error)),
    }
}

/// Everything the alert tasks need.
#[derive(Debug, Clone)]
pub struct AlertRuntime {
    pub policy: AlertPolicy,
    pub channels: Arc<Channels>,
    pub retry: RetryPolicy,
    pub check_interval: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_and_stop() {
        let retry = RetryPolicy {
            max_attempts: 4,
            base_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(60),
        };
        assert_eq!(retry.next(1, 0), Some(30_000));
        assert_eq!(retry.next(2, 0), Some(60_000));
        assert_eq!(retry.next(3, 0), Some(60_000));
        assert_eq!(retry.next(4, 0), None);
    }
}
