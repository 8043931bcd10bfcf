//! Subscriptions as support reads them: the list (by status, plan, unpaid), and one
//! subscription with every period's grants and the invoices that paid them.

use serde::Serialize;

use super::Subscriptions;
use super::query::{Arg, sql};
use crate::error::StoreError;

/// A subscription as its events left it, with the credits its invoices granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct SubscriptionView {
    pub subscription_id: String,
    pub subscription_ref: Option<String>,
    pub customer_id: Option<String>,
    pub customer_email: Option<String>,
    /// The plan in force: its latest state's, or its latest grant's.
    pub plan: Option<String>,
    /// Stripe's status as its latest status event says; `None` before one came.
    pub status: Option<String>,
    /// Stripe's `created` (unix seconds) of that event.
    pub status_as_of: Option<i64>,
    /// Unix seconds.
    pub current_period_end: Option<i64>,
    /// 0 or 1 as both backends store it; `true` or `false` wherever it is shown.
    #[serde(serialize_with = "as_bool")]
    pub cancel_at_period_end: i64,
    /// The invoice whose payment failed and is not paid yet, and since when (unix seconds).
    pub unpaid_invoice: Option<String>,
    pub unpaid_since: Option<i64>,
    /// What its paid invoices granted, over every period.
    pub credits_granted: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// The plan its next renewal bills, as its latest status event names it.
    pub renewal_plan: Option<String>,
    /// The plan its latest paid period was granted at (the period's latest grant: a prorated
    /// change after the period's own), when that grant's time starts (the period's start, or
    /// the change's) and when the period ends (unix seconds).
    pub period_plan: Option<String>,
    pub paid_from: Option<i64>,
    pub paid_through: Option<i64>,
    /// A change of plan that takes effect at the period's end ([`SubscriptionView::scheduled`]).
    #[sqlx(skip)]
    pub scheduled_change: Option<ScheduledChange>,
    /// The price its latest status event names when no plan has it.
    #[serde(skip)]
    pub renewal_price_amount: Option<i64>,
    #[serde(skip)]
    pub renewal_price_currency: Option<String>,
    /// What its subscription schedule has next, as the schedule's latest event says: when
    /// (unix seconds), the plan it bills or, with none, its price.
    #[serde(skip)]
    pub scheduled_at: Option<i64>,
    #[serde(skip)]
    pub scheduled_plan: Option<String>,
    #[serde(skip)]
    pub scheduled_price_amount: Option<i64>,
    #[serde(skip)]
    pub scheduled_price_currency: Option<String>,
    /// A renewal at a price no plan has ([`SubscriptionView::unplanned`]).
    #[sqlx(skip)]
    pub unplanned_renewal: Option<UnplannedRenewal>,
}

fn as_bool<S: serde::Serializer>(flag: &i64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bool(*flag != 0)
}

/// A renewal Stripe will bill at a price none of the shop's plans has: its paid invoice will
/// grant nothing (and its claim fail, naming the price) until a plan with that price is
/// configured (`CLAIMCHECK_PLANS`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnplannedRenewal {
    /// Minor units.
    pub amount: i64,
    pub currency: String,
    /// The end of the current period, or the start of the schedule's phase that bills it
    /// (unix seconds).
    pub at: i64,
}

/// A plan change to come: Stripe bills `to` from the next renewal on (a price changed
/// without proration), or a subscription schedule's next phase moves the subscription to it.
/// Until `at`, `from` is in force (the plan the current period was paid at).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduledChange {
    pub from: String,
    pub to: String,
    /// The end of the paid period, or the phase's start (unix seconds).
    pub at: i64,
}

impl SubscriptionView {
    /// The change of plan to come: the one the subscription's price already names
    /// (`price_changed`), else the one its schedule's next phase bills
    /// (`phase_to_come`).
    pub fn scheduled(&self) -> Option<ScheduledChange> {
        self.price_changed().or_else(|| self.phase_to_come())
    }

