//! The refund page: an order's money, what is left to refund, and the facts and balance the
//! preview of a refund is computed from.

use super::*;
use claimcheck_core::language::Language;
use claimcheck_core::money::MoneyFacts;

/// What the refund form shows and previews from. The preview runs in the browser too, so
/// the facts travel as the engine holds them, not as words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundDraft {
    pub order_id: String,
    pub status: OrderStatus,
    pub customer_email: Option<String>,
    pub payment_intent_id: Option<String>,
    /// The order's currency (`chf`): amounts are typed and shown in it.
    pub currency: String,
    /// What was paid, formatted (`CHF 49.00`), when known.
    pub paid: Option<String>,
    /// Refunded and not failed, formatted.
    pub refunded: Option<String>,
    /// What is left to refund, in minor units; `None` when nothing can be refunded.
    pub refundable: Option<i64>,
    /// Credits the order sells, and those it holds now.
    pub credits: i64,
    pub credits_granted: i64,
    /// The customer's balance over all their orders (this order's credits when it names
    /// no customer).
    pub balance: i64,
    pub facts: MoneyFacts,
    /// The reader's language: the preview writes money their way.
    pub language: Language,
    /// The longest reason the audit log keeps, in characters.
    pub reason_max: usize,
}

#[server(prefix = "/dashboard/fn", endpoint = "refund_draft")]
pub async fn get_refund_draft(order_id: String) -> Result<RefundDraft, ServerFnError> {
    // Any role reads it, as it reads the order and the customer; only admins are given
    // the form (the page) and may send it (the action).
    let (store, _) = server::require(Role::Viewer).await?;
    let order = server::order(&store, &order_id).await?;
    let customer = order
        .customer_email
        .as_deref()
        .or(order.customer_id.as_deref());
    let balance = match customer {
        Some(who) => {
            store
                .orders()
                .customer(who)
                .await
                .map_err(server::unavailable)?
                .balance
        }
        None => order.credits_granted,
    };
    let reader = crate::i18n::reader();
    let currency = order.currency.clone().unwrap_or_else(|| "chf".into());
    let money = |minor: i64| reader.money(minor, &currency);
    Ok(RefundDraft {
        paid: order.amount.map(money),
        refunded: (order.amount_refunded > 0).then(|| money(order.amount_refunded)),
        refundable: order.refundable().ok().filter(|left| *left > 0),
        facts: order.money_facts(),
        language: reader.language,
        reason_max: claimcheck_core::audit::MAX_REASON_CHARS,
        order_id: order.order_id,
        status: order.status,
        customer_email: order.customer_email,
        payment_intent_id: order.payment_intent_id,
        credits: order.credits,
        credits_granted: order.credits_granted,
        balance,
        currency,
    })
}
