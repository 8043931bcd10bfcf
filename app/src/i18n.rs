//! The dashboard's words and its reader's conventions: the translations compiled from
//! `locales/<language>/<area>.json` (see `build.rs`), and, on the server, who reads a page:
//! the language chosen for the request and the time zone, with money, times and ages
//! written their way.

#[allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::print_stdout,
    missing_docs,
    unreachable_pub
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/i18n/mod.rs"));
}

pub use generated::i18n::*;
pub use leptos_i18n::I18nContext;

use claimcheck_core::language::Language;

impl From<Language> for Locale {
    fn from(language: Language) -> Locale {
        match language {
            Language::English => Locale::en,
            Language::SwissGerman => Locale::de_CH,
        }
    }
}

impl From<Locale> for Language {
    fn from(locale: Locale) -> Language {
        match locale {
            Locale::en => Language::English,
            Locale::de_CH => Language::SwissGerman,
        }
    }
}

/// A whole number in the reader's digits: `4’920` in Swiss German, `4,920` in English.
pub fn number(locale: Locale, n: i64) -> String {
    Language::from(locale).number(n)
}

/// The time zone times are shown in when the operator has not chosen one.
pub const DEFAULT_TIME_ZONE: &str = "Europe/Zurich";

/// The language for readers nobody chose one for and whose browser asks for neither of
/// ours (`CLAIMCHECK_LANGUAGE`), handed to the pages by the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultLanguage(pub Language);

#[cfg(feature = "ssr")]
pub use alerts::AlertWords;
#[cfg(feature = "ssr")]
pub use reader::{DEFAULT_ZONE, Reader, reader, time_zones};

#[cfg(feature = "ssr")]
mod alerts;

#[cfg(feature = "ssr")]
mod reader {
    use claimcheck_core::auth::SignedIn;
    use claimcheck_core::language::{self, Language};
    use claimcheck_core::now_ms;
    use leptos::prelude::*;

    use super::{DefaultLanguage, Locale, td_string};