    /// The change of plan waiting for the period's end: the latest status event names another
    /// plan than the one the current period was paid at, and no invoice has billed it yet
    /// (a prorated upgrade's paid invoice grants at the new plan, so it is not waiting). That
    /// status event must be no older than the latest grant's start: a prorated change's
    /// invoice processed before its own status event is not taken for a move back. A
    /// subscription that ends at the period's end, or has ended, renews at no plan.
    fn price_changed(&self) -> Option<ScheduledChange> {
        let to = self.renewal_plan.as_ref()?;
        let from = self.period_plan.as_ref()?;
        let at = self.paid_through?;
        let current = at >= self.current_period_end.unwrap_or(0);
        let told_since = self.status_as_of.unwrap_or(i64::MIN) >= self.paid_from.unwrap_or(0);
        (to != from && current && told_since && self.renews()).then(|| ScheduledChange {
            from: from.clone(),
            to: to.clone(),
            at,
        })
    }

    /// The change a subscription schedule has next: its latest event names a phase to come
    /// whose plan is not the one in force (the paid period's, else the subscription's), and
    /// no status event since the phase's start tells that it began (when it begins, Stripe
    /// changes the subscription's items and the schedule's current phase, and says both).
    fn phase_to_come(&self) -> Option<ScheduledChange> {
        let at = self.phase_not_begun()?;
        let to = self.scheduled_plan.as_ref()?;
        let from = self.period_plan.as_ref().or(self.plan.as_ref())?;
        (to != from && self.renews()).then(|| ScheduledChange {
            from: from.clone(),
            to: to.clone(),
            at,
        })
    }

    /// The start of the schedule's next phase, while no status event since then tells that it
    /// began.
    fn phase_not_begun(&self) -> Option<i64> {
        let at = self.scheduled_at?;
        let begun = self.status_as_of.is_some_and(|told| told >= at);
        (!begun).then_some(at)
    }

    /// A renewal at a price no plan has: its latest status event names no plan and it renews
    /// (not canceled, not ending at the period's end), or its schedule's next phase bills
    /// such a price.
    pub fn unplanned(&self) -> Option<UnplannedRenewal> {
        self.unplanned_now().or_else(|| {
            let at = self.phase_not_begun()?;
            let amount = self.scheduled_price_amount?;
            let currency = self.scheduled_price_currency.clone()?;
            self.renews().then_some(UnplannedRenewal {
                amount,
                currency,
                at,
            })
        })
    }

    /// The renewal at the period's end bills a price no plan has: its latest status event
    /// names no plan, and it renews (not canceled, not ending at the period's end).
    fn unplanned_now(&self) -> Option<UnplannedRenewal> {
        let amount = self.renewal_price_amount?;
        let currency = self.renewal_price_currency.clone()?;
        let at = self.current_period_end?;
        self.renews().then_some(UnplannedRenewal {
            amount,
            currency,
            at,
        })
    }

    /// Neither ended nor set to end at the period's end.
    fn renews(&self) -> bool {
        self.cancel_at_period_end == 0 && self.status.as_deref() != Some("canceled")
    }

    /// Fills in [`Self::scheduled_change`] and [`Self::unplanned_renewal`]; while a change
    /// waits, `plan` is the one in force (the paid period's), not the one its status event
    /// already names.
    fn with_schedule(mut self) -> SubscriptionView {
        self.unplanned_renewal = self.unplanned();
        self.scheduled_change = self.scheduled();
        if let Some(change) = &self.scheduled_change {
            self.plan = Some(change.from.clone());
        }
        self
    }
}

/// What one paid invoice granted one period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct GrantView {
    /// Unix seconds.
    pub period_start: i64,
    pub period_end: i64,
    /// `period` or `proration`.
    pub step: String,
    pub invoice_id: String,
    pub plan: String,
    pub from_plan: Option<String>,
    /// What the invoice entitled the period to, and what the period's cap let through.
    pub entitled: i64,
    pub credits: i64,
    pub ceiling: i64,
    pub event_id: String,
    /// Unix ms.
    pub created_at: i64,
    /// What refunds and disputes took back from the invoice's credits, net of what came back
    /// (≤ 0); the invoice's, on each of its grants.
    pub revoked: i64,
}

