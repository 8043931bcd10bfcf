//! `claimcheck customers`: a customer's credits (balance, lots, ledger, orders) and the
//! changes support makes to them: spends, holds and their capture or release, adjustments.
//! Every change runs under an Idempotency-Key (`--key`; a new one is made and printed when
//! none is given), so a command repeated with its key acts once.

use claimcheck_core::audit::Actor;
use claimcheck_core::fulfilment::Packages;
use claimcheck_core::spending::{
    CreditRequest, IdempotencyKey, KeyScope, Keyed, LedgerCursor, customer_email,
};
use claimcheck_core::{Store, now_ms};
use clap::{Args, Subcommand};
use serde_json::Value;

use super::open;
use super::output::{Output, print, print_json, table, time};
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

#[derive(Debug, Subcommand)]
pub enum CustomersCommand {
    /// A customer's balance, lots and orders, by email (or orders by Stripe customer id).
    Show {
        customer: String,
        #[command(flatten)]
        common: Common,
    },
    /// Every change of a customer's balance, newest first, a page at a time.
    Ledger {
        email: String,
        /// Where the page starts: the previous page's next cursor.
        #[arg(long)]
        cursor: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Spends credits (never more than are available).
    Spend {
        email: String,
        #[arg(long)]
        credits: i64,
        #[arg(long)]
        reference: String,
        #[command(flatten)]
        change: Change,
    },
    /// Holds credits for work that may fail, until captured, released or expired.
    Hold {
        email: String,
        #[arg(long)]
        credits: i64,
        #[arg(long)]
        reference: String,
        /// How long the hold lasts (15m by default, at most 24h).
        #[arg(long)]
        expires_in: Option<String>,
        #[command(flatten)]
        change: Change,
    },
    /// Spends a hold's credits (all, or --credits of them; the rest is released).
    Capture {
        hold_id: String,
        #[arg(long)]
        credits: Option<i64>,
        #[command(flatten)]
        change: Change,
    },
    /// Gives a hold's credits back.
    Release {
        hold_id: String,
        #[command(flatten)]
        change: Change,
    },
    /// Adds (goodwill) or takes back (a correction) credits, with the reason on record.
    Adjust {
        email: String,
        /// Credits to add, or to take back when negative (-5).
        #[arg(long, allow_hyphen_values = true)]
        credits: i64,
        #[arg(long)]
        reason: String,
        /// How long added credits last (90d); for good when absent.
        #[arg(long)]
        expires: Option<String>,
        #[command(flatten)]
        change: Change,
    },
}

/// What every customers command needs.
#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    database: DatabaseArgs,
    /// The packages on sale, for how long their credits last (as `serve` has them).
    #[arg(
        long,
        env = "CLAIMCHECK_PACKAGES",
        value_name = "CLAIMCHECK_PACKAGES",
        default_value = ""
    )]
    packages: Packages,
}

/// What every change needs besides.
#[derive(Debug, Args)]
pub struct Change {
    /// The Idempotency-Key: repeat the command with the same key and it acts once.
    #[arg(long)]
    key: Option<String>,
    #[command(flatten)]
    common: Common,
}

pub async fn run(command: CustomersCommand) -> Result<(), ServerError> {
    match command {
        CustomersCommand::Show { customer, common } => show(&customer, &common).await,
        CustomersCommand::Ledger {
            email,
            cursor,
            common,
        } => ledger(&email, cursor.as_deref(), &common).await,
        CustomersCommand::Spend {
            email,
            credits,
            reference,
            change,
        } => {
            apply(
                CreditRequest::spend(&email, credits, &reference, None),
                change,
            )
            .await
        }
        CustomersCommand::Hold {
            email,
            credits,
            reference,
            expires_in,
            change,
        } => {
            let expires_in = expires_in.as_deref().map(duration_ms).transpose()?;
            apply(
                CreditRequest::hold(&email, credits, &reference, None, expires_in),
                change,
            )
            .await
        }
        CustomersCommand::Capture {
            hold_id,
            credits,
            change,
        } => apply(CreditRequest::capture(&hold_id, credits), change).await,
        CustomersCommand::Release { hold_id, change } => {
            apply(CreditRequest::release(&hold_id), change).await
        }
        CustomersCommand::Adjust {
            email,
            credits,
            reason,
            expires,
            change,
        } => {
            let lasts = expires.as_deref().map(duration_ms).transpose()?;
            let actor = Actor::cli().to_string();
            apply(
                CreditRequest::adjust(&email, credits, &reason, &actor, lasts),
                change,
            )
            .await
        }
    }
}

fn duration_ms(text: &str) -> Result<i64, ServerError> {
    claimcheck_core::text::duration_ms(text)
        .ok_or_else(|| ServerError::Command(format!("'{text}' is not a duration like 15m or 90d")))
}