    /// The time zones an operator may pick: the IANA database's places (`Europe/Zurich`),
    /// without its aliases for offsets (`Etc/GMT+1`) and legacy names (`CET`, `US/Pacific`).
    pub fn time_zones() -> impl Iterator<Item = &'static str> {
        const PLACES: [&str; 10] = [
            "Africa/",
            "America/",
            "Antarctica/",
            "Arctic/",
            "Asia/",
            "Atlantic/",
            "Australia/",
            "Europe/",
            "Indian/",
            "Pacific/",
        ];
        chrono_tz::TZ_VARIANTS
            .iter()
            .map(|zone| zone.name())
            .filter(|name| PLACES.iter().any(|place| name.starts_with(place)))
    }

    /// [`super::DEFAULT_TIME_ZONE`], for the server's clocks.
    pub const DEFAULT_ZONE: chrono_tz::Tz = chrono_tz::Europe::Zurich;

    /// Who reads the page being rendered (or calls the server function): the language and
    /// time zone everything on it is written in.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Reader {
        pub language: Language,
        pub time_zone: chrono_tz::Tz,
    }

    /// The reader of the current request (page or server function): see [`Reader::of`].
    /// Outside a request: the defaults.
    pub fn reader() -> Reader {
        let parts = use_context::<http::request::Parts>();
        let default = use_context::<DefaultLanguage>().unwrap_or_default().0;
        match parts {
            Some(parts) => Reader::of(&parts.headers, parts.extensions.get::<SignedIn>(), default),
            None => Reader::of(&http::HeaderMap::new(), None, default),
        }
    }

    impl Reader {
        /// Who reads the answer to a request with `headers`, signed in as `operator`: their
        /// language (else the one picked in this browser, else its `Accept-Language`, else
        /// `default`; see [`Language::choose`]) and their time zone (else Europe/Zurich).
        pub fn of(
            headers: &http::HeaderMap,
            operator: Option<&SignedIn>,
            default: Language,
        ) -> Reader {
            let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
            let cookie = headers
                .get_all(http::header::COOKIE)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|cookies| cookies.split(';'))
                .find_map(|pair| {
                    let (name, value) = pair.split_once('=')?;
                    (name.trim() == language::COOKIE).then(|| value.trim())
                });
            let language = Language::choose(
                operator.and_then(|o| o.language),
                cookie,
                header(http::header::ACCEPT_LANGUAGE),
                default,
            );
            let time_zone = operator
                .and_then(|o| o.time_zone.as_deref())
                .and_then(|zone| zone.parse().ok())
                .unwrap_or(DEFAULT_ZONE);
            Reader {
                language,
                time_zone,
            }
        }

        pub fn locale(self) -> Locale {
            self.language.into()
        }

        /// A date filter (`YYYY-MM-DD`, a day of the reader's) as a bound in unix ms: its
        /// first instant, or with `end` the first instant of the next day; empty is no bound.
        pub fn day_bound(self, text: &str, end: bool) -> Result<Option<i64>, chrono::ParseError> {
            if text.trim().is_empty() {
                return Ok(None);
            }
            let date = chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")?;
            let date = if end {
                date.succ_opt().unwrap_or(date)
            } else {
                date
            };
            Ok(Some(self.day_start(date)))
        }

        /// The first instant (unix ms) of `date` in the reader's zone: midnight in Zurich
        /// for a Zurich reader, not UTC's. A midnight the clocks skip starts at the first
        /// instant that exists.
        pub fn day_start(self, date: chrono::NaiveDate) -> i64 {
            use chrono::TimeZone;
            let mut local = date.and_time(chrono::NaiveTime::MIN);
            // No zone skips more than a few hours; step until the hour exists.
            for _ in 0..24 {
                if let Some(start) = self.time_zone.from_local_datetime(&local).earliest() {
                    return start.timestamp_millis();
                }
                local += chrono::Duration::minutes(30);
            }
            local.and_utc().timestamp_millis()
        }

        /// A moment in the reader's zone and words: `02.12.2026 14:03:07 CET` in Swiss
        /// German, `2 Dec 2026, 14:03:07 CET` in English.
        pub fn time(self, ms: i64) -> String {
            self.moment(ms, "%d.%m.%Y %H:%M:%S %Z", "%-d %b %Y, %H:%M:%S %Z")
        }

        /// A moment to the millisecond, for "as of" lines.
        pub fn time_precise(self, ms: i64) -> String {
            self.moment(ms, "%d.%m.%Y %H:%M:%S%.3f %Z", "%-d %b %Y, %H:%M:%S%.3f %Z")
        }

        fn moment(self, ms: i64, swiss_german: &str, english: &str) -> String {
            let format = match self.language {
                Language::SwissGerman => swiss_german,
                Language::English => english,
            };
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|utc| {
                    utc.with_timezone(&self.time_zone)
                        .format(format)
                        .to_string()
                })
                .unwrap_or_default()
        }

        /// A UTC day the reader's way: `03.12.` in Swiss German, `3 Dec` in English.
        pub fn utc_day(self, ms: i64) -> String {
            let format = match self.language {
                Language::SwissGerman => "%d.%m.",
                Language::English => "%-d %b",
            };
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|utc| utc.format(format).to_string())
                .unwrap_or_default()
        }

        /// The hour `ms` falls in, in the reader's zone: `14:00`.
        pub fn hour(self, ms: i64) -> String {
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|t| t.with_timezone(&self.time_zone).format("%H:00").to_string())
                .unwrap_or_default()
        }

        /// How long ago `ms` was: `3 min ago`, `vor 3 Min.`.
        pub fn age(self, ms: i64) -> String {
            let locale = self.locale();
            let secs = ((now_ms() - ms) / 1000).max(0);
            match secs {
                0..60 => td_string!(locale, common.ago_seconds, n = secs),
                60..3600 => td_string!(locale, common.ago_minutes, n = secs / 60),
                3600..86_400 => td_string!(locale, common.ago_hours, n = secs / 3600),
                _ => td_string!(locale, common.ago_days, n = secs / 86_400),
            }
        }

        /// An amount in minor units, its currency and the reader's digits: `CHF 1’234.50`.
        pub fn money(self, minor: i64, currency: &str) -> String {
            claimcheck_core::money::format_money_in(minor, currency, self.language)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn reading_in(zone: chrono_tz::Tz) -> Reader {
            Reader {
                language: Language::English,
                time_zone: zone,
            }
        }

        #[test]
        fn a_day_starts_at_the_readers_midnight() {
            let date = chrono::NaiveDate::from_ymd_opt(2026, 12, 3).unwrap();
            // Zurich is UTC+1 in winter: its midnight is 23:00 UTC the day before.
            let zurich = reading_in(chrono_tz::Europe::Zurich).day_start(date);
            assert_eq!(zurich, 1_796_252_400_000);
            let utc = reading_in(chrono_tz::UTC).day_start(date);
            assert_eq!(utc - zurich, 3_600_000);
            // Where the clocks skip midnight (Havana, 8 March 2026), the day starts at the
            // first instant that exists, 01:00 local.
            let skipped = chrono::NaiveDate::from_ymd_opt(2026, 3, 8).unwrap();
            let havana = reading_in(chrono_tz::America::Havana).day_start(skipped);
            assert_eq!(havana, 1_772_946_000_000);
        }
    }
}

