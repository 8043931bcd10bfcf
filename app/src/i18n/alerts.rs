//! The words of alerts for e-mail and chat: the engine's [`AlertWording`] in one language
//! and time zone (`CLAIMCHECK_LANGUAGE`, Europe/Zurich: a message has no one reader), and
//! the same summaries on the dashboard in each reader's own.

use claimcheck_core::alert::{AlertDetail, MessageKind};
use claimcheck_core::alert_check::{AlertFacts, AlertWording, Message};
use claimcheck_core::language::Language;

use super::{DEFAULT_ZONE, Locale, Reader, names, td_string};

/// Alert words for one reader.
#[derive(Debug, Clone, Copy)]
pub struct AlertWords(pub Reader);

impl AlertWords {
    /// For messages, which have no one reader: in `language`, times in Europe/Zurich.
    pub fn messages_in(language: Language) -> AlertWords {
        AlertWords(Reader {
            language,
            time_zone: DEFAULT_ZONE,
        })
    }

    fn locale(&self) -> Locale {
        self.0.locale()
    }

    /// A threshold: `10 min`, `6 h`, `1 d`, `90 s` (`10 Min.`, `6 Std.` ...).
    fn span(&self, secs: u64) -> String {
        let locale = self.locale();
        match secs {
            s if s >= 86_400 && s.is_multiple_of(86_400) => {
                td_string!(locale, notify.span_days, n = s / 86_400)
            }
            s if s >= 3600 && s.is_multiple_of(3600) => {
                td_string!(locale, notify.span_hours, n = s / 3600)
            }
            s if s >= 60 && s.is_multiple_of(60) => {
                td_string!(locale, notify.span_minutes, n = s / 60)
            }
            s => td_string!(locale, notify.span_seconds, n = s),
        }
        .to_string()
    }
}

impl AlertWording for AlertWords {
    fn summary(&self, detail: &AlertDetail) -> String {
        let locale = self.locale();
        let time = |ms| self.0.time(ms);
        match detail {
            AlertDetail::FailedClaims { count: 1 } => {
                td_string!(locale, notify.failed_one).to_string()
            }
            AlertDetail::FailedClaims { count } => {
                td_string!(locale, notify.failed_many, n = count)
            }
            AlertDetail::StaleClaims { count, after_secs } => {
                let after = self.span(*after_secs);
                match count {
                    1 => td_string!(locale, notify.stale_one, after),
                    n => td_string!(locale, notify.stale_many, n, after),
                }
            }
            AlertDetail::DeliveriesStopped {
                orders,
                after_secs,
                last_delivery_at,
            } => {
                let after = self.span(*after_secs);
                let last = match last_delivery_at {
                    Some(at) => td_string!(locale, notify.quiet_last, at = time(*at)),
                    None => td_string!(locale, notify.quiet_none).to_string(),
                };
                match orders {
                    1 => td_string!(locale, notify.quiet_one, after, last),
                    n => td_string!(locale, notify.quiet_many, n, after, last),
                }
            }
            AlertDetail::SignatureFailures { count, window_secs } => {
                let window = self.span(*window_secs);
                match count {
                    1 => td_string!(locale, notify.signature_one, window),
                    n => td_string!(locale, notify.signature_many, n, window),
                }
            }
            AlertDetail::IndeterminateRequests { count, after_secs } => {
                let after = self.span(*after_secs);
                match count {
                    1 => td_string!(locale, notify.indeterminate_one, after),
                    n => td_string!(locale, notify.indeterminate_many, n, after),
                }
            }
            AlertDetail::ReconcileFailed { at, actor, error } => {
                td_string!(
                    locale,
                    notify.reconcile_failed,
                    at = time(*at),
                    actor,
                    error
                )
            }
            AlertDetail::StorageFull {
                since,
                last_at,
                ongoing,
            } => {
                let (since, last) = (time(*since), time(*last_at));
                if *ongoing {
                    td_string!(locale, notify.storage_full_ongoing, since)
                } else {
                    td_string!(locale, notify.storage_full_over, since, last)
                }
            }
            AlertDetail::ExpiredHolds {
                count, window_secs, ..
            } => {
                let window = self.span(*window_secs);
                match count {
                    1 => td_string!(locale, notify.expired_holds_one, window),
                    n => td_string!(locale, notify.expired_holds_many, n, window),
                }
            }
            AlertDetail::CreditsOwed {
                customers,
                credits,
                customer,
            } => match (customers, customer) {
                (1, Some(customer)) => {
                    td_string!(locale, notify.credits_owed_one, customer, credits)
                }
                (n, _) => td_string!(locale, notify.credits_owed_many, n, credits),
            },
            AlertDetail::NewerVersionWaiting {
                count,
                after_secs,
                event_type,
                ..
            } => {
                let after = self.span(*after_secs);
                let event_type = event_type.clone().unwrap_or_default();
                match count {
                    1 => td_string!(locale, notify.newer_version_one, event_type, after),
                    n => td_string!(locale, notify.newer_version_many, n, event_type, after),
                }
            }
            AlertDetail::PastDueSubscriptions {
                count,
                after_secs,
                subscription,
                customer,
            } => {
                let after = self.span(*after_secs);
                match (count, subscription) {
                    (1, Some(subscription)) => {
                        let customer = customer.clone().unwrap_or_else(|| "—".into());
                        td_string!(locale, notify.past_due_one, subscription, customer, after)
                    }
                    (n, _) => td_string!(locale, notify.past_due_many, n, after),
                }
            }
            AlertDetail::ReconcileRecovered {
                at, actor, claimed, ..
            } => match claimed {
                1 => td_string!(
                    locale,
                    notify.reconcile_recovered_one,
                    at = time(*at),
                    actor
                ),
                n => td_string!(
                    locale,
                    notify.reconcile_recovered_many,
                    at = time(*at),
                    actor,
                    n
                ),
            },
        }
    }

