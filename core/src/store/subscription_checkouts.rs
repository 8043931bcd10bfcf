//! Subscriptions the shop asks for through the order API, before Stripe knows them: the
//! shop's reference, the plan and customer, and the Checkout Session opened for them (by
//! generation, like an order's: an expired session is replaced under the next key).

use serde::Serialize;

use super::Subscriptions;
use super::outgoing::OrderCreation;
use super::query::sql;
use crate::error::StoreError;
use crate::ids::SubscriptionRef;

/// A subscription the shop asks for: it exists before Stripe knows about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscriptionCheckout {
    pub reference: SubscriptionRef,
    pub plan: String,
    pub customer_email: String,
    /// The plan as sold: credits per period, price (minor units), currency, interval.
    pub credits: i64,
    pub amount: i64,
    pub currency: String,
    pub interval: String,
}

/// What the order API recorded for a subscription reference. Field names are a contract for
/// scripts (`--json`) and the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct SubscriptionCheckoutView {
    pub subscription_ref: String,
    pub plan: String,
    pub customer_email: String,
    pub credits: i64,
    pub amount: i64,
    pub currency: String,
    pub billing_interval: String,
    pub checkout_generation: i64,
    pub checkout_session_id: Option<String>,
    pub checkout_url: Option<String>,
    /// Unix ms.
    pub checkout_expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const INSERT: &str = "\
    INSERT INTO subscription_checkouts (subscription_ref, plan, customer_email, credits, amount, \
                                        currency, billing_interval, created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
    ON CONFLICT (subscription_ref) DO NOTHING";

const COLUMNS: &str = "subscription_ref, plan, customer_email, credits, amount, currency, \
    billing_interval, checkout_generation, checkout_session_id, checkout_url, \
    checkout_expires_at, created_at, updated_at";

/// The first session of a generation wins.
const SET_CHECKOUT: &str = "\
    UPDATE subscription_checkouts SET checkout_session_id = COALESCE(checkout_session_id, $2), \
        checkout_url = COALESCE(checkout_url, $3), \
        checkout_expires_at = COALESCE(checkout_expires_at, $5), updated_at = $4 \
    WHERE subscription_ref = $1";

/// A compare-and-set on the generation: of two callers one moves it.
const NEXT_CHECKOUT: &str = "\
    UPDATE subscription_checkouts SET checkout_generation = $2 + 1, checkout_session_id = NULL, \
        checkout_url = NULL, checkout_expires_at = NULL, updated_at = $3 \
    WHERE subscription_ref = $1 AND checkout_generation = $2";

const MARK_EXPIRED: &str = "\
    UPDATE stripe_requests SET expired_at = $3, updated_at = $3 \
    WHERE order_id = $1 AND operation = 'subscription_checkout' AND idempotency_key = $2 \
      AND expired_at IS NULL";

impl Subscriptions<'_> {
    /// Records a subscription the shop asked for, unless its reference exists. An existing
    /// one with the same plan and customer is the same request again.
    pub async fn ask(
        self,
        new: &NewSubscriptionCheckout,
        now: i64,
    ) -> Result<OrderCreation, StoreError> {
        let email = new.customer_email.trim().to_lowercase();
        let inserted = self
            .pool
            .on()
            .execute(
                sql(INSERT)
                    .bind(new.reference.as_str())
                    .bind(new.plan.as_str())
                    .bind(email.as_str())
                    .bind(new.credits)
                    .bind(new.amount)
                    .bind(new.currency.as_str())
                    .bind(new.interval.as_str())
                    .bind(now),
            )
            .await?;
        if inserted == 1 {
            return Ok(OrderCreation::Created);
        }
        match self.checkout(&new.reference).await? {
            Some(existing) if existing.plan == new.plan && existing.customer_email == email => {
                Ok(OrderCreation::Existing)
            }
            _ => Ok(OrderCreation::Conflict),
        }
    }

    /// What the order API recorded for `reference`.
    pub async fn checkout(
        self,
        reference: &SubscriptionRef,
    ) -> Result<Option<SubscriptionCheckoutView>, StoreError> {
        let statement =
            format!("SELECT {COLUMNS} FROM subscription_checkouts WHERE subscription_ref = $1");
        Ok(self
            .pool
            .on()
            .optional(sql(&statement).bind(reference.as_str()))
            .await?)
    }

    /// What the order API was asked for `email` that Stripe has not told of yet (no
    /// subscription carries its reference), the latest first.
    pub async fn asked_by(self, email: &str) -> Result<Vec<SubscriptionCheckoutView>, StoreError> {
        let statement = format!(
            "SELECT {COLUMNS} FROM subscription_checkouts c WHERE c.customer_email = $1 \
               AND NOT EXISTS (SELECT 1 FROM subscriptions s \
                               WHERE s.subscription_ref = c.subscription_ref) \
             ORDER BY c.created_at DESC, c.subscription_ref LIMIT 100"
        );
        Ok(self.pool.on().all(sql(&statement).bind(email)).await?)
    }

    /// Remembers the Checkout Session opened for `reference` and when it expires (unix ms);
    /// the first one of a generation wins.
    pub async fn set_checkout_session(
        self,
        reference: &SubscriptionRef,
        session_id: &str,
        url: Option<&str>,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        self.pool
            .on()
            .execute(
                sql(SET_CHECKOUT)
                    .bind(reference.as_str())
                    .bind(session_id)
                    .bind(url)
                    .bind(now)
                    .bind(expires_at),
            )
            .await?;
        Ok(())
    }

    /// The session of `generation` expired unpaid: the reference moves to the next
    /// generation (unless another caller moved it already) and the old session's request is
    /// marked expired.
    pub async fn expire_checkout(
        self,
        reference: &SubscriptionRef,
        generation: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        let old_key = crate::stripe::Operation::SubscriptionCheckout { generation }.key(reference);
        let mut tx = self.pool.begin().await?;
        let moved = tx
            .on()
            .execute(
                sql(NEXT_CHECKOUT)
                    .bind(reference.as_str())
                    .bind(generation)
                    .bind(now),
            )
            .await?;
        if moved == 1 {
            tx.on()
                .execute(
                    sql(MARK_EXPIRED)
                        .bind(reference.as_str())
                        .bind(old_key.as_str())
                        .bind(now),
                )
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