/// Which subscriptions a list shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionFilter {
    pub status: Option<String>,
    /// Those in the plan, or whose paid period is in it (a change at the period's end is
    /// listed under both plans).
    pub plan: Option<String>,
    /// Only those whose renewal is unpaid or whose status is `past_due` or `unpaid`.
    pub past_due: bool,
    pub limit: i64,
}

const COLUMNS: &str = "s.subscription_id, s.subscription_ref, s.customer_id, s.customer_email, \
    s.plan, s.status, s.status_as_of, s.current_period_end, \
    CAST(s.cancel_at_period_end AS BIGINT) AS cancel_at_period_end, s.unpaid_invoice, \
    s.unpaid_since, \
    (SELECT CAST(COALESCE(SUM(g.credits), 0) AS BIGINT) FROM subscription_grants g \
     WHERE g.subscription_id = s.subscription_id) AS credits_granted, \
    s.created_at, s.updated_at, s.renewal_plan, \
    (SELECT g.plan FROM subscription_grants g WHERE g.subscription_id = s.subscription_id \
     ORDER BY g.period_end DESC, g.period_start DESC, g.created_at DESC, g.invoice_id DESC \
     LIMIT 1) AS period_plan, \
    (SELECT CAST(g.period_start AS BIGINT) FROM subscription_grants g \
     WHERE g.subscription_id = s.subscription_id \
     ORDER BY g.period_end DESC, g.period_start DESC, g.created_at DESC, g.invoice_id DESC \
     LIMIT 1) AS paid_from, \
    (SELECT CAST(MAX(g.period_end) AS BIGINT) FROM subscription_grants g \
     WHERE g.subscription_id = s.subscription_id) AS paid_through, \
    s.renewal_price_amount, s.renewal_price_currency, s.scheduled_at, s.scheduled_plan, \
    s.scheduled_price_amount, s.scheduled_price_currency";

