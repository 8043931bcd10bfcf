//! Alerting, engine side: what the database says ([`Observations`]), which conditions hold
//! ([`evaluate`], pure), what an open alert does next given what operators did with it
//! ([`decide`], pure), and one check that puts them together ([`check`]). Every instance checks; the store's compare-and-sets make
//! one of them open, remind and resolve each alert, and queue its messages in the outbox the
//! server's sender empties.

mod message;

use std::time::Duration;

use std::sync::Arc;

pub use message::{AlertFacts, AlertWording, Message};

use crate::alert::{AlertChannel, AlertCondition, AlertDetail, Handling, MessageKind};
use crate::error::StoreError;
use crate::store::{AlertView, Noted, ReconcileRunView, Store};

/// Orders and signature failures older than this are not counted: past Stripe's three days
/// of retries, reconciliation is the way back, and the reconcile alert says so.
pub const LOOKBACK: Duration = Duration::from_secs(3 * 86_400);

/// When each condition holds. `None` (or 0) turns a condition off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertThresholds {
    /// At least this many failed claims.
    pub failed_claims: u64,
    /// A claim stale (lease expired, not taken again) for longer than this.
    pub stale_after: Option<Duration>,
    /// Orders opened through the order API and no delivery accepted for this long.
    pub quiet_after: Option<Duration>,
    /// Signature failures and no delivery accepted for this long.
    pub signature_window: Option<Duration>,
    /// An outgoing Stripe request left indeterminate for longer than this.
    pub indeterminate_after: Option<Duration>,
    /// A reconcile run that recovered events or failed, within this long.
    pub reconcile_window: Option<Duration>,
    /// Writes refused for lack of space now, or within this long.
    pub storage_full_window: Option<Duration>,
    /// At least this many holds ran past their expiry within `expired_holds_window` (0: off).
    pub expired_holds: u64,
    pub expired_holds_window: Duration,
    /// A customer owes at least this many credits (0: off).
    pub credits_owed: u64,
    /// A claim of a type this version does not fulfil waited longer than this.
    pub newer_version_after: Option<Duration>,
    /// A subscription's failed renewal left unpaid longer than this.
    pub past_due_after: Option<Duration>,
}

impl Default for AlertThresholds {
    fn default() -> Self {
        AlertThresholds {
            failed_claims: 1,
            stale_after: Some(Duration::from_secs(10 * 60)),
            quiet_after: Some(Duration::from_secs(6 * 3600)),
            signature_window: Some(Duration::from_secs(15 * 60)),
            indeterminate_after: Some(Duration::from_secs(5 * 60)),
            reconcile_window: Some(Duration::from_secs(24 * 3600)),
            storage_full_window: Some(Duration::from_secs(15 * 60)),
            expired_holds: 10,
            expired_holds_window: Duration::from_secs(3600),
            credits_owed: 1,
            newer_version_after: Some(Duration::from_secs(10 * 60)),
            past_due_after: Some(Duration::from_secs(3 * 86_400)),
        }
    }
}

/// How an instance checks and where its messages go.
#[derive(Debug, Clone)]
pub struct AlertPolicy {
    pub thresholds: AlertThresholds,
    /// A reminder while an alert stays open, at most this often; `None`: never.
    pub repeat: Option<Duration>,
    /// A message is queued for each of these (the channels this instance is configured with).
    pub channels: Vec<AlertChannel>,
    /// Where people reach the dashboard (no trailing slash): the links in messages.
    pub dashboard_url: String,
    /// The words of summaries and messages (for nobody in particular: the instance's
    /// language).
    pub wording: Arc<dyn AlertWording>,
}

/// Things counted, the oldest of them (unix ms), and a few of their ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub count: i64,
    pub oldest: Option<i64>,
    pub samples: Vec<String>,
}

