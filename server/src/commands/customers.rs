//! `claimcheck customers`: a customer's balance and orders.

use clap::Subcommand;

use super::open;
use super::output::{Output, print, print_json, table, time};
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

#[derive(Debug, Subcommand)]
pub enum CustomersCommand {
    /// A customer's balance and orders, by email or Stripe customer id.
    Show {
        customer: String,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

pub async fn run(command: CustomersCommand) -> Result<(), ServerError> {
    let CustomersCommand::Show {
        customer,
        output,
        database,
    } = command;
    let store = open(&database).await?;
    let view = store
        .orders()
        .customer(&customer)
        .await
        .map_err(database.error())?;
    if output.json {
        return print_json(&view);
    }
    if view.orders.is_empty() {
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
    print(&format!(
        "customer {}\nbalance  {}\n\n{}",
        view.customer,
        view.balance,
        table(&["ORDER", "STATUS", "CREDITS", "CREATED"], &rows)
    ));
    Ok(())
}