async fn apply(
    request: Result<CreditRequest, claimcheck_core::spending::SpendError>,
    change: Change,
) -> Result<(), ServerError> {
    let request = request.map_err(|e| ServerError::Command(e.to_string()))?;
    let made_key;
    let key = match change.key.as_deref() {
        Some(key) => key,
        None => {
            made_key = claimcheck_core::token::random_id("cli")
                .map_err(|e| ServerError::Command(e.to_string()))?;
            &made_key
        }
    };
    let key = IdempotencyKey::parse(key).map_err(|e| ServerError::Command(e.to_string()))?;
    let Common {
        output,
        database,
        packages,
    } = &change.common;
    let store = open(database).await?;
    let keyed = store
        .credits()
        .apply(
            KeyScope::Cli,
            &key,
            &request,
            packages,
            now_ms(),
            crate::routes::spends::render,
        )
        .await
        .map_err(database.error())?;
    let (answer, replayed) = match keyed {
        Keyed::Fresh(answer) => (answer, false),
        Keyed::Replayed(answer) => (answer, true),
        Keyed::KeyReused => {
            return Err(ServerError::Command(format!(
                "the key {} was used for another change; use a new key",
                key.as_str()
            )));
        }
        Keyed::KeyInUse => {
            return Err(ServerError::Command(format!(
                "a change under the key {} is still running; try again shortly",
                key.as_str()
            )));
        }
        Keyed::Unauthorized => {
            return Err(ServerError::Command(
                "the change was refused: its caller is not authorised".to_owned(),
            ));
        }
    };
    let body: Value = serde_json::from_str(&answer.body)
        .map_err(|e| ServerError::Command(format!("unreadable answer: {e}")))?;
    if output.json {
        print_json(&body)?;
    }
    if answer.status >= 400 {
        return Err(ServerError::Command(
            body["message"].as_str().unwrap_or("refused").to_owned(),
        ));
    }
    if !output.json {
        print(&summary(&body, key.as_str(), replayed));
    }
    Ok(())
}

/// One line per change, for people.
fn summary(body: &Value, key: &str, replayed: bool) -> String {
    let figures = |v: &Value| {
        format!(
            "balance {}, available {}",
            v["balance_after"], v["available_after"]
        )
    };
    let what = if let Some(id) = body["spend_id"].as_str() {
        format!(
            "spent {} credits ({id}); {}",
            body["credits"],
            figures(body)
        )
    } else if let Some(spend) = body.get("spend") {
        format!(
            "captured {} credits of {} ({}); {}",
            spend["credits"],
            body["hold"]["hold_id"].as_str().unwrap_or_default(),
            spend["spend_id"].as_str().unwrap_or_default(),
            figures(spend)
        )
    } else if let Some(id) = body["hold_id"].as_str() {
        format!(
            "hold {id}: {} credits, {}; {}",
            body["credits"],
            body["status"].as_str().unwrap_or_default(),
            figures(body)
        )
    } else {
        format!(
            "adjusted by {} credits ({}); {}",
            body["credits"],
            body["adjustment_id"].as_str().unwrap_or_default(),
            figures(body)
        )
    };
    let again = if replayed {
        " (done before under this key: nothing changed now)"
    } else {
        ""
    };
    format!("{what}\nkey {key}{again}")
}

async fn show(customer: &str, common: &Common) -> Result<(), ServerError> {
    let store = open(&common.database).await?;
    let view = store
        .orders()
        .customer(customer)
        .await
        .map_err(common.database.error())?;
    let credits = match customer_email(customer) {
        Ok(email) => Some(
            store
                .credits()
                .balance(&email, &common.packages, now_ms())
                .await
                .map_err(common.database.error())?,
        ),
        Err(_) => None,
    };
    if common.output.json {
        let mut value = serde_json::to_value(&view)
            .map_err(|e| ServerError::Command(format!("cannot write JSON: {e}")))?;
        value["credits"] = serde_json::json!(credits);
        return print_json(&value);
    }
    let lots_empty = credits.as_ref().is_none_or(|c| c.lots.is_empty());
    if view.orders.is_empty() && lots_empty {
        return Err(ServerError::Command(format!(
            "no orders for {customer} (give an email or a Stripe customer id)"
        )));
    }
    let rows: Vec<Vec<String>> = view
        .orders
        .iter()
        .map(|o| {
            vec![
                o.order_id.clone(),
                o.status.to_string(),
                o.credits_granted.to_string(),
                time(Some(o.created_at)),
            ]
        })
        .collect();
    let mut text = format!("customer {}\nbalance  {}\n", view.customer, view.balance);
    if let Some(c) = &credits {
        text.push_str(&format!(
            "available {}\nheld     {}\nowed     {}\n\n{}\n",
            c.available,
            c.held,
            c.owed,
            table(
                &["LOT", "CREDITS", "LEFT", "EXPIRES"],
                &c.lots
                    .iter()
                    .map(|l| {
                        vec![
                            l.lot_id.clone(),
                            l.credits.to_string(),
                            l.remaining.to_string(),
                            if l.expired {
                                "expired".to_owned()
                            } else {
                                time(l.expires_at)
                            },
                        ]
                    })
                    .collect::<Vec<_>>()
            )
        ));
    }
    text.push('\n');
    text.push_str(&table(&["ORDER", "STATUS", "CREDITS", "CREATED"], &rows));
    print(&text);
    Ok(())
}

async fn ledger(email: &str, cursor: Option<&str>, common: &Common) -> Result<(), ServerError> {
    let email = customer_email(email).map_err(|e| ServerError::Command(e.to_string()))?;
    let cursor = cursor
        .map(|c| {
            LedgerCursor::parse(c).ok_or_else(|| {
                ServerError::Command("the cursor is the next cursor the last page printed".into())
            })
        })
        .transpose()?;
    let store: Store = open(&common.database).await?;
    let page = store
        .credits()
        .ledger(&email, cursor, 100)
        .await
        .map_err(common.database.error())?;
    if common.output.json {
        return print_json(&page);
    }
    let rows: Vec<Vec<String>> = page
        .rows
        .iter()
        .map(|r| {
            vec![
                time(Some(r.created_at)),
                r.kind.clone(),
                format!("{:+}", r.delta),
                r.order_id
                    .clone()
                    .or_else(|| r.movement_id.clone())
                    .unwrap_or_default(),
                r.reference
                    .clone()
                    .or_else(|| r.reason.clone())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let mut text = table(&["WHEN", "KIND", "CREDITS", "OF", "REFERENCE"], &rows);
    if let Some(next) = &page.next_cursor {
        text.push_str(&format!("\nmore: --cursor {next}"));
    }
    print(&text);
    Ok(())
}