/// What the database says at `now`, read by `Alerts::observe` (the store's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observations {
    pub now: i64,
    pub failed_claims: Tally,
    /// Claims whose lease expired longer ago than `stale_after`; `oldest` is that expiry.
    pub stale_claims: Tally,
    /// The last delivery from Stripe that was accepted (claimed, duplicate or ignored).
    pub last_delivery_at: Option<i64>,
    /// Checkout sessions asked for through the order API after that delivery (within
    /// [`LOOKBACK`]); `oldest` is the first of them.
    pub orders_since_delivery: Tally,
    /// Signature failures after that delivery (within [`LOOKBACK`]); `oldest` is the minute
    /// of the first.
    pub signature_failures: Tally,
    /// Requests left indeterminate longer ago than `indeterminate_after`.
    pub indeterminate_requests: Tally,
    /// The latest reconcile run that was not a dry run.
    pub last_reconcile: Option<ReconcileRunView>,
    /// The checking instance's last outage of writes refused for lack of space: (first
    /// refusal, last refusal, still refused). Not in the database: a full disk cannot record
    /// itself.
    pub storage_full: Option<(i64, i64, bool)>,
    /// Holds whose expiry fell within the window and that ran out (released by the server,
    /// or still waiting for it); `oldest` is the first expiry, the samples hold ids, the
    /// latest first.
    pub expired_holds: Tally,
    /// The customer of the latest expired hold.
    pub expired_holds_customer: Option<String>,
    /// Customers owing at least the threshold: how many, the credits they owe together, when
    /// the first of those refunds or disputes was written; the samples are e-mails, the one
    /// owing most first.
    pub owing_customers: Tally,
    pub credits_owed: i64,
    /// Pending or stale claims of types this version does not fulfil, received longer ago
    /// than `newer_version_after`; the samples are event ids, the oldest first.
    pub newer_version_claims: Tally,
    /// The type of the oldest of them.
    pub newer_version_type: Option<String>,
    /// Subscriptions (not canceled) whose failed renewal has been unpaid longer than
    /// `past_due_after`; `oldest` is the first failure (unix ms), the samples are
    /// subscription ids, the oldest first.
    pub past_due_subscriptions: Tally,
    /// The customer of the oldest of them.
    pub past_due_customer: Option<String>,
}

/// A condition that holds, with what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub condition: AlertCondition,
    pub count: i64,
    pub since: Option<i64>,
    pub detail: AlertDetail,
    pub samples: Vec<String>,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