    fn message(&self, kind: MessageKind, facts: &AlertFacts, dashboard_url: &str) -> Message {
        let locale = self.locale();
        let title = names::condition(locale, facts.condition);
        let n = facts.count;
        let time = |ms| self.0.time(ms);
        let mut text = Vec::new();
        let subject = match kind {
            MessageKind::Resolved => {
                text.push(td_string!(locale, notify.resolved, title = &title));
                let at = time(facts.resolved_at.unwrap_or(facts.opened_at));
                let opened = time(facts.opened_at);
                match &facts.resolved_by {
                    // Closed by a person while it may still hold: say who, why, and what
                    // happens if it does.
                    Some(who) => {
                        let note = facts.note.as_deref().unwrap_or_default();
                        text.push(td_string!(
                            locale,
                            notify.resolved_by_hand,
                            who,
                            at,
                            opened,
                            note
                        ));
                        text.push(td_string!(locale, notify.reopens).to_string());
                    }
                    None => text.push(td_string!(
                        locale,
                        notify.cleared,
                        at,
                        opened,
                        summary = &facts.summary
                    )),
                }
                td_string!(locale, notify.subject_resolved, title = &title)
            }
            MessageKind::Reminder => {
                text.push(td_string!(locale, notify.reminder, title = &title, n));
                text.push(facts.summary.clone());
                td_string!(locale, notify.subject_reminder, title = &title, n)
            }
            MessageKind::Opened | MessageKind::Test => {
                text.push(td_string!(locale, notify.opened, title = &title, n));
                text.push(facts.summary.clone());
                td_string!(locale, notify.subject_opened, title = &title, n)
            }
        };
        if kind != MessageKind::Resolved {
            if let Some(since) = facts.since {
                text.push(td_string!(locale, notify.since, at = time(since)));
            }
            if !facts.samples.is_empty() {
                let more = if n > facts.samples.len() as i64 {
                    ", ..."
                } else {
                    ""
                };
                let ids = format!("{}{more}", facts.samples.join(", "));
                text.push(td_string!(locale, notify.among, ids));
            }
        }
        let link = format!(
            "{dashboard_url}{}",
            crate::links::alert(facts.condition, facts.detail.as_ref())
        );
        text.push(td_string!(locale, notify.dashboard, link));
        text.push(td_string!(
            locale,
            notify.all_alerts,
            link = format!("{dashboard_url}/alerts")
        ));
        Message {
            subject,
            text: text.join("\n"),
        }
    }

