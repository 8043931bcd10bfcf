//! Stripe's subscription schedules, read from one `subscription_schedule.*` event (no I/O):
//! the phase a schedule moves its subscription to next, and what that phase will bill.
//!
//! A schedule changes its subscription only when a phase begins (the subscription's own
//! `customer.subscription.updated` then says so); before that, its events are the only
//! place the change shows. Their phases name prices by id alone (`phases[].items[].price`),
//! so what a phase bills is known once its prices are read ([`NextPhase::price`], from the
//! payload when Stripe expanded them, else from Stripe by the worker).

use serde::Deserialize;

use super::{BillingError, Plans};
use crate::fulfilment::{Price, expandable_id};

/// What one schedule event says of its subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleFacts {
    pub schedule_id: String,
    /// The subscription it governs (`subscription`, or `released_subscription` once it let
    /// it go); `None` for a schedule that has not started one yet.
    pub subscription_id: Option<String>,
    /// Stripe's `created` of the event: an older state never overwrites a newer one.
    pub as_of: i64,
    /// The phase that begins next, while the schedule is active and has one.
    pub next: Option<NextPhase>,
}

/// A phase that has not begun.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextPhase {
    /// Its start (unix seconds).
    pub starts_at: i64,
    pub items: Vec<PhaseItem>,
}

/// One item of a phase: a price, by id, and how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseItem {
    pub price_id: String,
    pub quantity: i64,
    /// What the price costs, when known (an expanded price, or one read from Stripe).
    pub price: Option<Price>,
}

/// What a schedule's next phase bills, in the shop's plans: the plan its items name, else
/// the first item's price (a renewal no plan grants for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledPhase {
    /// Its start (unix seconds).
    pub at: i64,
    pub plan: Option<String>,
    pub unmatched_price: Option<Price>,
}