/// The conditions that hold, in [`AlertCondition::ALL`] order.
pub fn evaluate(obs: &Observations, thresholds: &AlertThresholds) -> Vec<Finding> {
    let now = obs.now;
    let mut found = Vec::new();
    let failed = &obs.failed_claims;
    if thresholds.failed_claims > 0
        && u64::try_from(failed.count).unwrap_or(0) >= thresholds.failed_claims
    {
        found.push(Finding {
            condition: AlertCondition::FailedClaims,
            count: failed.count,
            since: failed.oldest,
            detail: AlertDetail::FailedClaims {
                count: failed.count,
            },
            samples: failed.samples.clone(),
        });
    }
    if let Some(after) = thresholds.stale_after
        && obs.stale_claims.count > 0
    {
        let stale = &obs.stale_claims;
        found.push(Finding {
            condition: AlertCondition::StaleClaims,
            count: stale.count,
            since: stale.oldest,
            detail: AlertDetail::StaleClaims {
                count: stale.count,
                after_secs: after.as_secs(),
            },
            samples: stale.samples.clone(),
        });
    }
    if let Some(after) = thresholds.quiet_after
        && let Some(first) = obs.orders_since_delivery.oldest
        && first <= now - ms(after)
    {
        let orders = &obs.orders_since_delivery;
        found.push(Finding {
            condition: AlertCondition::DeliveriesStopped,
            count: orders.count,
            since: Some(obs.last_delivery_at.unwrap_or(first)),
            detail: AlertDetail::DeliveriesStopped {
                orders: orders.count,
                after_secs: after.as_secs(),
                last_delivery_at: obs.last_delivery_at,
            },
            samples: orders.samples.clone(),
        });
    }
    if let Some(window) = thresholds.signature_window
        && let Some(first) = obs.signature_failures.oldest
        && obs.signature_failures.count > 0
        && first <= now - ms(window)
    {
        let failures = &obs.signature_failures;
        found.push(Finding {
            condition: AlertCondition::SignatureFailures,
            count: failures.count,
            since: Some(first),
            detail: AlertDetail::SignatureFailures {
                count: failures.count,
                window_secs: window.as_secs(),
            },
            samples: Vec::new(),
        });
    }
    if let Some(after) = thresholds.indeterminate_after
        && obs.indeterminate_requests.count > 0
    {
        let requests = &obs.indeterminate_requests;
        found.push(Finding {
            condition: AlertCondition::IndeterminateRequests,
            count: requests.count,
            since: requests.oldest,
            detail: AlertDetail::IndeterminateRequests {
                count: requests.count,
                after_secs: after.as_secs(),
            },
            samples: requests.samples.clone(),
        });
    }
    if let Some(window) = thresholds.reconcile_window
        && let Some(run) = &obs.last_reconcile
        && run.finished_at >= now - ms(window)
    {
        let detail = match (&run.error, run.claimed) {
            (Some(error), _) => Some(AlertDetail::ReconcileFailed {
                at: run.finished_at,
                actor: run.actor.clone(),
                error: error.clone(),
            }),
            (None, claimed) if claimed > 0 => Some(AlertDetail::ReconcileRecovered {
                at: run.finished_at,
                actor: run.actor.clone(),
                claimed,
                run: Some(run.id),
            }),
            _ => None,
        };
        if let Some(detail) = detail {
            found.push(Finding {
                condition: AlertCondition::ReconcileFindings,
                count: if run.error.is_some() { 1 } else { run.claimed },
                since: Some(run.finished_at),
                detail,
                samples: Vec::new(),
            });
        }
    }
    if let Some(window) = thresholds.storage_full_window
        && let Some((since, last_at, ongoing)) = obs.storage_full
        && (ongoing || last_at >= now - ms(window))
    {
        found.push(Finding {
            condition: AlertCondition::StorageFull,
            count: 1,
            since: Some(since),
            detail: AlertDetail::StorageFull {
                since,
                last_at,
                ongoing,
            },
            samples: Vec::new(),
        });
    }
    if thresholds.expired_holds > 0
        && u64::try_from(obs.expired_holds.count).unwrap_or(0) >= thresholds.expired_holds
    {
        let holds = &obs.expired_holds;
        found.push(Finding {
            condition: AlertCondition::ExpiredHolds,
            count: holds.count,
            since: holds.oldest,
            detail: AlertDetail::ExpiredHolds {
                count: holds.count,
                window_secs: thresholds.expired_holds_window.as_secs(),
                customer: obs.expired_holds_customer.clone(),
            },
            samples: holds.samples.clone(),
        });
    }
    if thresholds.credits_owed > 0 && obs.owing_customers.count > 0 {
        let owing = &obs.owing_customers;
        found.push(Finding {
            condition: AlertCondition::CreditsOwed,
            count: owing.count,
            since: owing.oldest,
            detail: AlertDetail::CreditsOwed {
                customers: owing.count,
                credits: obs.credits_owed,
                customer: owing.samples.first().cloned(),
            },
            samples: owing.samples.clone(),
        });
    }
    if let Some(after) = thresholds.newer_version_after
        && obs.newer_version_claims.count > 0
    {
        let waiting = &obs.newer_version_claims;
        found.push(Finding {
            condition: AlertCondition::NewerVersionWaiting,
            count: waiting.count,
            since: waiting.oldest,
            detail: AlertDetail::NewerVersionWaiting {
                count: waiting.count,
                after_secs: after.as_secs(),
                event_id: waiting.samples.first().cloned(),
                event_type: obs.newer_version_type.clone(),
            },
            samples: waiting.samples.clone(),
        });
    }
    if let Some(after) = thresholds.past_due_after
        && obs.past_due_subscriptions.count > 0
    {
        let past_due = &obs.past_due_subscriptions;
        found.push(Finding {
            condition: AlertCondition::PastDueSubscriptions,
            count: past_due.count,
            since: past_due.oldest,
            detail: AlertDetail::PastDueSubscriptions {
                count: past_due.count,
                after_secs: after.as_secs(),
                subscription: past_due.samples.first().cloned(),
                customer: obs.past_due_customer.clone(),
            },
            samples: past_due.samples.clone(),
        });
    }
    found
}

