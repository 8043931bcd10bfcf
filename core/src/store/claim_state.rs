//! The claim's state machine ([`ClaimState`], drawn in `claim.rs`) in SQL: the state derived
//! from the stored columns, a WHERE condition per state that the indexes can serve, and the
//! re-drivable rule. Each is written once here and held to the Rust rules state by state by
//! `core/tests/store.rs` (`the_claim_state_is_the_same_in_sql`,
//! `the_redrivable_rule_is_the_same_in_sql`), on both backends.
//!
//! [`ClaimState`]: crate::ClaimState

use crate::ClaimState;

/// The state of a claim at the time in parameter `$now`, as text ([`ClaimState::as_str`]): the
/// stored status, except that `processing` is pending (no lease), running (a live lease) or
/// stale (its lease is over), and a failed claim an admin set aside is resolved.
///
/// [`ClaimState::as_str`]: crate::ClaimState::as_str
macro_rules! claim_state_sql {
    ($now:literal) => {
        concat!(
            "CASE WHEN status = 'failed' AND resolved_at IS NOT NULL THEN 'resolved' \
                  WHEN status <> 'processing' THEN status \
                  WHEN lease_expires_at IS NULL THEN 'pending' \
                  WHEN lease_expires_at > ",
            $now,
            " THEN 'running' ELSE 'stale' END"
        )
    };
}
pub(super) use claim_state_sql;

/// [`ClaimState::is_redrivable`] in SQL, at the time in parameter `$now`: pending (no
/// lease), stale (its lease is over) or failed and not resolved. Re-drive's compare-and-set
/// and the bulk selection both read it.
///
/// [`ClaimState::is_redrivable`]: crate::ClaimState::is_redrivable
macro_rules! redrivable_sql {
    ($now:literal) => {
        concat!(
            "(status IN ('processing', 'failed') AND resolved_at IS NULL \
              AND (lease_expires_at IS NULL OR lease_expires_at <= ",
            $now,
            "))"
        )
    };
}
pub(super) use redrivable_sql;

/// ` AND event_type IN (…)`: the types this version fulfils (and so adopts when an earlier
/// version recorded them as ignored). A claim of another type (a newer version's, during a
/// rolling deploy or after a rollback) waits for a version that knows it: never leased,
/// re-driven or failed here. A unit test keeps the list `EventKind::acting()`.
macro_rules! known_types {
    () => {
        concat!(
            " AND event_type IN ",
            $crate::store::claim_state::acting_types!(),
            " "
        )
    };
}

/// ` AND event_type NOT IN (…)`: the claims that wait for a newer version here.
macro_rules! unknown_types {
    () => {
        concat!(
            " AND event_type NOT IN ",
            $crate::store::claim_state::acting_types!(),
            " "
        )
    };
}

macro_rules! acting_types {
    () => {
        "('checkout.session.completed', \
         'checkout.session.async_payment_succeeded', 'checkout.session.async_payment_failed', \
         'charge.refunded', 'refund.failed', 'charge.dispute.created', 'charge.dispute.closed', \
         'invoice.paid', 'invoice.payment_failed', 'customer.subscription.created', \
         'customer.subscription.updated', 'customer.subscription.deleted', \
         'subscription_schedule.created', 'subscription_schedule.updated', \
         'subscription_schedule.released', 'subscription_schedule.canceled', \
         'subscription_schedule.completed', 'subscription_schedule.aborted')"
    };
}

pub(super) use {acting_types, known_types, unknown_types};

/// The claims in `state` at the time in parameter `now` (`$1`, say), as a condition on the
/// stored columns that the status and lease indexes serve (not on the derived state, which
/// no index could).
pub(super) fn in_state(state: ClaimState, now: &str) -> String {
    match state {
        ClaimState::Pending => "(status = 'processing' AND lease_expires_at IS NULL)".to_owned(),
        ClaimState::Running => format!("(status = 'processing' AND lease_expires_at > {now})"),
        ClaimState::Stale => format!("(status = 'processing' AND lease_expires_at <= {now})"),
        ClaimState::Processed => "status = 'processed'".to_owned(),
        ClaimState::Failed => "(status = 'failed' AND resolved_at IS NULL)".to_owned(),
        ClaimState::Resolved => "(status = 'failed' AND resolved_at IS NOT NULL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use crate::event_kind::EventKind;

    #[test]
    fn the_known_types_are_the_acting_ones() {
        let listed: Vec<&str> = known_types!().split('\'').skip(1).step_by(2).collect();
        let acting: Vec<&str> = EventKind::acting().map(EventKind::as_str).collect();
        assert_eq!(listed, acting);
        let unlisted: Vec<&str> = unknown_types!().split('\'').skip(1).step_by(2).collect();
        assert_eq!(unlisted, acting);
        assert!(unknown_types!().contains(" NOT IN "));
    }
}