/// The engine's words as the reader reads them: claim states, roles, delivery outcomes.
pub mod names {
    use claimcheck_core::alert::AlertCondition;
    use claimcheck_core::auth::Role;
    use claimcheck_core::{ClaimState, DeliveryOutcome};

    use super::{Locale, td_string};

    /// An alert condition's heading.
    pub fn condition(locale: Locale, condition: AlertCondition) -> String {
        match condition {
            AlertCondition::FailedClaims => td_string!(locale, alerts.condition_failed_claims),
            AlertCondition::StaleClaims => td_string!(locale, alerts.condition_stale_claims),
            AlertCondition::DeliveriesStopped => {
                td_string!(locale, alerts.condition_deliveries_stopped)
            }
            AlertCondition::SignatureFailures => {
                td_string!(locale, alerts.condition_signature_failures)
            }
            AlertCondition::IndeterminateRequests => {
                td_string!(locale, alerts.condition_indeterminate_requests)
            }
            AlertCondition::ReconcileFindings => {
                td_string!(locale, alerts.condition_reconcile_findings)
            }
            AlertCondition::StorageFull => td_string!(locale, alerts.condition_storage_full),
            AlertCondition::ExpiredHolds => td_string!(locale, alerts.condition_expired_holds),
            AlertCondition::CreditsOwed => td_string!(locale, alerts.condition_credits_owed),
            AlertCondition::NewerVersionWaiting => {
                td_string!(locale, alerts.condition_newer_version_waiting)
            }
            AlertCondition::PastDueSubscriptions => {
                td_string!(locale, alerts.condition_past_due_subscriptions)
            }
        }
        .to_string()
    }

    pub fn state(locale: Locale, state: ClaimState) -> String {
        match state {
            ClaimState::Pending => td_string!(locale, common.state_pending),
            ClaimState::Running => td_string!(locale, common.state_running),
            ClaimState::Stale => td_string!(locale, common.state_stale),
            ClaimState::Processed => td_string!(locale, common.state_processed),
            ClaimState::Failed => td_string!(locale, common.state_failed),
            ClaimState::Resolved => td_string!(locale, common.state_resolved),
        }
        .to_string()
    }

    pub fn outcome(locale: Locale, outcome: DeliveryOutcome) -> String {
        match outcome {
            DeliveryOutcome::Claimed => td_string!(locale, messages.outcome_claimed),
            DeliveryOutcome::DuplicateEvent => td_string!(locale, messages.outcome_duplicate_event),
            DeliveryOutcome::DuplicateAction => {
                td_string!(locale, messages.outcome_duplicate_action)
            }
            DeliveryOutcome::Ignored => td_string!(locale, messages.outcome_ignored),
            DeliveryOutcome::BadSignature => td_string!(locale, messages.outcome_bad_signature),
            DeliveryOutcome::BadPayload => td_string!(locale, messages.outcome_bad_payload),
            DeliveryOutcome::LivemodeMismatch => {
                td_string!(locale, messages.outcome_livemode_mismatch)
            }
            DeliveryOutcome::TooLarge => td_string!(locale, messages.outcome_too_large),
            DeliveryOutcome::StorageError => td_string!(locale, messages.outcome_storage_error),
            DeliveryOutcome::NotConfigured => td_string!(locale, messages.outcome_not_configured),
            DeliveryOutcome::Overloaded => td_string!(locale, messages.outcome_overloaded),
            DeliveryOutcome::BodyTimeout => td_string!(locale, messages.outcome_body_timeout),
        }
        .to_string()
    }