/// What an alert does at a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The condition began to hold: open an alert, send "opened".
    Open,
    /// Still holds and the repeat interval is over: send a reminder.
    Remind,
    /// Still holds, reminded recently (or acknowledged, or snoozed): only bring its figures
    /// up to date.
    Refresh,
    /// No longer holds: resolve, send "resolved".
    Resolve,
    /// No longer holds while snoozed: resolve without a message.
    ResolveQuietly,
    /// Nothing holds and nothing is open.
    Nothing,
}

/// An open alert as a check weighs it: its last message and what operators did with it.
#[derive(Debug, Clone, Copy)]
pub struct Standing<'a> {
    pub last_notified: i64,
    pub handling: &'a Handling,
}

/// The step for one condition: `open` is its open alert, if one is; `holds` whether the
/// condition holds now. An acknowledged alert is not reminded of; a snoozed one sends
/// nothing until the snooze ends, then is reminded of as if never snoozed (at once, when
/// the interval passed meanwhile).
pub fn decide(open: Option<Standing<'_>>, holds: bool, now: i64, repeat: Option<Duration>) -> Step {
    match (open, holds) {
        (None, true) => Step::Open,
        (None, false) => Step::Nothing,
        (Some(alert), false) if alert.handling.silences(now) => Step::ResolveQuietly,
        (Some(_), false) => Step::Resolve,
        (Some(alert), true) if alert.handling.holds_reminders(now) => Step::Refresh,
        (Some(alert), true) => match repeat {
            Some(every) if !every.is_zero() && now >= alert.last_notified + ms(every) => {
                Step::Remind
            }
            _ => Step::Refresh,
        },
    }
}

/// A message this check queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    pub condition: AlertCondition,
    pub kind: MessageKind,
}

/// One check at `now`: observes, evaluates, and opens, reminds, refreshes or resolves each
/// alert, queueing a message per channel for what changed. Safe to run on every instance at
/// once: each step is a compare-and-set, and only the instance whose write lands queues.
pub async fn check(
    store: &Store,
    policy: &AlertPolicy,
    now: i64,
) -> Result<Vec<Queued>, StoreError> {
    let mut observed = store.alerts().observe(&policy.thresholds, now).await?;
    observed.storage_full = store.write_health().last_outage();
    let findings = evaluate(&observed, &policy.thresholds);
    let open = store.alerts().open().await?;
    let mut queued = Vec::new();
    for condition in AlertCondition::ALL {
        let finding = findings.iter().find(|f| f.condition == condition);
        let summary = finding.map(|f| policy.wording.summary(&f.detail));
        let noted = finding
            .zip(summary.as_deref())
            .map(|(finding, summary)| Noted { finding, summary });
        let current = open.iter().find(|a| a.condition == condition);
        let standing = current.map(|a| Standing {
            last_notified: a.last_notified_at,
            handling: &a.handling,
        });
        let step = decide(standing, finding.is_some(), now, policy.repeat);
        let landed = match (step, noted, current) {
            (Step::Open, Some(noted), _) => {
                let facts = AlertFacts::of_finding(&noted, now);
                let messages = messages(policy, MessageKind::Opened, &facts);
                store.alerts().open_alert(&noted, now, &messages).await?
            }
            (Step::Remind, Some(noted), Some(alert)) => {
                let facts = AlertFacts {
                    opened_at: alert.opened_at,
                    ..AlertFacts::of_finding(&noted, now)
                };
                let messages = messages(policy, MessageKind::Reminder, &facts);
                store.alerts().remind(alert, &noted, now, &messages).await?
            }
            (Step::Refresh, Some(noted), Some(alert)) => {
                store.alerts().refresh(alert.id, &noted, now).await?;
                false
            }
            (Step::Resolve, _, Some(alert)) => {
                let facts = AlertFacts::of_alert(alert, now);
                let messages = messages(policy, MessageKind::Resolved, &facts);
                store.alerts().resolve(alert, now, &messages).await?
            }
            (Step::ResolveQuietly, _, Some(alert)) => {
                store.alerts().resolve(alert, now, &[]).await?;
                false
            }
            _ => false,
        };
        if landed {
            let kind = match step {
                Step::Open => MessageKind::Opened,
                Step::Remind => MessageKind::Reminder,
                _ => MessageKind::Resolved,
            };
            queued.push(Queued { condition, kind });
        }
    }
    Ok(queued)
}

