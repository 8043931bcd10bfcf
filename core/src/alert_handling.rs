//! What operators on call do with an open alert, and the rules the engine keeps for them:
//! acknowledge it, snooze it for an hour or a day (support and admins), resolve it with a
//! note (admins). Each is one compare-and-set on the alert, audited in the same transaction:
//! of two operators acting at once, one acts and the other is told what happened instead.
//!
//! ```text
//!  from \ action   acknowledge          snooze 1 h | 1 day     resolve with a note
//!  open            acknowledged         snoozed until T        resolved
//!  acknowledged    refused (already)    snoozed until T        resolved
//!  snoozed         acknowledged         snoozed until T'       resolved
//!  resolved        refused              refused                refused
//! ```
//!
//! A snooze that ends leaves the alert open again; the check resolves it in any state when
//! the condition clears, and opens a new alert when the condition holds again, so a
//! resolution by hand never hides a condition that still holds. What each state does to
//! messages is the check's ([`crate::alert_check::decide`]).

use crate::alert::{AlertCondition, Handling, HandlingAction, MessageKind, SnoozeFor};
use crate::alert_check::{AlertFacts, AlertPolicy, messages};
use crate::audit::{self, Actor, AuditAction, AuditRecord, ReasonError};
use crate::error::StoreError;
use crate::store::{AlertView, Store};

/// Why an operator's action did not land; the error carries the alert as it now stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It was resolved first: by its check (the condition cleared) or by an admin.
    Resolved,
    /// Someone acknowledged or snoozed it after the operator's page showed it.
    Changed,
    /// It is acknowledged already: acknowledging again would change nothing.
    AlreadyAcknowledged,
}

/// What became of an action that was not taken.
#[derive(Debug, thiserror::Error)]
pub enum HandlingError {
    #[error("there is no alert {0}")]
    NotFound(i64),
    #[error("the note: {0}")]
    Note(#[from] ReasonError),
    #[error("not done: {refusal:?}")]
    Refused {
        refusal: Refusal,
        /// As it stands now: what the operator is told happened.
        alert: Box<AlertView>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An action that landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    pub alert_id: i64,
    pub condition: AlertCondition,
    /// After an acknowledgement or a snooze, the new handling; after a resolution, the one it
    /// had.
    pub handling: Handling,
}

/// Whether `action` may be taken on `alert` as it stands, by an operator whose page showed
/// its handling at version `seen` (`None`: they did not say). A resolution closes whatever
/// the handling; an acknowledgement or a snooze lands only on what the operator saw.
pub fn admit(alert: &AlertView, action: HandlingAction, seen: Option<i64>) -> Result<(), Refusal> {
    if alert.resolved_at.is_some() {
        return Err(Refusal::Resolved);
    }
    match action {
        HandlingAction::Resolve => Ok(()),
        _ if seen != Some(alert.handling_version) => Err(Refusal::Changed),
        HandlingAction::Acknowledge if matches!(alert.handling, Handling::Acknowledged { .. }) => {
            Err(Refusal::AlreadyAcknowledged)
        }
        HandlingAction::Acknowledge | HandlingAction::Snooze(_) => Ok(()),
    }
}

/// An acknowledgement or a snooze: what changes the handling of an alert that stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taking {
    Acknowledge,
    Snooze(SnoozeFor),
}

impl Taking {
    fn action(self) -> HandlingAction {
        match self {
            Taking::Acknowledge => HandlingAction::Acknowledge,
            Taking::Snooze(length) => HandlingAction::Snooze(length),
        }
    }

    /// The handling it leaves, taken by `by` at `now`.
    fn handling(self, by: &str, now: i64) -> Handling {
        let by = by.to_owned();
        match self {
            Taking::Acknowledge => Handling::Acknowledged { by, at: now },
            Taking::Snooze(length) => Handling::Snoozed {
                by,
                at: now,
                until: now.saturating_add(length.millis()),
            },
        }
    }