    /// Why a sign-in must wait, and for how many minutes.
    pub fn throttled(locale: Locale, minutes: u64) -> String {
        match minutes {
            1 => td_string!(locale, messages.login_throttled_one, minutes),
            _ => td_string!(locale, messages.login_throttled, minutes),
        }
        .to_string()
    }

    pub fn role(locale: Locale, role: Role) -> String {
        match role {
            Role::Viewer => td_string!(locale, common.role_viewer),
            Role::Support => td_string!(locale, common.role_support),
            Role::Admin => td_string!(locale, common.role_admin),
        }
        .to_string()
    }
}

#[cfg(feature = "ssr")]
pub use server_words::{describe_filter, explain};

#[cfg(feature = "ssr")]
mod server_words {
    use claimcheck_core::bulk::BulkFilter;

    use super::{names, reader, td_string};

    /// A bulk re-drive's filter in the reader's words.
    pub fn describe_filter(filter: &BulkFilter) -> String {
        let reader = reader();
        let locale = reader.locale();
        let mut parts = vec![match filter.state {
            Some(state) => {
                td_string!(
                    locale,
                    messages.filter_state,
                    state = names::state(locale, state)
                )
            }
            None => td_string!(locale, messages.filter_any_state).to_string(),
        }];
        if let Some(kind) = &filter.event_type {
            parts.push(td_string!(locale, messages.filter_type, kind));
        }
        if let Some(ms) = filter.received_after {
            parts.push(td_string!(
                locale,
                messages.filter_from,
                at = reader.time(ms)
            ));
        }
        if let Some(ms) = filter.received_before {
            parts.push(td_string!(
                locale,
                messages.filter_before,
                at = reader.time(ms)
            ));
        }
        if let Some(text) = &filter.error_contains {
            parts.push(td_string!(locale, messages.filter_error, text));
        }
        if let Some(term) = &filter.search {
            parts.push(td_string!(locale, messages.filter_search, term));
        }
        if !filter.event_ids.is_empty() {
            let n = filter.event_ids.len();
            parts.push(td_string!(locale, messages.filter_selected, n));
        }
        parts.join(", ")
    }

    /// The engine's refusals in the reader's words (the engine's own text is English, for
    /// the command line and the logs). Each function names every variant, so a new refusal
    /// in the engine does not compile until it has words here.
    pub mod explain {
        use claimcheck_core::audit::ReasonError;
        use claimcheck_core::auth::PasswordError;
        use claimcheck_core::bulk::FilterError;
        use claimcheck_core::ops::bulk_redrive::BulkError;
        use claimcheck_core::ops::{OpsError, ResolveRefused};
        use claimcheck_core::payments::PaymentError;
        use claimcheck_core::stripe::CallError;
        use claimcheck_core::worker::RedriveRefused;

        use crate::i18n::{Locale, names, td_string};

        pub fn bulk(locale: Locale, error: &BulkError) -> String {
            match error {
                BulkError::Reason(why) => reason(locale, why),
                BulkError::Filter(FilterError::NotRedrivable(state)) => {
                    let state = names::state(locale, *state);
                    td_string!(locale, messages.filter_not_redrivable, state)
                }
                BulkError::Filter(FilterError::Age(age)) => {
                    td_string!(locale, messages.not_an_age, age)
                }
                BulkError::Filter(FilterError::EmptyRange) => {
                    td_string!(locale, messages.filter_empty_range).to_string()
                }
                BulkError::Filter(FilterError::EventId(id)) => {
                    td_string!(locale, messages.selection_not_an_event_id, id)
                }
                BulkError::Filter(FilterError::TooManySelected { max }) => {
                    td_string!(locale, messages.too_many_selected, max)
                }
                BulkError::NothingSelected => {
                    td_string!(locale, messages.bulk_nothing_selected).to_string()
                }
                BulkError::TooMany { max } => td_string!(locale, messages.bulk_too_many, max),
                BulkError::CountChanged { confirmed, now } => {
                    td_string!(locale, messages.bulk_count_changed, confirmed, now)
                }
                BulkError::NoBatch(id) => td_string!(locale, messages.bulk_no_batch, id),
                BulkError::Over(state) => td_string!(locale, messages.bulk_over, state),
                BulkError::StillRunning => {
                    td_string!(locale, messages.bulk_still_running).to_string()
                }
                BulkError::Random(_) | BulkError::Store(_) => {
                    td_string!(locale, messages.db_unavailable).to_string()
                }
            }
        }