/// One message of `kind` per channel of `policy`.
pub(crate) fn messages(
    policy: &AlertPolicy,
    kind: MessageKind,
    facts: &AlertFacts,
) -> Vec<(AlertChannel, Message)> {
    let text = policy.wording.message(kind, facts, &policy.dashboard_url);
    policy
        .channels
        .iter()
        .map(|channel| (*channel, text.clone()))
        .collect()
}

impl AlertFacts {
    fn of_finding(noted: &Noted<'_>, opened_at: i64) -> AlertFacts {
        let finding = noted.finding;
        AlertFacts {
            condition: finding.condition,
            count: finding.count,
            since: finding.since,
            summary: noted.summary.to_owned(),
            samples: finding.samples.clone(),
            opened_at,
            resolved_at: None,
            resolved_by: None,
            note: None,
            detail: Some(finding.detail.clone()),
        }
    }

    /// An alert resolved at `resolved_at` (by hand if it says who).
    pub(crate) fn of_alert(alert: &AlertView, resolved_at: i64) -> AlertFacts {
        AlertFacts {
            condition: alert.condition,
            count: alert.count,
            since: alert.since,
            summary: alert.summary.clone(),
            samples: alert.samples.clone(),
            opened_at: alert.opened_at,
            resolved_at: Some(resolved_at),
            resolved_by: alert.resolved_by.clone(),
            note: alert.resolution_note.clone(),
            detail: alert.detail.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const NOW: i64 = 1_800_000_000_000;

    fn tally(count: i64, oldest: i64) -> Tally {
        Tally {
            count,
            oldest: Some(oldest),
            samples: vec!["evt_1".into()],
        }
    }

    fn conditions(obs: &Observations) -> Vec<AlertCondition> {
        evaluate(obs, &AlertThresholds::default())
            .into_iter()
            .map(|f| f.condition)
            .collect()
    }

    fn quiet() -> Observations {
        Observations {
            now: NOW,
            ..Observations::default()
        }
    }

    #[test]
    fn nothing_holds_on_a_quiet_database() {
        assert!(conditions(&quiet()).is_empty());
    }

    #[test]
    fn a_full_disk_holds_while_it_lasts_and_for_the_window_after() {
        let ongoing = Observations {
            storage_full: Some((NOW - 60 * MIN, NOW - MIN, true)),
            ..quiet()
        };
        assert_eq!(conditions(&ongoing), [AlertCondition::StorageFull]);
        let recent = Observations {
            storage_full: Some((NOW - 20 * MIN, NOW - 10 * MIN, false)),
            ..quiet()
        };
        let found = evaluate(&recent, &AlertThresholds::default());
        assert_eq!(found[0].since, Some(NOW - 20 * MIN));
        let long_ago = Observations {
            storage_full: Some((NOW - 60 * MIN, NOW - 20 * MIN, false)),
            ..quiet()
        };
        assert!(conditions(&long_ago).is_empty());
        let off = AlertThresholds {
            storage_full_window: None,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&ongoing, &off).is_empty());
    }

    #[test]
    fn one_failed_claim_holds_and_the_threshold_counts() {
        let obs = Observations {
            failed_claims: tally(1, NOW - 5 * MIN),
            ..quiet()
        };
        let found = evaluate(&obs, &AlertThresholds::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].condition, AlertCondition::FailedClaims);
        assert_eq!(found[0].count, 1);
        assert_eq!(found[0].since, Some(NOW - 5 * MIN));
        assert_eq!(found[0].detail, AlertDetail::FailedClaims { count: 1 });
        let three = AlertThresholds {
            failed_claims: 3,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&obs, &three).is_empty());
        let off = AlertThresholds {
            failed_claims: 0,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&obs, &off).is_empty());
    }

    #[test]
    fn stale_claims_counted_past_the_threshold_hold_unless_off() {
        let obs = Observations {
            stale_claims: tally(2, NOW - 30 * MIN),
            ..quiet()
        };
        assert_eq!(conditions(&obs), vec![AlertCondition::StaleClaims]);
        let off = AlertThresholds {
            stale_after: None,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&obs, &off).is_empty());
    }

    #[test]
    fn deliveries_stopped_needs_an_order_older_than_the_quiet_period() {
        let hour = 60 * MIN;
        // An order opened an hour ago, nothing delivered since: not yet (6 h).
        let recent = Observations {
            last_delivery_at: Some(NOW - 10 * hour),
            orders_since_delivery: tally(1, NOW - hour),
            ..quiet()
        };
        assert!(conditions(&recent).is_empty());
        // Seven hours ago, and two more since: it holds, since the last delivery.
        let old = Observations {
            orders_since_delivery: tally(3, NOW - 7 * hour),
            ..recent.clone()
        };
        let found = evaluate(&old, &AlertThresholds::default());
        assert_eq!(found[0].condition, AlertCondition::DeliveriesStopped);
        assert_eq!(found[0].count, 3);
        assert_eq!(found[0].since, Some(NOW - 10 * hour));
        // No order opened: a quiet shop is not an outage.
        let no_orders = Observations {
            last_delivery_at: Some(NOW - 100 * hour),
            ..quiet()
        };
        assert!(conditions(&no_orders).is_empty());
    }

    #[test]
    fn signature_failures_hold_once_none_passed_for_the_window() {
        let young = Observations {
            signature_failures: tally(4, NOW - 5 * MIN),
            ..quiet()
        };
        assert!(conditions(&young).is_empty());
        let old = Observations {
            signature_failures: tally(9, NOW - 20 * MIN),
            ..quiet()
        };
        let found = evaluate(&old, &AlertThresholds::default());
        assert_eq!(found[0].condition, AlertCondition::SignatureFailures);
        assert_eq!(found[0].count, 9);
        assert_eq!(
            found[0].detail,
            AlertDetail::SignatureFailures {
                count: 9,
                window_secs: 15 * 60
            }
        );
    }

    #[test]
    fn indeterminate_requests_hold() {
        let obs = Observations {
            indeterminate_requests: tally(1, NOW - 20 * MIN),
            ..quiet()
        };
        assert_eq!(
            conditions(&obs),
            vec![AlertCondition::IndeterminateRequests]
        );
    }

    #[test]
    fn expired_holds_hold_from_the_threshold_and_name_a_customer() {
        let holds = |count| Observations {
            expired_holds: tally(count, NOW - 30 * MIN),
            expired_holds_customer: Some("ada@example.ch".into()),
            ..quiet()
        };
        assert!(conditions(&holds(9)).is_empty());
        let found = evaluate(&holds(10), &AlertThresholds::default());
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].detail,
            AlertDetail::ExpiredHolds {
                count: 10,
                window_secs: 3600,
                customer: Some("ada@example.ch".into()),
            }
        );
        let off = AlertThresholds {
            expired_holds: 0,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&holds(50), &off).is_empty());
    }

    #[test]
    fn claims_waiting_for_a_newer_version_hold_unless_off() {
        let obs = Observations {
            newer_version_claims: tally(3, NOW - 20 * MIN),
            newer_version_type: Some("invoice.paid".into()),
            ..quiet()
        };
        let found = evaluate(&obs, &AlertThresholds::default());
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].detail,
            AlertDetail::NewerVersionWaiting {
                count: 3,
                after_secs: 600,
                event_id: Some("evt_1".into()),
                event_type: Some("invoice.paid".into()),
            }
        );
        let off = AlertThresholds {
            newer_version_after: None,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&obs, &off).is_empty());
    }

    #[test]
    fn a_renewal_unpaid_past_the_threshold_holds_and_names_the_oldest() {
        let obs = Observations {
            past_due_subscriptions: Tally {
                count: 2,
                oldest: Some(NOW - 4 * 24 * 60 * MIN),
                samples: vec!["sub_old".into(), "sub_new".into()],
            },
            past_due_customer: Some("ada@example.ch".into()),
            ..quiet()
        };
        let found = evaluate(&obs, &AlertThresholds::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].since, Some(NOW - 4 * 24 * 60 * MIN));
        assert_eq!(
            found[0].detail,
            AlertDetail::PastDueSubscriptions {
                count: 2,
                after_secs: 3 * 86_400,
                subscription: Some("sub_old".into()),
                customer: Some("ada@example.ch".into()),
            }
        );
        let off = AlertThresholds {
            past_due_after: None,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&obs, &off).is_empty());
    }

    #[test]
    fn conditions_come_in_their_listed_order() {
        let everything = Observations {
            failed_claims: tally(1, NOW - MIN),
            stale_claims: tally(1, NOW - 20 * MIN),
            orders_since_delivery: tally(1, NOW - 7 * 60 * MIN),
            signature_failures: tally(1, NOW - 20 * MIN),
            indeterminate_requests: tally(1, NOW - 10 * MIN),
            storage_full: Some((NOW - MIN, NOW - MIN, true)),
            expired_holds: tally(10, NOW - MIN),
            owing_customers: tally(1, NOW - MIN),
            credits_owed: 3,
            newer_version_claims: tally(1, NOW - 20 * MIN),
            past_due_subscriptions: tally(1, NOW - 4 * 24 * 60 * MIN),
            ..quiet()
        };
        let found = conditions(&everything);
        let listed: Vec<AlertCondition> = AlertCondition::ALL
            .into_iter()
            .filter(|c| found.contains(c))
            .collect();
        assert_eq!(found, listed);
        assert_eq!(found.len(), AlertCondition::ALL.len() - 1, "{found:?}");
    }

    #[test]
    fn customers_owing_credits_hold_unless_off() {
        let obs = Observations {
            owing_customers: Tally {
                count: 2,
                oldest: Some(NOW - MIN),
                samples: vec!["bea@example.ch".into(), "ada@example.ch".into()],
            },
            credits_owed: 25,
            ..quiet()
        };
        let found = evaluate(&obs, &AlertThresholds::default());
        assert_eq!(
            found[0].detail,
            AlertDetail::CreditsOwed {
                customers: 2,
                credits: 25,
                customer: Some("bea@example.ch".into()),
            }
        );
        let off = AlertThresholds {
            credits_owed: 0,
            ..AlertThresholds::default()
        };
        assert!(evaluate(&obs, &off).is_empty());
    }

    fn run(claimed: i64, error: Option<&str>, finished_at: i64) -> ReconcileRunView {
        ReconcileRunView {
            id: 7,
            started_at: finished_at - 1000,
            finished_at,
            since: 0,
            actor: "reconciler".into(),
            dry_run: false,
            listed: 10,
            already_claimed: 10 - claimed,
            claimed,
            error: error.map(str::to_owned),
        }
    }

    #[test]
    fn a_reconcile_run_that_recovered_or_failed_holds_within_the_window() {
        let with = |r| Observations {
            last_reconcile: Some(r),
            ..quiet()
        };
        assert!(conditions(&with(run(0, None, NOW - MIN))).is_empty());
        let recovered = evaluate(&with(run(4, None, NOW - MIN)), &AlertThresholds::default());
        assert_eq!(recovered[0].count, 4);
        assert_eq!(
            recovered[0].detail,
            AlertDetail::ReconcileRecovered {
                at: NOW - MIN,
                actor: "reconciler".into(),
                claimed: 4,
                run: Some(7),
            }
        );
        let failed = evaluate(
            &with(run(0, Some("Stripe refused the key"), NOW - MIN)),
            &AlertThresholds::default(),
        );
        assert!(matches!(
            &failed[0].detail,
            AlertDetail::ReconcileFailed { error, .. } if error == "Stripe refused the key"
        ));
        // A day and more ago: no longer news.
        assert!(conditions(&with(run(4, None, NOW - 25 * 60 * MIN))).is_empty());
    }

    fn standing(last_notified: i64, handling: &Handling) -> Option<Standing<'_>> {
        Some(Standing {
            last_notified,
            handling,
        })
    }

    #[test]
    fn an_alert_opens_once_repeats_after_the_interval_and_resolves() {
        let every = Some(Duration::from_secs(30 * 60));
        let open = &Handling::Open;
        assert_eq!(decide(None, true, NOW, every), Step::Open);
        assert_eq!(decide(None, false, NOW, every), Step::Nothing);
        assert_eq!(
            decide(standing(NOW, open), true, NOW + MIN, every),
            Step::Refresh
        );
        assert_eq!(
            decide(standing(NOW, open), true, NOW + 29 * MIN, every),
            Step::Refresh
        );
        assert_eq!(
            decide(standing(NOW, open), true, NOW + 30 * MIN, every),
            Step::Remind
        );
        assert_eq!(
            decide(standing(NOW, open), false, NOW + MIN, every),
            Step::Resolve
        );
        // Without a repeat interval: never reminded.
        assert_eq!(
            decide(standing(NOW, open), true, NOW + 9999 * MIN, None),
            Step::Refresh
        );
    }

    #[test]
    fn an_acknowledged_alert_is_never_reminded_of_and_still_resolves_with_its_message() {
        let every = Some(Duration::from_secs(30 * 60));
        let acknowledged = &Handling::Acknowledged {
            by: "sam".into(),
            at: NOW + MIN,
        };
        for later in [30 * MIN, 31 * MIN, 24 * 60 * MIN, 999 * 60 * MIN] {
            assert_eq!(
                decide(standing(NOW, acknowledged), true, NOW + later, every),
                Step::Refresh,
                "{later}"
            );
        }
        assert_eq!(
            decide(standing(NOW, acknowledged), false, NOW + 40 * MIN, every),
            Step::Resolve
        );
        // Once resolved it is gone: the condition coming back opens a new alert.
        assert_eq!(decide(None, true, NOW + 41 * MIN, every), Step::Open);
    }

    #[test]
    fn a_snoozed_alert_sends_nothing_until_the_snooze_ends_then_reminders_resume() {
        let every = Some(Duration::from_secs(30 * 60));
        let until = NOW + 60 * MIN;
        let snoozed = &Handling::Snoozed {
            by: "sam".into(),
            at: NOW,
            until,
        };
        // Reminded at NOW; due again at NOW + 30 min, but snoozed until NOW + 60 min.
        assert_eq!(
            decide(standing(NOW, snoozed), true, NOW + 31 * MIN, every),
            Step::Refresh
        );
        assert_eq!(
            decide(standing(NOW, snoozed), true, until - 1, every),
            Step::Refresh
        );
        // The snooze is over and the interval passed long ago: a reminder at once.
        assert_eq!(
            decide(standing(NOW, snoozed), true, until, every),
            Step::Remind
        );
        // A short snooze inside the interval: the reminder comes when it is due anyway.
        let short = &Handling::Snoozed {
            by: "sam".into(),
            at: NOW,
            until: NOW + 5 * MIN,
        };
        assert_eq!(
            decide(standing(NOW, short), true, NOW + 10 * MIN, every),
            Step::Refresh
        );
        assert_eq!(
            decide(standing(NOW, short), true, NOW + 30 * MIN, every),
            Step::Remind
        );
        // Cleared while snoozed: resolved without a word; after the snooze, announced.
        assert_eq!(
            decide(standing(NOW, snoozed), false, until - 1, every),
            Step::ResolveQuietly
        );
        assert_eq!(
            decide(standing(NOW, snoozed), false, until, every),
            Step::Resolve
        );
    }
}
