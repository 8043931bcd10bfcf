//! `claimcheck subscriptions`: subscriptions as Stripe Billing's events left them, what
//! each period was granted, and cancelling one.

use claimcheck_core::SubscriptionFilter;
use claimcheck_core::audit::Actor;
use claimcheck_core::money::format_money;
use claimcheck_core::payments;
use clap::{Args, Subcommand};

use super::open;
use super::output::{Output, print, print_json, print_list, table, time};
use crate::config::flags::{DatabaseArgs, StripeArgs};
use crate::error::ServerError;

#[derive(Debug, Subcommand)]
pub enum SubscriptionsCommand {
    /// Subscriptions, the most recently changed first.
    List {
        /// Only this Stripe status (active, past_due, canceled, unpaid…).
        #[arg(long)]
        status: Option<String>,
        /// Only this plan (as CLAIMCHECK_PLANS names it).
        #[arg(long)]
        plan: Option<String>,
        /// Only those whose renewal is unpaid or whose status is past_due or unpaid.
        #[arg(long)]
        past_due: bool,
        #[arg(long, default_value_t = 100)]
        limit: i64,
        #[command(flatten)]
        common: Common,
    },
    /// One subscription, by Stripe id (sub_…) or the shop's reference, with every period's
    /// grants.
    Show {
        subscription: String,
        #[command(flatten)]
        common: Common,
    },
    /// Cancel a subscription (sub_… or the shop's reference) at the end of its period, or now
    /// with --now (Idempotency-Key subscription-cancel:<ref>:period-end or …:now: asking again
    /// sends the same key). Its status follows from Stripe's events.
    Cancel {
        subscription: String,
        /// Cancel now instead of at the end of the paid period.
        #[arg(long)]
        now: bool,
        /// Why (kept in the audit log).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        stripe: StripeArgs,
    },
}

#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    database: DatabaseArgs,
}

/// Stripe's seconds, for people.
fn seconds(at: Option<i64>) -> String {
    time(at.map(|s| s.saturating_mul(1000)))
}

