//! Operator commands: `claims`, `orders`, `customers`. They read the same database as the
//! server (DATABASE_URL) and print a table, or JSON with `--json` (field names are a contract
//! for scripts and monitoring: fields may be added, never renamed).

use claimcheck_core::auth::{Role, hash_password};
use claimcheck_core::payments;
use claimcheck_core::token::{NewToken, token_hash};
use claimcheck_core::worker::{Attempt, Worker};
use claimcheck_core::{ClaimState, EventId, OrderId, Store, now_ms};
use clap::{Args, Subcommand};
use serde::Serialize;

use crate::cli::{DatabaseArgs, StripeArgs, WorkerArgs};
use crate::error::ServerError;

#[derive(Debug, Clone, Args)]
pub struct Output {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ClaimsCommand {
    /// Claims, newest first.
    List {
        /// Only claims in this state.
        #[arg(long, value_parser = parse_state)]
        status: Option<ClaimState>,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: i64,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// One claim with its deliveries.
    Show {
        event_id: EventId,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Run a pending, stale or failed claim now, through the worker's idempotent path.
    Redrive {
        event_id: EventId,
        /// Why (kept in the audit log).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        worker: WorkerArgs,
    },
}

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

#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Add a dashboard operator. The password is read from stdin (one line) or, with
    /// --generate-password, made up and printed once.
    Add {
        #[arg(long)]
        username: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Make up a strong password and print it, instead of reading one from stdin.
        #[arg(long)]
        generate_password: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Operators and their roles.
    List {
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Turn off an operator's two-factor sign-in (a lost phone): their recovery codes and
    /// sessions end too; they set it up again after signing in.
    #[command(name = "reset-2fa")]
    ResetTwoFactor {
        username: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Stop an operator from signing in (their sessions end at once).
    Disable {
        username: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Let a disabled operator sign in again.
    Enable {
        username: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Remove an operator.
    Remove {
        username: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

fn parse_role(value: &str) -> Result<Role, String> {
    value.parse()
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Make an API token for the shop's backend; it is printed once and stored hashed.
    Create {
        /// What the token is for, e.g. the shop's name.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Tokens, without their secrets.
    List {
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Revoke a token by its id (the part after cct_).
    Revoke {
        token_id: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

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

fn parse_state(value: &str) -> Result<ClaimState, String> {
    value
        .parse()
        .map_err(|_| "expected one of pending, running, stale, failed, processed".to_owned())
}

/// Opens the database the server uses, bringing its schema up to date.
async fn open(database: &DatabaseArgs) -> Result<Store, ServerError> {
    let store = database.connect().await?;
    store.migrate().await.map_err(database.error())?;
    Ok(store)
}

/// Writes the command's result to stdout: it is the output, not a log line.
#[allow(clippy::print_stdout)]
fn print(text: &str) {
    println!("{text}");
}

fn print_json(value: &impl Serialize) -> Result<(), ServerError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| ServerError::Command(format!("cannot write JSON: {e}")))?;
    print(&text);
    Ok(())
}

/// A list as JSON (the items themselves) or as a table of `row`s under `header`.
fn print_list<T: Serialize>(
    output: &Output,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Result<(), ServerError> {
    if output.json {
        return print_json(&items);
    }
    let rows: Vec<Vec<String>> = items.iter().map(row).collect();
    print(&table(header, &rows));
    Ok(())
}

/// Left-aligned columns, for people.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = vec![line(header.iter().map(|h| (*h).to_owned()).collect())];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

fn time(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| "-".to_owned())
}

pub async fn claims(command: ClaimsCommand) -> Result<(), ServerError> {
    match command {
        ClaimsCommand::List {
            status,
            limit,
            output,
            database,
        } => {
            let store = open(&database).await?;
            let claims = store
                .list_claims(status, now_ms(), limit)
                .await
                .map_err(database.error())?;
            if output.json {
                return print_json(&claims);
            }
            if claims.is_empty() {
                print("No claims.");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = claims
                .iter()
                .map(|c| {
                    vec![
                        c.event_id.clone(),
                        c.event_type.clone(),
                        c.object_id.clone(),
                        c.status.clone(),
                        c.attempts.to_string(),
                        c.last_error.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            print(&table(
                &[
                    "EVENT",
                    "TYPE",
                    "OBJECT",
                    "STATUS",
                    "ATTEMPTS",
                    "LAST ERROR",
                ],
                &rows,
            ));
            Ok(())
        }
        ClaimsCommand::Show {
            event_id,
            output,
            database,
        } => {
            let store = open(&database).await?;
            let wrap = database.error();
            let claim = store
                .claim(&event_id, now_ms())
                .await
                .map_err(&wrap)?
                .ok_or_else(|| ServerError::Command(format!("no claim has event id {event_id}")))?;
            let deliveries = store.deliveries(&event_id).await.map_err(&wrap)?;
            if output.json {
                #[derive(Serialize)]
                struct Shown<'a> {
                    #[serde(flatten)]
                    claim: &'a claimcheck_core::ClaimView,
                    delivery_log: &'a [claimcheck_core::DeliveryView],
                }
                return print_json(&Shown {
                    claim: &claim,
                    delivery_log: &deliveries,
                });
            }
            let mut text = format!(
                "event      {}\ntype       {}\nobject     {}\nstatus     {}\nattempts   {}\n\
                 last error {}\nlease      {} until {}\nreceived   {}\nprocessed  {}\n\
                 deliveries {}\n",
                claim.event_id,
                claim.event_type,
                claim.object_id,
                claim.status,
                claim.attempts,
                claim.last_error.as_deref().unwrap_or("-"),
                claim.lease_owner.as_deref().unwrap_or("-"),
                time(claim.lease_expires_at),
                time(Some(claim.received_at)),
                time(claim.processed_at),
                claim.deliveries,
            );
            for d in &deliveries {
                text.push_str(&format!(
                    "  {}  {}{}\n",
                    time(Some(d.received_at)),
                    d.outcome,
                    d.duplicate_of
                        .as_deref()
                        .map(|o| format!(" (claimed by {o})"))
                        .unwrap_or_default()
                ));
            }
            print(text.trim_end());
            Ok(())
        }
        ClaimsCommand::Redrive {
            event_id,
            reason,
            output,
            database,
            worker,
        } => {
            let store = open(&database).await?;
            let actor = cli_actor();
            let runner = Worker::new(store, actor.clone(), worker.config());
            let result = runner
                .redrive(&event_id, &actor, &reason)
                .await
                .map_err(database.error())?;
            let (verdict, detail, ok) = match &result {
                Ok(Attempt::Processed { .. }) => ("processed", String::new(), true),
                Ok(Attempt::Failed { error, gave_up, .. }) => (
                    if *gave_up {
                        "failed"
                    } else {
                        "retry_scheduled"
                    },
                    error.clone(),
                    false,
                ),
                Ok(Attempt::LeaseLost { .. }) => ("lease_lost", String::new(), false),
                Ok(Attempt::Deferred { .. }) => (
                    "deferred",
                    "the database was unavailable; it will run again".to_owned(),
                    false,
                ),
                Err(refused) => ("refused", refused.to_string(), false),
            };
            if output.json {
                print_json(&serde_json::json!({
                    "event_id": event_id.as_str(),
                    "result": verdict,
                    "detail": detail,
                }))?;
            } else if detail.is_empty() {
                print(&format!("{event_id}: {verdict}"));
            } else {
                print(&format!("{event_id}: {verdict}: {detail}"));
            }
            if ok {
                Ok(())
            } else {
                Err(ServerError::Command(format!(
                    "re-drive of {event_id}: {verdict}"
                )))
            }
        }
    }
}

/// Who runs a command, for the audit log.
fn cli_actor() -> String {
    format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".to_owned())
    )
}

pub async fn orders(command: OrdersCommand) -> Result<(), ServerError> {
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
        .order(&order_id)
        .await
        .map_err(database.error())?
        .ok_or_else(|| ServerError::Command(format!("no order {order_id}")))?;
    if output.json {
        return print_json(&order);
    }
    let money = |minor: i64| match &order.currency {
        Some(currency) => format!(
            "{} {}.{:02}",
            currency.to_uppercase(),
            minor / 100,
            (minor % 100).abs()
        ),
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
                e.kind.clone(),
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
    if reason.trim().is_empty() {
        return Err(ServerError::Command("--reason must say why".into()));
    }
    let api = stripe.api()?.ok_or_else(|| {
        ServerError::Config(
            "refunds need STRIPE_API_KEY (and STRIPE_API_BASE for a simulator)".into(),
        )
    })?;
    let store = open(&database).await?;
    let refunded = payments::refund(&store, &api, &order_id, amount, &cli_actor(), reason.trim())
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

pub async fn tokens(command: TokensCommand) -> Result<(), ServerError> {
    match command {
        TokensCommand::Create {
            name,
            output,
            database,
        } => {
            if name.trim().is_empty() {
                return Err(ServerError::Command("--name must not be empty".into()));
            }
            let store = open(&database).await?;
            let token = NewToken::generate().map_err(|e| ServerError::Command(e.to_string()))?;
            store
                .insert_token(
                    &token.token_id,
                    name.trim(),
                    &token_hash(&token.token),
                    now_ms(),
                )
                .await
                .map_err(database.error())?;
            if output.json {
                return print_json(&serde_json::json!({
                    "token_id": token.token_id,
                    "name": name.trim(),
                    "token": token.token,
                }));
            }
            print(&format!(
                "{}\n\nThe API token for '{}' (id {}). It is shown only now: store it in the \
                 shop's backend and send it as Authorization: Bearer <token>.",
                token.token,
                name.trim(),
                token.token_id
            ));
            Ok(())
        }
        TokensCommand::List { output, database } => {
            let store = open(&database).await?;
            let tokens = store.list_tokens().await.map_err(database.error())?;
            print_list(
                &output,
                &tokens,
                &["ID", "NAME", "CREATED", "LAST USED", "STATE"],
                |t| {
                    vec![
                        t.token_id.clone(),
                        t.name.clone(),
                        time(Some(t.created_at)),
                        time(t.last_used_at),
                        if t.revoked_at.is_some() {
                            "revoked"
                        } else {
                            "live"
                        }
                        .to_owned(),
                    ]
                },
            )
        }
        TokensCommand::Revoke { token_id, database } => {
            let store = open(&database).await?;
            if store
                .revoke_token(token_id.trim(), now_ms())
                .await
                .map_err(database.error())?
            {
                print(&format!("token {} revoked", token_id.trim()));
                Ok(())
            } else {
                Err(ServerError::Command(format!(
                    "no live token with id {}",
                    token_id.trim()
                )))
            }
        }
    }
}

pub async fn customers(command: CustomersCommand) -> Result<(), ServerError> {
    let CustomersCommand::Show {
        customer,
        output,
        database,
    } = command;
    let store = open(&database).await?;
    let view = store.customer(&customer).await.map_err(database.error())?;
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
                o.status.clone(),
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

pub async fn operator(command: OperatorCommand) -> Result<(), ServerError> {
    match command {
        OperatorCommand::Add {
            username,
            role,
            generate_password,
            database,
        } => {
            let username = username.trim().to_owned();
            if username.is_empty() || username.len() > 64 || username.contains(char::is_whitespace)
            {
                return Err(ServerError::Command(
                    "--username is 1 to 64 characters without spaces".into(),
                ));
            }
            let password = if generate_password {
                claimcheck_core::token::random_id("pw")
                    .map_err(|e| ServerError::Command(e.to_string()))?
            } else {
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map_err(|e| ServerError::Command(format!("cannot read the password: {e}")))?;
                line.trim_end_matches(['\r', '\n']).to_owned()
            };
            let hash = tokio::task::spawn_blocking(move || {
                hash_password(&password).map(|h| (h, password))
            })
            .await
            .map_err(|e| ServerError::Command(e.to_string()))?
            .map_err(|e| ServerError::Command(e.to_string()))?;
            let store = open(&database).await?;
            if !store
                .add_operator(&username, &hash.0, role, now_ms())
                .await
                .map_err(database.error())?
            {
                return Err(ServerError::Command(format!(
                    "operator {username} exists already"
                )));
            }
            store
                .record_audit(
                    now_ms(),
                    &cli_actor(),
                    "operator_add",
                    &username,
                    &format!("role {role}"),
                    "done",
                )
                .await
                .map_err(database.error())?;
            if generate_password {
                print(&format!(
                    "{}\n\nOperator {username} ({role}) added; the password above is shown only now.",
                    hash.1
                ));
            } else {
                print(&format!("Operator {username} ({role}) added."));
            }
            Ok(())
        }
        OperatorCommand::List { output, database } => {
            let store = open(&database).await?;
            let operators = store.operators().await.map_err(database.error())?;
            print_list(
                &output,
                &operators,
                &["USERNAME", "ROLE", "CREATED", "STATE"],
                |o| {
                    vec![
                        o.username.clone(),
                        o.role.to_string(),
                        time(Some(o.created_at)),
                        if o.disabled_at.is_some() {
                            "disabled"
                        } else {
                            "active"
                        }
                        .to_owned(),
                    ]
                },
            )
        }
        OperatorCommand::Disable { username, database } => {
            change_access(&username, &database, "disable").await
        }
        OperatorCommand::ResetTwoFactor { username, database } => {
            change_access(&username, &database, "reset-2fa").await
        }
        OperatorCommand::Enable { username, database } => {
            change_access(&username, &database, "enable").await
        }
        OperatorCommand::Remove { username, database } => {
            change_access(&username, &database, "remove").await
        }
    }
}

async fn change_access(
    username: &str,
    database: &DatabaseArgs,
    action: &str,
) -> Result<(), ServerError> {
    let store = open(database).await?;
    let username = username.trim();
    let done = match action {
        "disable" => store.set_operator_disabled(username, true, now_ms()).await,
        "enable" => store.set_operator_disabled(username, false, now_ms()).await,
        "reset-2fa" => store.reset_two_factor(username).await,
        _ => store.remove_operator(username).await,
    }
    .map_err(database.error())?;
    if !done {
        return Err(ServerError::Command(format!("no operator {username}")));
    }
    store
        .record_audit(
            now_ms(),
            &cli_actor(),
            &format!("operator_{}", action.replace('-', "_")),
            username,
            "",
            "done",
        )
        .await
        .map_err(database.error())?;
    let done = match action {
        "reset-2fa" => "two-factor sign-in reset (set it up again after signing in)",
        "disable" => "disabled",
        "enable" => "enabled",
        _ => "removed",
    };
    print(&format!("Operator {username}: {done}."));
    Ok(())
}

/// `claimcheck backup --to FILE`: a consistent copy of a SQLite database taken while it
/// serves (`VACUUM INTO`), and how to restore it.
pub async fn backup(to: &std::path::Path, database: &DatabaseArgs) -> Result<(), ServerError> {
    if database.database_url.backend() == claimcheck_core::Backend::Postgres {
        return Err(ServerError::Command(
            "backups of PostgreSQL are taken with its own tools: pg_dump --format=custom \
             --file=claimcheck.dump \"$DATABASE_URL\" (restore with pg_restore --clean)"
                .into(),
        ));
    }
    if to.exists() {
        return Err(ServerError::Command(format!(
            "{} exists already; a backup never overwrites a file",
            to.display()
        )));
    }
    let target = to
        .to_str()
        .ok_or_else(|| ServerError::Command("the backup path is not valid UTF-8".into()))?;
    let store = database.connect().await?;
    store.backup_into(target).await.map_err(database.error())?;
    store.close().await;
    print(&format!(
        "backup written to {target}\nto restore: stop claimcheck, replace the database file \
         with a copy of it (and delete the database's -wal and -shm files), start claimcheck"
    ));
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    /// List events created since then: `72h`, `3d` ago, or a time like
    /// 2026-11-28T00:00:00Z. Default: the reconciler's cursor minus an hour (three days back
    /// the first time); never more than 30 days.
    #[arg(long)]
    since: Option<String>,
    /// Count what would be claimed; claim nothing, keep the cursor.
    #[arg(long)]
    dry_run: bool,
    /// Which Stripe mode's events are claimed.
    #[arg(
        long = "stripe-mode",
        env = "CLAIMCHECK_STRIPE_MODE",
        value_name = "CLAIMCHECK_STRIPE_MODE",
        default_value = "test"
    )]
    stripe_mode: crate::cli::ModeArg,
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    stripe: StripeArgs,
}

/// When `--since` means: a duration ago, or an RFC 3339 time; unix seconds.
fn since_secs(text: &str, now_secs: i64) -> Result<i64, ServerError> {
    if let Ok(ago) = crate::cli::parse_duration(text) {
        return Ok(now_secs - i64::try_from(ago.as_secs()).unwrap_or(i64::MAX / 2));
    }
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.timestamp())
        .map_err(|_| {
            ServerError::Command(format!(
                "--since '{text}': a duration (72h, 3d) or a time like 2026-11-28T00:00:00Z"
            ))
        })
}

/// `claimcheck reconcile`: one run now, audited as `cli:$USER`.
pub async fn reconcile(args: ReconcileArgs) -> Result<(), ServerError> {
    use claimcheck_core::reconcile::{ReconcileConfig, run};
    use claimcheck_core::webhook::StripeMode;

    let api = args.stripe.api()?.ok_or_else(|| {
        ServerError::Config(
            "reconciling needs STRIPE_API_KEY (and STRIPE_API_BASE for a simulator)".into(),
        )
    })?;
    let since = args
        .since
        .as_deref()
        .map(|s| since_secs(s, now_ms() / 1000))
        .transpose()?;
    let store = open(&args.database).await?;
    let config = ReconcileConfig {
        mode: match args.stripe_mode {
            crate::cli::ModeArg::Test => StripeMode::Test,
            crate::cli::ModeArg::Live => StripeMode::Live,
        },
        ..ReconcileConfig::default()
    };
    let outcome = run(&store, &api, &config, &cli_actor(), since, args.dry_run).await;
    if !args.dry_run {
        let what = match &outcome {
            Ok(report) => format!(
                "{} events listed, {} claimed that Stripe never delivered",
                report.listed, report.claimed
            ),
            Err(error) => format!("failed: {error}"),
        };
        store
            .record_audit(
                now_ms(),
                &cli_actor(),
                "reconcile",
                "stripe-events",
                "claimcheck reconcile",
                &what,
            )
            .await
            .map_err(args.database.error())?;
    }
    let report = outcome.map_err(|e| ServerError::Command(format!("reconcile: {e}")))?;
    if args.output.json {
        return print_json(&report);
    }
    let rows: Vec<Vec<String>> = report
        .per_type
        .iter()
        .map(|(kind, c)| {
            vec![
                kind.clone(),
                c.listed.to_string(),
                c.already_claimed.to_string(),
                c.claimed.to_string(),
            ]
        })
        .collect();
    let claimed = if report.dry_run {
        "WOULD CLAIM"
    } else {
        "CLAIMED NOW"
    };
    let mut text = format!(
        "events since {} ({} page(s)): {} listed, {} already claimed, {} {}{}\n\n",
        time(Some(report.since * 1000)),
        report.pages,
        report.listed,
        report.already_claimed,
        report.claimed,
        if report.dry_run {
            "would be claimed"
        } else {
            "claimed now"
        },
        if report.skipped > 0 {
            format!(", {} skipped (other mode)", report.skipped)
        } else {
            String::new()
        }
    );
    text.push_str(&table(
        &["TYPE", "LISTED", "ALREADY CLAIMED", claimed],
        &rows,
    ));
    print(&text);
    Ok(())
}