    fn audit(self, condition: AlertCondition) -> (AuditAction, String) {
        match self {
            Taking::Acknowledge => (
                AuditAction::AlertAcknowledge,
                format!("acknowledged ({condition})"),
            ),
            Taking::Snooze(length) => (
                AuditAction::AlertSnooze,
                format!("snoozed for {} ({condition})", length.as_str()),
            ),
        }
    }
}

/// A note that may be left out (acknowledging, snoozing): trimmed, at most
/// [`audit::MAX_REASON_CHARS`]; empty is none.
pub fn optional_note(text: &str) -> Result<Option<&str>, ReasonError> {
    match audit::reason(text) {
        Ok(note) => Ok(Some(note)),
        Err(ReasonError::Missing) => Ok(None),
        Err(too_long) => Err(too_long),
    }
}

/// Who the alert's page names: the operator, or the CLI's user as the audit log names them.
fn who(actor: &Actor) -> String {
    actor
        .operator()
        .map(str::to_owned)
        .unwrap_or_else(|| actor.to_string())
}

/// The alert, or why there is none to act on.
async fn load(store: &Store, alert_id: i64) -> Result<AlertView, HandlingError> {
    store
        .alerts()
        .get(alert_id)
        .await?
        .ok_or(HandlingError::NotFound(alert_id))
}

/// After a compare-and-set that did not land: what happened instead, as the alert now says.
async fn refused(
    store: &Store,
    alert_id: i64,
    action: HandlingAction,
    seen: Option<i64>,
) -> HandlingError {
    match load(store, alert_id).await {
        Ok(alert) => HandlingError::Refused {
            // It moved under us: if it somehow reads as admissible again, it still changed.
            refusal: admit(&alert, action, seen)
                .err()
                .unwrap_or(Refusal::Changed),
            alert: Box::new(alert),
        },
        Err(error) => error,
    }
}

/// Acknowledges alert `alert_id` at `now`: it stays open, and no reminders go out while it
/// does. `seen` is the handling version the operator's page showed; `note` may be empty.
pub async fn acknowledge(
    store: &Store,
    alert_id: i64,
    seen: Option<i64>,
    actor: &Actor,
    note: &str,
    now: i64,
) -> Result<Handled, HandlingError> {
    take(store, alert_id, seen, Taking::Acknowledge, actor, note, now).await
}

/// Snoozes alert `alert_id` for `length` from `now`: no message about it until then, after
/// which reminders resume while it stays open.
pub async fn snooze(
    store: &Store,
    alert_id: i64,
    seen: Option<i64>,
    length: SnoozeFor,
    actor: &Actor,
    note: &str,
    now: i64,
) -> Result<Handled, HandlingError> {
    take(
        store,
        alert_id,
        seen,
        Taking::Snooze(length),
        actor,
        note,
        now,
    )
    .await
}

async fn take(
    store: &Store,
    alert_id: i64,
    seen: Option<i64>,
    taking: Taking,
    actor: &Actor,
    note: &str,
    now: i64,
) -> Result<Handled, HandlingError> {
    let note = optional_note(note)?;
    let alert = load(store, alert_id).await?;
    let action = taking.action();
    if let Err(refusal) = admit(&alert, action, seen) {
        return Err(HandlingError::Refused {
            refusal,
            alert: Box::new(alert),
        });
    }
    let handling = taking.handling(&who(actor), now);
    let (audit_action, outcome) = taking.audit(alert.condition);
    let target = format!("alert:{alert_id}");
    let record = AuditRecord {
        actor,
        action: audit_action,
        target: &target,
        reason: note.unwrap_or_default(),
        outcome: &outcome,
    };
    let landed = store
        .alerts()
        .handle(
            alert_id,
            alert.handling_version,
            &handling,
            note,
            now,
            &record,
        )
        .await?;
    if !landed {
        return Err(refused(store, alert_id, action, seen).await);
    }
    Ok(Handled {
        alert_id,
        condition: alert.condition,
        handling,
    })
}

/// Resolves alert `alert_id` by hand at `now`, with `note` (required): it closes whatever
/// its handling, its resolution goes out on `policy`'s channels naming who and why (a
/// person's decision is news even while the alert is snoozed), and if the condition still
/// holds at the next check a new alert opens.
pub async fn resolve(
    store: &Store,
    policy: &AlertPolicy,
    alert_id: i64,
    actor: &Actor,
    note: &str,
    now: i64,
) -> Result<Handled, HandlingError> {
    let note = audit::reason(note)?;
    let alert = load(store, alert_id).await?;
    if let Err(refusal) = admit(&alert, HandlingAction::Resolve, None) {
        return Err(HandlingError::Refused {
            refusal,
            alert: Box::new(alert),
        });
    }
    let by = who(actor);
    let closed = AlertView {
        resolved_by: Some(by.clone()),
        resolution_note: Some(note.to_owned()),
        ..alert.clone()
    };
    let facts = AlertFacts::of_alert(&closed, now);
    let messages = messages(policy, MessageKind::Resolved, &facts);
    let target = format!("alert:{}", alert.id);
    let outcome = format!("resolved ({})", alert.condition);
    let record = AuditRecord {
        actor,
        action: AuditAction::AlertResolve,
        target: &target,
        reason: note,
        outcome: &outcome,
    };
    let landed = store
        .alerts()
        .resolve_by_hand(alert.id, &by, note, now, &messages, &record)
        .await?;
    if !landed {
        return Err(refused(store, alert.id, HandlingAction::Resolve, None).await);
    }
    Ok(Handled {
        alert_id: alert.id,
        condition: alert.condition,
        handling: alert.handling,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(handling: Handling, version: i64, resolved_at: Option<i64>) -> AlertView {
        AlertView {
            id: 7,
            condition: AlertCondition::FailedClaims,
            opened_at: 1,
            since: None,
            count: 1,
            summary: String::new(),
            detail: None,
            samples: Vec::new(),
            last_notified_at: 1,
            notifications: 1,
            checked_at: 1,
            resolved_at,
            handling,
            handling_note: None,
            handling_version: version,
            resolved_by: None,
            resolution_note: None,
        }
    }

    const SNOOZE: HandlingAction = HandlingAction::Snooze(SnoozeFor::Hour);

    #[test]
    fn an_open_alert_takes_every_action_on_the_version_its_page_showed() {
        let open = alert(Handling::Open, 0, None);
        for action in [HandlingAction::Acknowledge, SNOOZE, HandlingAction::Resolve] {
            assert_eq!(admit(&open, action, Some(0)), Ok(()), "{action:?}");
        }
        // Someone acted since (version 0 → 1), or the form did not say what it saw.
        let moved = alert(Handling::Open, 1, None);
        for seen in [Some(0), None] {
            assert_eq!(
                admit(&moved, HandlingAction::Acknowledge, seen),
                Err(Refusal::Changed)
            );
            assert_eq!(admit(&moved, SNOOZE, seen), Err(Refusal::Changed));
        }
        // A resolution closes whatever it became.
        assert_eq!(admit(&moved, HandlingAction::Resolve, None), Ok(()));
    }

    #[test]
    fn an_acknowledged_alert_can_be_snoozed_not_acknowledged_again() {
        let acknowledged = alert(
            Handling::Acknowledged {
                by: "sam".into(),
                at: 5,
            },
            1,
            None,
        );
        assert_eq!(
            admit(&acknowledged, HandlingAction::Acknowledge, Some(1)),
            Err(Refusal::AlreadyAcknowledged)
        );
        assert_eq!(admit(&acknowledged, SNOOZE, Some(1)), Ok(()));
        let snoozed = alert(
            Handling::Snoozed {
                by: "sam".into(),
                at: 5,
                until: 10,
            },
            2,
            None,
        );
        assert_eq!(
            admit(&snoozed, HandlingAction::Acknowledge, Some(2)),
            Ok(())
        );
        assert_eq!(admit(&snoozed, SNOOZE, Some(2)), Ok(()));
    }

    #[test]
    fn nothing_is_taken_on_a_resolved_alert() {
        let resolved = alert(Handling::Open, 0, Some(9));
        for action in [HandlingAction::Acknowledge, SNOOZE, HandlingAction::Resolve] {
            assert_eq!(
                admit(&resolved, action, Some(0)),
                Err(Refusal::Resolved),
                "{action:?}"
            );
        }
    }

    #[test]
    fn a_snooze_lasts_an_hour_or_a_day_from_now() {
        assert_eq!(
            Taking::Snooze(SnoozeFor::Day).handling("sam", 1000),
            Handling::Snoozed {
                by: "sam".into(),
                at: 1000,
                until: 1000 + 86_400_000
            }
        );
        assert_eq!(
            Taking::Snooze(SnoozeFor::Hour).handling("sam", 1000),
            Handling::Snoozed {
                by: "sam".into(),
                at: 1000,
                until: 1000 + 3_600_000
            }
        );
        assert_eq!(
            Taking::Acknowledge.handling("ana", 5),
            Handling::Acknowledged {
                by: "ana".into(),
                at: 5
            }
        );
    }

    #[test]
    fn a_note_may_be_left_out_but_not_run_long() {
        assert_eq!(optional_note("  "), Ok(None));
        assert_eq!(optional_note(" on it "), Ok(Some("on it")));
        assert!(matches!(
            optional_note(&"x".repeat(audit::MAX_REASON_CHARS + 1)),
            Err(ReasonError::TooLong { .. })
        ));
    }
}