pub async fn run(command: SubscriptionsCommand) -> Result<(), ServerError> {
    match command {
        SubscriptionsCommand::Cancel {
            subscription,
            now,
            reason,
            common,
            stripe,
        } => {
            let api = stripe.api()?.ok_or_else(|| {
                ServerError::Config(
                    "cancelling needs STRIPE_API_KEY (and STRIPE_API_BASE for a simulator)".into(),
                )
            })?;
            let store = open(&common.database).await?;
            let cancelled = payments::cancel_subscription(
                &store,
                &api,
                &subscription,
                !now,
                &Actor::cli(),
                reason.trim(),
            )
            .await
            .map_err(|e| ServerError::Command(format!("cancelling {subscription}: {e}")))?;
            if common.output.json {
                return print_json(&serde_json::json!({
                    "subscription_id": cancelled.subscription.subscription_id,
                    "subscription_ref": cancelled.subscription.subscription_ref,
                    "at_period_end": cancelled.at_period_end,
                    "idempotency_key": cancelled.key,
                    "sent_now": cancelled.sent_now,
                }));
            }
            let when = if cancelled.at_period_end {
                "at the end of its period"
            } else {
                "now"
            };
            let sent = if cancelled.sent_now {
                "sent"
            } else {
                "sent before"
            };
            print(&format!(
                "{}: cancelled {when} ({sent} under {}); its status follows from Stripe's events",
                cancelled.subscription.subscription_id, cancelled.key
            ));
            Ok(())
        }
        SubscriptionsCommand::List {
            status,
            plan,
            past_due,
            limit,
            common,
        } => {
            let store = open(&common.database).await?;
            let filter = SubscriptionFilter {
                status,
                plan,
                past_due,
                limit,
            };
            let list = store
                .subscriptions()
                .list(&filter)
                .await
                .map_err(common.database.error())?;
            print_list(
                &common.output,
                &list,
                &[
                    "SUBSCRIPTION",
                    "REF",
                    "CUSTOMER",
                    "PLAN",
                    "STATUS",
                    "PERIOD ENDS",
                    "UNPAID",
                    "GRANTED",
                ],
                |s| {
                    vec![
                        s.subscription_id.clone(),
                        s.subscription_ref.clone().unwrap_or_else(|| "-".into()),
                        s.customer_email.clone().unwrap_or_else(|| "-".into()),
                        match (&s.plan, &s.scheduled_change, &s.unplanned_renewal) {
                            (Some(plan), Some(change), _) => format!("{plan} → {}", change.to),
                            (plan, None, Some(unplanned)) => format!(
                                "{} → {} (no plan)",
                                plan.as_deref().unwrap_or("-"),
                                format_money(unplanned.amount, &unplanned.currency)
                            ),
                            (plan, _, _) => plan.clone().unwrap_or_else(|| "-".into()),
                        },
                        s.status.clone().unwrap_or_else(|| "-".into()),
                        seconds(s.current_period_end),
                        s.unpaid_invoice.clone().unwrap_or_else(|| "-".into()),
                        s.credits_granted.to_string(),
                    ]
                },
            )
        }
        SubscriptionsCommand::Show {
            subscription,
            common,
        } => {
            let store = open(&common.database).await?;
            let found = store
                .subscriptions()
                .get(&subscription)
                .await
                .map_err(common.database.error())?
                .ok_or_else(|| ServerError::Command(format!("no subscription {subscription}")))?;
            let grants = store
                .subscriptions()
                .grants(&found.subscription_id)
                .await
                .map_err(common.database.error())?;
            if common.output.json {
                return print_json(&serde_json::json!({
                    "subscription": found,
                    "grants": grants,
                }));
            }
            let mut text = format!(
                "subscription     {}\nreference        {}\ncustomer         {}\nplan             {}\n\
                 status           {}{}\nperiod ends      {}\nscheduled        {}\n\
                 unpaid           {}\ncredits granted  {}\n",
                found.subscription_id,
                found.subscription_ref.as_deref().unwrap_or("-"),
                found
                    .customer_email
                    .as_deref()
                    .or(found.customer_id.as_deref())
                    .unwrap_or("-"),
                found.plan.as_deref().unwrap_or("-"),
                found.status.as_deref().unwrap_or("-"),
                if found.cancel_at_period_end != 0 {
                    " (cancels at the period's end)"
                } else {
                    ""
                },
                seconds(found.current_period_end),
                match (&found.scheduled_change, &found.unplanned_renewal) {
                    (Some(change), _) => {
                        format!("{} from {}", change.to, seconds(Some(change.at)))
                    }
                    (None, Some(unplanned)) => format!(
                        "{} from {}: no plan has this price, its invoice will grant nothing \
                         until one does (CLAIMCHECK_PLANS)",
                        format_money(unplanned.amount, &unplanned.currency),
                        seconds(Some(unplanned.at))
                    ),
                    (None, None) => "-".into(),
                },
                match (&found.unpaid_invoice, found.unpaid_since) {
                    (Some(invoice), since) => format!("{invoice} since {}", seconds(since)),
                    (None, _) => "-".into(),
                },
                found.credits_granted,
            );
            let rows: Vec<Vec<String>> = grants
                .iter()
                .map(|g| {
                    vec![
                        seconds(Some(g.period_start)),
                        seconds(Some(g.period_end)),
                        g.step.clone(),
                        match &g.from_plan {
                            Some(from) => format!("{from} → {}", g.plan),
                            None => g.plan.clone(),
                        },
                        g.invoice_id.clone(),
                        g.entitled.to_string(),
                        g.credits.to_string(),
                        g.revoked.to_string(),
                    ]
                })
                .collect();
            text.push_str("\ngrants\n");
            text.push_str(&table(
                &[
                    "FROM", "TO", "STEP", "PLAN", "INVOICE", "ENTITLED", "GRANTED", "REVOKED",
                ],
                &rows,
            ));
            print(&text);
            Ok(())
        }
    }
}