        pub fn ops(locale: Locale, error: &OpsError) -> String {
            match error {
                OpsError::Invalid(detail) => {
                    td_string!(locale, messages.invalid, detail = sentence(detail))
                }
                OpsError::NoOperator(name) => td_string!(locale, messages.no_operator, name),
                OpsError::OperatorExists(name) => {
                    td_string!(locale, messages.operator_exists, name)
                }
                OpsError::SelfLockout => td_string!(locale, messages.self_lockout).to_string(),
                OpsError::NoToken(id) => td_string!(locale, messages.no_token, id),
                OpsError::Password(PasswordError::TooShort { min }) => {
                    td_string!(locale, messages.password_short, min)
                }
                OpsError::Password(PasswordError::TooLong { max }) => {
                    td_string!(locale, messages.password_long, max)
                }
                OpsError::Password(PasswordError::Hash(_)) | OpsError::Random(_) => {
                    td_string!(locale, messages.internal).to_string()
                }
                OpsError::Store(_) => td_string!(locale, messages.db_unavailable).to_string(),
            }
        }

        /// A reason for an audited action that was not taken.
        pub fn reason(locale: Locale, why: &ReasonError) -> String {
            match why {
                ReasonError::Missing => td_string!(locale, messages.reason_required).to_string(),
                ReasonError::TooLong { max } => td_string!(locale, messages.reason_too_long, max),
            }
        }

        pub fn redrive(locale: Locale, refused: &RedriveRefused) -> String {
            match refused {
                RedriveRefused::NotFound(id) => td_string!(locale, messages.no_claim, id),
                RedriveRefused::AlreadyProcessed => {
                    td_string!(locale, messages.already_processed).to_string()
                }
                RedriveRefused::Running { owner } => {
                    td_string!(locale, messages.claim_running, owner)
                }
                RedriveRefused::Resolved => {
                    td_string!(locale, messages.claim_is_resolved).to_string()
                }
                RedriveRefused::Reason(why) => reason(locale, why),
            }
        }

        pub fn resolve(locale: Locale, refused: &ResolveRefused) -> String {
            match refused {
                ResolveRefused::NotFound(id) => td_string!(locale, messages.no_claim, id),
                ResolveRefused::WrongState(state) => {
                    let state = super::names::state(locale, *state);
                    td_string!(locale, messages.resolve_wrong_state, state)
                }
                ResolveRefused::Reason(why) => reason(locale, why),
                ResolveRefused::Store(_) => td_string!(locale, messages.db_unavailable).to_string(),
            }
        }

