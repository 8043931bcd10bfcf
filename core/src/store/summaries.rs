//! What a line of a claims list says about each claim besides its own columns: whose it is
//! (the e-mail and the shop's order id its payload names, from the search terms written at
//! claim time) and what was paid (read from the payload, while it is kept), so that a stuck
//! payment reads as a customer and an amount, not only an event id.

use std::collections::HashMap;

use serde::Deserialize;

use super::Claims;
use super::query::{Arg, sql};
use crate::error::StoreError;

/// Who and how much, for one claim; what its payload does not name stays `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimSummary {
    pub customer_email: Option<String>,
    pub order_id: Option<String>,
    /// In the currency's minor unit.
    pub amount: Option<i64>,
    pub currency: Option<String>,
}

/// Claims summarised in one call at most (a list page is 50).
const MAX_SUMMARIES: usize = 200;

#[derive(Deserialize)]
struct Paid {
    data: PaidData,
}

#[derive(Deserialize)]
struct PaidData {
    object: PaidObject,
}

/// A session's `amount_total`, else a charge's or payment intent's `amount`; read leniently.
#[derive(Deserialize)]
struct PaidObject {
    #[serde(default)]
    amount_total: Option<serde_json::Value>,
    #[serde(default)]
    amount: Option<serde_json::Value>,
    #[serde(default)]
    currency: Option<serde_json::Value>,
}

impl Claims<'_> {
    /// The summaries of `event_ids` (at most [`MAX_SUMMARIES`]; the rest are left out).
    pub async fn summaries(
        self,
        event_ids: &[String],
    ) -> Result<HashMap<String, ClaimSummary>, StoreError> {
        let ids = &event_ids[..event_ids.len().min(MAX_SUMMARIES)];
        let mut found: HashMap<String, ClaimSummary> = HashMap::new();
        if ids.is_empty() {
            return Ok(found);
        }
        let list = (1..=ids.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let args = || {
            ids.iter()
                .map(|id| Arg::from(id.clone()))
                .collect::<Vec<_>>()
        };
        let terms = format!(
            "SELECT event_id, kind, term FROM claim_terms \
             WHERE event_id IN ({list}) AND kind IN ('email', 'order') ORDER BY term"
        );
        let rows: Vec<(String, String, String)> =
            self.pool.on().all(sql(&terms).bind_all(args())).await?;
        for (event_id, kind, term) in rows {
            let summary = found.entry(event_id).or_default();
            let slot = if kind == "email" {
                &mut summary.customer_email
            } else {
                &mut summary.order_id
            };
            slot.get_or_insert(term);
        }
        let payloads = format!(
            "SELECT event_id, payload FROM processed_stripe_events WHERE event_id IN ({list})"
        );
        let rows: Vec<(String, Option<String>)> =
            self.pool.on().all(sql(&payloads).bind_all(args())).await?;
        for (event_id, payload) in rows {
            let Some(paid) = payload
                .filter(|p| !p.is_empty())
                .and_then(|p| serde_json::from_str::<Paid>(&p).ok())
            else {
                continue;
            };
            let object = paid.data.object;
            let amount = object
                .amount_total
                .or(object.amount)
                .and_then(|v| v.as_i64());
            let summary = found.entry(event_id).or_default();
            summary.amount = amount;
            summary.currency = object.currency.and_then(|c| c.as_str().map(str::to_owned));
        }
        Ok(found)
    }
}
