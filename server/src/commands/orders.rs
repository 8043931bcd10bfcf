//! `claimcheck orders`: show an order with its ledger and Stripe requests; refund it.

use claimcheck_core::money::format_money;
use claimcheck_core::ops::Actor;
use claimcheck_core::{OrderId, payments};
use clap::Subcommand;

use super::open;
use super::output::{Output, print, print_json, table, time};
use crate::config::flags::{DatabaseArgs, StripeArgs};
use crate::error::ServerError;

#[derive(Debug, Subcommand)]
pub enum OrdersCommand {
    /// An order, its credits, ledger and the Stripe requests made for it.
    Show {
        order_id: OrderId,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Refund a paid order, in full or in part, and revoke its credits in proportion
    /// (Idempotency-Key refund:<order_id>:<refunded total after it>: a refund that got no
    /// answer is sent again under its key before any new one).
    Refund {
        order_id: OrderId,
        /// How much, in the currency's minor unit (2450 for CHF 24.50); what is left if absent.
        #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
        amount: Option<i64>,
        /// Why (kept in the audit log).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        stripe: StripeArgs,
    },
}

pub async fn run(command: OrdersCommand) -> Result<(), ServerError> {
    let (order_id, output, database) = match command {
        OrdersCommand::Show {
            order_id,
            output,
            database,
        } => (order_id, output, database),
        OrdersCommand::Refund {
            order_id,
            amount,
            reason,
            output,
            database,
            stripe,
        } => return refund(order_id, amount, reason, output, database, stripe).await,
    };
    let store = open(&database).await?;
    let order = store
        .orders()
        .get(&order_id)
        .await
        .map_err(database.error())?
        .ok_or_else(|| ServerError::Command(format!("no order {order_id}")))?;
    if output.json {
        return print_json(&order);
    }
    let money = |minor: i64| match &order.currency {
        Some(currency) => format_money(minor, currency),
        None => format!("{minor} (minor units)"),
    };
    let mut text = format!(
        "order            {}\nstatus           {}\npayment status   {}\ncredits granted  {} (of {})\n\
         paid             {}\nrefunded         {}\ndispute          {}\n\
         customer         {}\ncheckout session {}\npayment intent   {}\n",
        order.order_id,
        order.status,
        order.payment_status,
        order.credits_granted,
        order.credits,
        order.amount.map(money).unwrap_or_else(|| "-".into()),
        money(order.amount_refunded),
        order.dispute_status.as_deref().unwrap_or("-"),
        order
            .customer_email
            .as_deref()
            .or(order.customer_id.as_deref())
            .unwrap_or("-"),
        order.checkout_session_id.as_deref().unwrap_or("-"),
        order.payment_intent_id.as_deref().unwrap_or("-"),
    );
    let rows: Vec<Vec<String>> = order
        .ledger
        .iter()
        .map(|e| {
            vec![
                time(Some(e.created_at)),
                e.kind.to_string(),
                format!("{:+}", e.delta),
                e.amount.map(money).unwrap_or_default(),
                e.event_id
                    .clone()
                    .or_else(|| e.idempotency_key.clone())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    text.push_str("\nledger\n");
    text.push_str(&table(
        &["WHEN", "KIND", "DELTA", "MONEY", "EVENT / REQUEST"],
        &rows,
    ));
    if !order.stripe_requests.is_empty() {
        let rows: Vec<Vec<String>> = order
            .stripe_requests
            .iter()
            .map(|r| {
                vec![
                    r.idempotency_key.clone(),
                    r.status.as_str().to_owned(),
                    r.http_status.map(|s| s.to_string()).unwrap_or("-".into()),
                    r.attempts.to_string(),
                    r.object_id.clone().unwrap_or("-".into()),
                    r.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        text.push_str("\n\nstripe requests\n");
        text.push_str(&table(
            &[
                "IDEMPOTENCY-KEY",
                "STATUS",
                "HTTP",
                "ATTEMPTS",
                "OBJECT",
                "ERROR",
            ],
            &rows,
        ));
    }
    print(&text);
    Ok(())
}

async fn refund(
    order_id: OrderId,
    amount: Option<i64>,
    reason: String,
    output: Output,
    database: DatabaseArgs,
    stripe: StripeArgs,
) -> Result<(), ServerError> {
    let api = stripe.api()?.ok_or_else(|| {
        ServerError::Config(
            "refunds need STRIPE_API_KEY (and STRIPE_API_BASE for a simulator)".into(),
        )
    })?;
    let store = open(&database).await?;
    let refunded = payments::refund(
        &store,
        &api,
        &order_id,
        amount,
        &Actor::cli(),
        reason.trim(),
    )
    .await
    .map_err(|e| ServerError::Command(format!("refund of {order_id}: {e}")))?;
    if output.json {
        return print_json(&serde_json::json!({
            "order_id": order_id.as_str(),
            "refund_id": refunded.refund_id,
            "amount": refunded.amount,
            "amount_refunded": refunded.order.amount_refunded,
            "already_refunded": refunded.already_refunded,
            "revoked_now": refunded.revoked_now,
            "credits_granted": refunded.order.credits_granted,
            "status": refunded.order.status,
        }));
    }
    let verdict = if refunded.already_refunded {
        "was already refunded"
    } else {
        "refunded"
    };
    print(&format!(
        "{order_id}: {verdict} ({}); credits granted now {}",
        refunded.refund_id.as_deref().unwrap_or("refund id unknown"),
        refunded.order.credits_granted
    ));
    Ok(())
}