impl Subscriptions<'_> {
    /// Subscriptions, the most recently changed first.
    pub async fn list(
        self,
        filter: &SubscriptionFilter,
    ) -> Result<Vec<SubscriptionView>, StoreError> {
        // A plan names those in it, those whose paid period is in it and those a schedule
        // moves to it: a subscription moving between two plans at the period's end is in
        // both lists (shown `a → b`).
        let statement = format!(
            "SELECT v.* FROM (SELECT {COLUMNS} FROM subscriptions s) v \
             WHERE ($1 = '' OR v.status = $1) \
               AND ($2 = '' OR v.plan = $2 OR v.period_plan = $2 OR v.scheduled_plan = $2) \
               AND ($3 = 0 OR v.unpaid_invoice IS NOT NULL \
                    OR v.status IN ('past_due', 'unpaid')) \
             ORDER BY v.updated_at DESC, v.subscription_id LIMIT $4"
        );
        let found: Vec<SubscriptionView> = self
            .pool
            .on()
            .all(
                sql(&statement)
                    .bind(filter.status.clone().unwrap_or_default())
                    .bind(filter.plan.clone().unwrap_or_default())
                    .bind(i64::from(filter.past_due))
                    .bind(filter.limit.clamp(1, 1000)),
            )
            .await?;
        Ok(found
            .into_iter()
            .map(SubscriptionView::with_schedule)
            .collect())
    }

    /// A subscription by its Stripe id (`sub_…`) or the shop's reference.
    pub async fn get(self, id_or_ref: &str) -> Result<Option<SubscriptionView>, StoreError> {
        let statement = format!(
            "SELECT {COLUMNS} FROM subscriptions s \
             WHERE s.subscription_id = $1 OR s.subscription_ref = $1 \
             ORDER BY (s.subscription_id = $1) DESC, s.created_at DESC LIMIT 1"
        );
        let found: Option<SubscriptionView> = self
            .pool
            .on()
            .optional(sql(&statement).bind(id_or_ref))
            .await?;
        Ok(found.map(SubscriptionView::with_schedule))
    }

    /// The subscriptions of `email`, or asked for them through the order API, the latest
    /// first.
    pub async fn of_customer(self, email: &str) -> Result<Vec<SubscriptionView>, StoreError> {
        let statement = format!(
            "SELECT {COLUMNS} FROM subscriptions s WHERE s.customer_email = $1 \
                OR s.subscription_ref IN (SELECT c.subscription_ref FROM subscription_checkouts c \
                                          WHERE c.customer_email = $1) \
             ORDER BY s.created_at DESC, s.subscription_id LIMIT 100"
        );
        let found: Vec<SubscriptionView> = self.pool.on().all(sql(&statement).bind(email)).await?;
        Ok(found
            .into_iter()
            .map(SubscriptionView::with_schedule)
            .collect())
    }

    /// The subscription the shop knows by `reference` (the latest, should Stripe hold two).
    pub async fn by_ref(self, reference: &str) -> Result<Option<SubscriptionView>, StoreError> {
        let statement = format!(
            "SELECT {COLUMNS} FROM subscriptions s WHERE s.subscription_ref = $1 \
             ORDER BY s.created_at DESC, s.subscription_id LIMIT 1"
        );
        let found: Option<SubscriptionView> = self
            .pool
            .on()
            .optional(sql(&statement).bind(reference))
            .await?;
        Ok(found.map(SubscriptionView::with_schedule))
    }

    /// Every grant of a subscription, the latest period first.
    pub async fn grants(self, subscription_id: &str) -> Result<Vec<GrantView>, StoreError> {
        const STATEMENT: &str = "SELECT g.period_start, g.period_end, g.step, g.invoice_id, \
            g.plan, g.from_plan, g.entitled, g.credits, g.ceiling, g.event_id, g.created_at, \
            (SELECT CAST(COALESCE(SUM(l.delta), 0) AS BIGINT) FROM credit_ledger l \
             WHERE l.order_id = g.invoice_id AND l.kind <> 'unlock') AS revoked \
            FROM subscription_grants g WHERE g.subscription_id = $1 \
            ORDER BY g.period_end DESC, g.period_start DESC, g.created_at DESC, g.invoice_id";
        Ok(self
            .pool
            .on()
            .all(sql(STATEMENT).bind(Arg::from(subscription_id)))
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> SubscriptionView {
        SubscriptionView {
            subscription_id: "sub_1".into(),
            subscription_ref: None,
            customer_id: None,
            customer_email: None,
            plan: Some("pro".into()),
            status: Some("active".into()),
            status_as_of: Some(10),
            current_period_end: Some(2_000),
            cancel_at_period_end: 0,
            unpaid_invoice: None,
            unpaid_since: None,
            credits_granted: 40,
            created_at: 0,
            updated_at: 0,
            renewal_plan: Some("pro".into()),
            period_plan: Some("monthly".into()),
            paid_from: Some(0),
            paid_through: Some(2_000),
            scheduled_change: None,
            renewal_price_amount: None,
            renewal_price_currency: None,
            unplanned_renewal: None,
            scheduled_at: None,
            scheduled_plan: None,
            scheduled_price_amount: None,
            scheduled_price_currency: None,
        }
    }

    #[test]
    fn a_renewal_at_a_price_no_plan_has_is_shown_while_the_subscription_renews() {
        let unplanned = SubscriptionView {
            renewal_plan: None,
            renewal_price_amount: Some(5_900),
            renewal_price_currency: Some("chf".into()),
            ..view()
        };
        assert_eq!(
            unplanned.clone().with_schedule().unplanned_renewal,
            Some(UnplannedRenewal {
                amount: 5_900,
                currency: "chf".into(),
                at: 2_000
            })
        );
        for ending in [
            SubscriptionView {
                cancel_at_period_end: 1,
                ..unplanned.clone()
            },
            SubscriptionView {
                status: Some("canceled".into()),
                ..unplanned.clone()
            },
        ] {
            assert_eq!(ending.with_schedule().unplanned_renewal, None);
        }
        assert_eq!(view().with_schedule().unplanned_renewal, None);
    }

    #[test]
    fn a_change_waits_only_while_the_paid_period_runs_and_the_subscription_renews() {
        let waiting = view().with_schedule();
        assert_eq!(
            waiting.scheduled_change,
            Some(ScheduledChange {
                from: "monthly".into(),
                to: "pro".into(),
                at: 2_000
            })
        );
        assert_eq!(waiting.plan.as_deref(), Some("monthly"));
        // The same plan, no plan named, the renewal not paid yet, or no renewal: nothing waits.
        let cases = [
            SubscriptionView {
                renewal_plan: Some("monthly".into()),
                ..view()
            },
            SubscriptionView {
                renewal_plan: None,
                ..view()
            },
            SubscriptionView {
                current_period_end: Some(3_000),
                ..view()
            },
            SubscriptionView {
                cancel_at_period_end: 1,
                ..view()
            },
            SubscriptionView {
                status: Some("canceled".into()),
                ..view()
            },
            SubscriptionView {
                period_plan: None,
                paid_from: None,
                paid_through: None,
                ..view()
            },
            // A prorated change's grant newer than the status event: its own event is to come.
            SubscriptionView {
                paid_from: Some(11),
                ..view()
            },
        ];
        for case in cases {
            let shown = case.clone().with_schedule();
            assert_eq!(shown.scheduled_change, None, "{case:?}");
            assert_eq!(shown.plan, case.plan);
        }
    }

    #[test]
    fn a_schedules_next_phase_waits_until_a_status_event_tells_it_began() {
        // Paid at pro for the period; the schedule moves it to monthly at 2,000.
        let steady = SubscriptionView {
            plan: Some("pro".into()),
            period_plan: Some("pro".into()),
            renewal_plan: Some("pro".into()),
            scheduled_at: Some(2_000),
            scheduled_plan: Some("monthly".into()),
            ..view()
        };
        let shown = steady.clone().with_schedule();
        assert_eq!(
            shown.scheduled_change,
            Some(ScheduledChange {
                from: "pro".into(),
                to: "monthly".into(),
                at: 2_000
            })
        );
        assert_eq!(shown.plan.as_deref(), Some("pro"));
        let cases = [
            // The phase began: a status event at or after its start.
            SubscriptionView {
                status_as_of: Some(2_000),
                ..steady.clone()
            },
            // Nothing scheduled, or the plan in force again.
            SubscriptionView {
                scheduled_at: None,
                scheduled_plan: None,
                ..steady.clone()
            },
            SubscriptionView {
                scheduled_plan: Some("pro".into()),
                ..steady.clone()
            },
            // No renewal to come.
            SubscriptionView {
                cancel_at_period_end: 1,
                ..steady.clone()
            },
        ];
        for case in cases {
            assert_eq!(
                case.clone().with_schedule().scheduled_change,
                None,
                "{case:?}"
            );
        }
        // A phase at a price no plan has is an unplanned renewal from its start.
        let unplanned = SubscriptionView {
            scheduled_plan: None,
            scheduled_price_amount: Some(1_500),
            scheduled_price_currency: Some("chf".into()),
            ..steady
        }
        .with_schedule();
        assert_eq!(unplanned.scheduled_change, None);
        assert_eq!(
            unplanned.unplanned_renewal,
            Some(UnplannedRenewal {
                amount: 1_500,
                currency: "chf".into(),
                at: 2_000
            })
        );
    }
}
