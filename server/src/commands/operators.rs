//! `claimcheck operator`: add, list, disable, enable and remove dashboard operators.

use claimcheck_core::auth::Role;
use claimcheck_core::ops::{self, AccessChange, Actor, Username};
use clap::Subcommand;

use super::open;
use super::output::{Output, print, print_list, time};
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

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

pub async fn run(command: OperatorCommand) -> Result<(), ServerError> {
    match command {
        OperatorCommand::Add {
            username,
            role,
            generate_password,
            database,
        } => {
            let username = Username::parse(&username)
                .map_err(|e| ServerError::Command(format!("--username: {e}")))?;
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
            let store = open(&database).await?;
            ops::add_operator(&store, &Actor::cli(), &username, role, password.clone())
                .await
                .map_err(|e| ServerError::Command(e.to_string()))?;
            if generate_password {
                print(&format!(
                    "{password}\n\nOperator {username} ({role}) added; the password above is shown only now."
                ));
            } else {
                print(&format!("Operator {username} ({role}) added."));
            }
            Ok(())
        }
        OperatorCommand::List { output, database } => {
            let store = open(&database).await?;
            let operators = store.operators().list().await.map_err(database.error())?;
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
            change(&username, &database, AccessChange::Disable).await
        }
        OperatorCommand::ResetTwoFactor { username, database } => {
            change(&username, &database, AccessChange::ResetTwoFactor).await
        }
        OperatorCommand::Enable { username, database } => {
            change(&username, &database, AccessChange::Enable).await
        }
        OperatorCommand::Remove { username, database } => {
            change(&username, &database, AccessChange::Remove).await
        }
    }
}

async fn change(
    username: &str,
    database: &DatabaseArgs,
    change: AccessChange,
) -> Result<(), ServerError> {
    let username = Username::parse(username).map_err(|e| ServerError::Command(e.to_string()))?;
    let store = open(database).await?;
    ops::change_access(&store, &Actor::cli(), &username, change)
        .await
        .map_err(|e| ServerError::Command(e.to_string()))?;
    print(&format!("Operator {username}: {}.", change.done()));
    Ok(())
}