impl NextPhase {
    /// The ids of its prices not known yet, each once.
    pub fn unpriced(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .items
            .iter()
            .filter(|item| item.price.is_none())
            .map(|item| item.price_id.clone())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Records what `price_id` costs on each item that bills it.
    pub fn price(&mut self, price_id: &str, price: &Price) {
        for item in self.items.iter_mut().filter(|i| i.price_id == price_id) {
            item.price = Some(price.clone());
        }
    }

    /// What it bills, named as a subscription's items are (`plan_of_items`);
    /// `None` while a price is unknown.
    pub fn named(&self, plans: &Plans) -> Option<ScheduledPhase> {
        let priced: Vec<(Price, i64)> = self
            .items
            .iter()
            .map(|item| Some((item.price.clone()?, item.quantity)))
            .collect::<Option<_>>()?;
        let (plan, unmatched_price) = super::plan_of_items(&priced, plans);
        Some(ScheduledPhase {
            at: self.starts_at,
            plan,
            unmatched_price,
        })
    }
}

#[derive(Deserialize)]
struct ScheduleEvent {
    created: i64,
    data: ScheduleData,
}

#[derive(Deserialize)]
struct ScheduleData {
    object: RawSchedule,
}

#[derive(Deserialize)]
struct RawSchedule {
    id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    subscription: Option<serde_json::Value>,
    #[serde(default)]
    released_subscription: Option<serde_json::Value>,
    #[serde(default)]
    current_phase: Option<CurrentPhase>,
    #[serde(default)]
    phases: Vec<RawPhase>,
}

#[derive(Deserialize)]
struct CurrentPhase {
    end_date: i64,
}

#[derive(Deserialize)]
struct RawPhase {
    start_date: i64,
    #[serde(default)]
    items: Vec<RawPhaseItem>,
}

#[derive(Deserialize)]
struct RawPhaseItem {
    #[serde(default)]
    price: Option<serde_json::Value>,
    #[serde(default)]
    quantity: Option<i64>,
}

/// Reads the schedule of a `subscription_schedule.*` event. Only an `active` schedule has a
/// phase to come: the first that starts when its current phase ends (a released, canceled,
/// completed or aborted schedule changes nothing more).
pub fn read_schedule(payload: &str) -> Result<ScheduleFacts, BillingError> {
    let event: ScheduleEvent =
        serde_json::from_str(payload).map_err(|e| BillingError::Payload(e.to_string()))?;
    let raw = event.data.object;
    let active = raw.status.as_deref() == Some("active");
    let next = match (&raw.current_phase, active) {
        (Some(current), true) => raw
            .phases
            .iter()
            .filter(|phase| phase.start_date >= current.end_date)
            .min_by_key(|phase| phase.start_date),
        _ => None,
    };
    let next = next
        .map(|phase| {
            Ok::<_, BillingError>(NextPhase {
                starts_at: phase.start_date,
                items: phase_items(&raw.id, phase)?,
            })
        })
        .transpose()?;
    Ok(ScheduleFacts {
        schedule_id: raw.id,
        subscription_id: expandable_id(raw.subscription)
            .or(expandable_id(raw.released_subscription)),
        as_of: event.created,
        next,
    })
}

/// A phase's items, each by its price's id (and its amount, when the price is expanded).
fn phase_items(schedule_id: &str, phase: &RawPhase) -> Result<Vec<PhaseItem>, BillingError> {
    phase
        .items
        .iter()
        .map(|item| {
            let price_id = expandable_id(item.price.clone()).ok_or_else(|| {
                BillingError::Payload(format!(
                    "schedule {schedule_id}: a phase item names no price"
                ))
            })?;
            Ok(PhaseItem {
                price: item.price.as_ref().and_then(expanded_price),
                price_id,
                quantity: item.quantity.unwrap_or(1),
            })
        })
        .collect()
}

/// The amount and currency of an expanded price object (`None` for an id).
pub fn expanded_price(price: &serde_json::Value) -> Option<Price> {
    Some(Price {
        amount: price.get("unit_amount")?.as_i64()?,
        currency: price.get("currency")?.as_str()?.to_ascii_lowercase(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plans() -> Plans {
        "thesis-monthly=40:3900:chf:month, thesis-pro=100:8900:chf:month"
            .parse()
            .unwrap()
    }

    /// A schedule made from a subscription on thesis-pro, moving it to thesis-monthly at the
    /// period's end (Stripe's shape: phases name prices by id).
    fn event(status: &str, current_end: Option<i64>) -> serde_json::Value {
        serde_json::json!({
            "id": "evt_1", "object": "event", "type": "subscription_schedule.updated",
            "created": 1_700_000_100, "livemode": false,
            "data": { "object": {
                "id": "sub_sched_1", "object": "subscription_schedule", "status": status,
                "subscription": "sub_1", "released_subscription": null, "end_behavior": "release",
                "current_phase": current_end.map(|end| serde_json::json!({
                    "start_date": 1_700_000_000, "end_date": end })),
                "phases": [
                    { "start_date": 1_700_000_000, "end_date": 1_702_592_000,
                      "items": [{ "price": "price_pro", "quantity": 1 }] },
                    { "start_date": 1_702_592_000, "end_date": 1_705_184_000,
                      "items": [{ "price": "price_monthly", "quantity": 1 }] }
                ]
            }}
        })
    }

    #[test]
    fn an_active_schedule_names_the_phase_that_starts_when_the_current_one_ends() {
        let mut facts = read_schedule(&event("active", Some(1_702_592_000)).to_string()).unwrap();
        assert_eq!(facts.subscription_id.as_deref(), Some("sub_1"));
        assert_eq!(facts.as_of, 1_700_000_100);
        let next = facts.next.as_mut().unwrap();
        assert_eq!(next.starts_at, 1_702_592_000);
        assert_eq!(next.unpriced(), vec!["price_monthly".to_owned()]);
        assert_eq!(
            next.named(&plans()),
            None,
            "not named before its price is known"
        );
        let price = Price {
            amount: 3900,
            currency: "chf".into(),
        };
        next.price("price_monthly", &price);
        assert!(next.unpriced().is_empty());
        assert_eq!(
            next.named(&plans()),
            Some(ScheduledPhase {
                at: 1_702_592_000,
                plan: Some("thesis-monthly".into()),
                unmatched_price: None
            })
        );
        // A price no plan has is named as such.
        next.price(
            "price_monthly",
            &Price {
                amount: 100,
                currency: "chf".into(),
            },
        );
        let named = next.named(&plans()).unwrap();
        assert_eq!(named.plan, None);
        assert_eq!(named.unmatched_price.map(|p| p.amount), Some(100));
    }

    #[test]
    fn the_last_phase_running_or_a_schedule_let_go_has_nothing_to_come() {
        let last = read_schedule(&event("active", Some(1_705_184_000)).to_string()).unwrap();
        assert_eq!(last.next, None);
        let mut released = event("released", None);
        released["data"]["object"]["subscription"] = serde_json::Value::Null;
        released["data"]["object"]["released_subscription"] = "sub_1".into();
        let released = read_schedule(&released.to_string()).unwrap();
        assert_eq!(
            (released.subscription_id.as_deref(), released.next),
            (Some("sub_1"), None)
        );
        let mut waiting = event("not_started", None);
        waiting["data"]["object"]["subscription"] = serde_json::Value::Null;
        assert_eq!(
            read_schedule(&waiting.to_string()).unwrap().subscription_id,
            None
        );
    }

    #[test]
    fn an_expanded_price_is_read_from_the_payload() {
        let mut expanded = event("active", Some(1_702_592_000));
        expanded["data"]["object"]["phases"][1]["items"][0]["price"] = serde_json::json!({
            "id": "price_monthly", "object": "price", "unit_amount": 3900, "currency": "CHF" });
        let facts = read_schedule(&expanded.to_string()).unwrap();
        let next = facts.next.unwrap();
        assert!(next.unpriced().is_empty());
        assert_eq!(
            next.named(&plans()).unwrap().plan.as_deref(),
            Some("thesis-monthly")
        );
        assert!(read_schedule("{\"data\":1}").is_err());
    }
}