        pub fn payment(locale: Locale, error: &PaymentError) -> String {
            match error {
                PaymentError::UnknownPackage(name) => {
                    td_string!(locale, messages.unknown_package, name)
                }
                PaymentError::NoPrice(name) => td_string!(locale, messages.no_price, name),
                PaymentError::BadEmail(email) => td_string!(locale, messages.bad_email, email),
                PaymentError::BadOrderId(detail) => {
                    td_string!(
                        locale,
                        messages.invalid,
                        detail = sentence(&detail.to_string())
                    )
                }
                PaymentError::OrderConflict(order) => {
                    td_string!(locale, messages.order_conflict, order)
                }
                PaymentError::NoSuchOrder(id) => td_string!(locale, messages.no_order, id),
                PaymentError::UnknownPlan(name) => td_string!(locale, messages.unknown_plan, name),
                PaymentError::BadReference(reference) => {
                    td_string!(locale, messages.bad_subscription_ref, reference)
                }
                PaymentError::SubscriptionConflict(reference) => {
                    td_string!(locale, messages.subscription_conflict, reference)
                }
                PaymentError::Subscribed(subscription) => {
                    let reference = subscription.subscription_ref.clone().unwrap_or_default();
                    let id = &subscription.subscription_id;
                    td_string!(locale, messages.subscription_started, reference, id)
                }
                PaymentError::NoSuchSubscription(id) => {
                    td_string!(locale, messages.no_subscription, id)
                }
                PaymentError::CheckoutCompleted(subject, session) => {
                    td_string!(locale, messages.checkout_completed, subject, session)
                }
                PaymentError::NotSubscribed(id) => {
                    td_string!(locale, messages.subscription_not_started, id)
                }
                PaymentError::SubscriptionCanceled(subscription) => {
                    let id = &subscription.subscription_id;
                    td_string!(locale, messages.subscription_canceled, id)
                }
                PaymentError::Reason(why) => reason(locale, why),
                PaymentError::NotRefundable { order_id, status } => {
                    td_string!(locale, messages.not_refundable, order = order_id, status)
                }
                PaymentError::NoPaymentIntent(order) => {
                    td_string!(locale, messages.no_payment_intent, order)
                }
                PaymentError::NoAmount(order) => td_string!(locale, messages.no_amount, order),
                PaymentError::BadAmount {
                    order_id,
                    requested,
                    refundable,
                    currency,
                } => {
                    let money = |minor| money_in(locale, minor, currency);
                    let (requested, refundable) = (money(*requested), money(*refundable));
                    td_string!(
                        locale,
                        messages.bad_amount,
                        order = order_id,
                        requested,
                        refundable
                    )
                }
                PaymentError::RefundUnanswered {
                    order_id,
                    key,
                    amount,
                    currency,
                } => {
                    let amount = money_in(locale, *amount, currency);
                    td_string!(
                        locale,
                        messages.refund_unanswered,
                        order = order_id,
                        key,
                        amount
                    )
                }
                PaymentError::Settled(order) => {
                    let (order, status) = (&order.order_id, order.status);
                    td_string!(locale, messages.settled, order, status)
                }
                PaymentError::Call(error) => call(locale, error),
                PaymentError::Store(_) => td_string!(locale, messages.db_unavailable).to_string(),
                PaymentError::Random(_) => td_string!(locale, messages.internal).to_string(),
            }
        }

        pub fn call(locale: Locale, error: &CallError) -> String {
            match error {
                CallError::Indeterminate {
                    key,
                    attempts,
                    last,
                } if *attempts == 1 => {
                    td_string!(locale, messages.call_indeterminate_one, key, attempts, last)
                }
                CallError::Indeterminate {
                    key,
                    attempts,
                    last,
                } => td_string!(locale, messages.call_indeterminate, key, attempts, last),
                CallError::Rejected {
                    key,
                    http_status,
                    error,
                } => td_string!(locale, messages.call_rejected, key, http_status, error),
                CallError::IdempotencyMismatch { key, error } => {
                    td_string!(locale, messages.call_mismatch, key, error)
                }
                CallError::NotStripe {
                    key,
                    api_base,
                    attempts,
                } => td_string!(locale, messages.call_not_stripe, key, api_base, attempts),
                CallError::Config(detail) => td_string!(locale, messages.call_config, detail),
                CallError::Store(_) => td_string!(locale, messages.db_unavailable).to_string(),
            }
        }

        /// An amount in minor units as the reader of `locale` writes it: `CHF 1’234.50`.
        pub fn money_in(locale: Locale, minor: i64, currency: &str) -> String {
            let language = match locale {
                Locale::de_CH => claimcheck_core::language::Language::SwissGerman,
                Locale::en => claimcheck_core::language::Language::English,
            };
            claimcheck_core::money::format_money_in(minor, currency, language)
        }

        /// `no such thing` → `No such thing.`
        fn sentence(text: &str) -> String {
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
                None => text.to_owned(),
            }
        }
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    #[test]
    fn the_default_time_zone_is_one_zone() {
        assert_eq!(super::DEFAULT_ZONE.name(), super::DEFAULT_TIME_ZONE);
        assert!(super::time_zones().any(|zone| zone == super::DEFAULT_TIME_ZONE));
    }
}