    fn test_message(&self, dashboard_url: &str, from_host: &str) -> Message {
        let locale = self.locale();
        let link = format!("{dashboard_url}/alerts");
        Message {
            subject: td_string!(locale, notify.subject_test).to_string(),
            text: format!(
                "{}\n{}",
                td_string!(locale, notify.test_text, host = from_host),
                td_string!(locale, notify.all_alerts, link)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use claimcheck_core::alert::AlertCondition;

    use super::*;

    fn words(language: Language) -> AlertWords {
        AlertWords::messages_in(language)
    }

    fn facts(summary: String) -> AlertFacts {
        AlertFacts {
            condition: AlertCondition::FailedClaims,
            count: 3,
            // 2027-01-15 08:00 UTC: 09:00 in Zurich.
            since: Some(1_800_000_000_000),
            summary,
            samples: vec!["evt_a".into(), "evt_b".into()],
            opened_at: 1_800_000_060_000,
            resolved_at: None,
            resolved_by: None,
            note: None,
            detail: None,
        }
    }

    #[test]
    fn an_opened_alert_says_what_how_many_since_when_and_where() {
        let en = words(Language::English);
        let summary = en.summary(&AlertDetail::FailedClaims { count: 3 });
        assert!(summary.starts_with("3 claims failed"), "{summary}");
        let m = en.message(MessageKind::Opened, &facts(summary), "https://pay.shop.ch");
        assert_eq!(m.subject, "[Claimcheck] Claims failed (3)");
        assert!(
            m.text.contains("3 claims failed after their last attempt"),
            "{}",
            m.text
        );
        assert!(
            m.text.contains("Since: 15 Jan 2027, 09:00:00 CET"),
            "{}",
            m.text
        );
        assert!(
            m.text.contains("Among them: evt_a, evt_b, ..."),
            "{}",
            m.text
        );
        assert!(
            m.text
                .contains("Dashboard: https://pay.shop.ch/claims?status=failed"),
            "{}",
            m.text
        );
        assert!(
            m.text.ends_with("All alerts: https://pay.shop.ch/alerts"),
            "{}",
            m.text
        );
    }

    #[test]
    fn reminders_and_resolutions_say_so() {
        let en = words(Language::English);
        let m = en.message(MessageKind::Reminder, &facts("x".into()), "http://x");
        assert_eq!(m.subject, "[Claimcheck] Still open: Claims failed (3)");
        let resolved = AlertFacts {
            resolved_at: Some(1_800_000_600_000),
            ..facts("x".into())
        };
        let m = en.message(MessageKind::Resolved, &resolved, "http://x");
        assert_eq!(m.subject, "[Claimcheck] Resolved: Claims failed");
        assert!(
            m.text.contains("cleared at 15 Jan 2027, 09:10:00 CET"),
            "{}",
            m.text
        );
        assert!(!m.text.contains("Among them"), "{}", m.text);
        let by_hand = AlertFacts {
            resolved_by: Some("ada".into()),
            note: Some("Customer refunded by bank transfer.".into()),
            ..resolved
        };
        let m = en.message(MessageKind::Resolved, &by_hand, "http://x");
        assert_eq!(m.subject, "[Claimcheck] Resolved: Claims failed");
        assert!(
            m.text.contains(
                "ada resolved it by hand at 15 Jan 2027, 09:10:00 CET (open since 15 Jan 2027, \
                 09:01:00 CET): Customer refunded by bank transfer."
            ),
            "{}",
            m.text
        );
        assert!(m.text.contains("a new alert opens"), "{}", m.text);
        let de = words(Language::SwissGerman).message(MessageKind::Resolved, &by_hand, "http://x");
        assert!(
            de.text
                .contains("ada hat ihn am 15.01.2027 09:10:00 CET von Hand behoben"),
            "{}",
            de.text
        );
    }

    #[test]
    fn swiss_german_messages_and_thresholds() {
        let de = words(Language::SwissGerman);
        let summary = de.summary(&AlertDetail::StaleClaims {
            count: 2,
            after_secs: 600,
        });
        assert!(
            summary.starts_with("2 Claims sind seit mehr als 10 Min. verwaist"),
            "{summary}"
        );
        let m = de.message(MessageKind::Opened, &facts(summary), "https://pay.shop.ch");
        assert!(
            m.text.contains("Seit: 15.01.2027 09:00:00 CET"),
            "{}",
            m.text
        );
        assert!(m.text.contains("Darunter: evt_a, evt_b, ..."), "{}", m.text);
        assert_eq!(de.span(6 * 3600), "6 Std.");
        assert_eq!(de.span(86_400), "1 Tg.");
        let test = de.test_message("https://pay.shop.ch", "host-1");
        assert_eq!(test.subject, "[Claimcheck] Testnachricht");
        assert!(test.text.contains("host-1"), "{}", test.text);
    }

    #[test]
    fn every_detail_has_words_in_both_languages() {
        let details = [
            AlertDetail::FailedClaims { count: 1 },
            AlertDetail::StaleClaims {
                count: 1,
                after_secs: 90,
            },
            AlertDetail::DeliveriesStopped {
                orders: 2,
                after_secs: 6 * 3600,
                last_delivery_at: None,
            },
            AlertDetail::DeliveriesStopped {
                orders: 1,
                after_secs: 3600,
                last_delivery_at: Some(1_800_000_000_000),
            },
            AlertDetail::SignatureFailures {
                count: 9,
                window_secs: 900,
            },
            AlertDetail::IndeterminateRequests {
                count: 1,
                after_secs: 300,
            },
            AlertDetail::ReconcileFailed {
                at: 1_800_000_000_000,
                actor: "reconciler".into(),
                error: "refused".into(),
            },
            AlertDetail::ReconcileRecovered {
                at: 1_800_000_000_000,
                actor: "cli:ops".into(),
                claimed: 4,
                run: Some(12),
            },
        ];
        for language in Language::ALL {
            for detail in &details {
                let text = words(language).summary(detail);
                assert!(!text.contains("{{"), "{text}");
                assert!(text.len() > 30, "{language:?} {detail:?}: {text}");
            }
        }
        let en = words(Language::English);
        assert!(
            en.summary(&details[3])
                .contains("the last one accepted at 15 Jan 2027, 09:00:00 CET")
        );
        assert!(en.summary(&details[7]).contains("claimed 4 events"));
    }
}
