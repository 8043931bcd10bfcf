//! A customer's credits read back through the spend API, and what does not add up: the
//! balance is the sum of the ledger, also kind by kind (unlocked − revoked − spent − expired
//! plus adjusted), and no Idempotency-Key spent twice. `simulate` and the demo end their days
//! with it.

use serde_json::Value;

use crate::SimError;

/// The kinds of ledger rows, grouped as the identity reads them.
const UNLOCKED: &[&str] = &["unlock"];
const REVOKED: &[&str] = &["revoke", "restore", "dispute_hold", "dispute_release"];
const SPENT: &[&str] = &["spend"];
const EXPIRED: &[&str] = &["expire"];
const ADJUSTED: &[&str] = &["adjust"];

/// One customer's credits as the API shows them.
#[derive(Debug, Default)]
pub struct CustomerCredits {
    pub balance: i64,
    /// The Idempotency-Key of every spend in the ledger (a hold's capture included).
    pub spend_keys: Vec<String>,
    /// What did not add up, one line each.
    pub wrong: Vec<String>,
}

/// Reads `email`'s balance and every page of their ledger from `base` (a Claimcheck's URL).
pub async fn read_back(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    email: &str,
) -> Result<CustomerCredits, SimError> {
    let get = async |path: String| {
        let failed = |e: reqwest::Error| SimError::Failed(format!("credits of {email}: {e}"));
        client
            .get(format!("{base}{path}"))
            .bearer_auth(token)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(failed)?
            .json::<Value>()
            .await
            .map_err(failed)
    };
    let balance = get(format!("/api/customers/{email}/balance")).await?;
    let mut rows = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = get(format!("/api/customers/{email}/ledger?cursor={cursor}")).await?;
        rows.extend(page["rows"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    let sum = |kinds: &[&str]| -> i64 {
        rows.iter()
            .filter(|r| kinds.contains(&r["kind"].as_str().unwrap_or_default()))
            .map(|r| r["delta"].as_i64().unwrap_or(0))
            .sum()
    };
    let mut credits = CustomerCredits {
        balance: balance["balance"].as_i64().unwrap_or(i64::MIN),
        ..CustomerCredits::default()
    };
    let all: i64 = rows.iter().map(|r| r["delta"].as_i64().unwrap_or(0)).sum();
    let by_kind = sum(UNLOCKED) + sum(REVOKED) + sum(SPENT) + sum(EXPIRED) + sum(ADJUSTED);
    if credits.balance != all || all != by_kind {
        credits.wrong.push(format!(
            "{email}: balance {} but the ledger sums to {all} ({by_kind} by kind)",
            balance["balance"]
        ));
    }
    credits.spend_keys = rows
        .iter()
        .filter(|r| r["kind"] == "spend")
        .filter_map(|r| r["idempotency_key"].as_str().map(str::to_owned))
        .collect();
    let mut keys = credits.spend_keys.clone();
    keys.sort_unstable();
    keys.dedup();
    if keys.len() != credits.spend_keys.len() {
        credits.wrong.push(format!("{email}: a key spent twice"));
    }
    Ok(credits)
}
