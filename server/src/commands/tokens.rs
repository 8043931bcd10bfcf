//! `claimcheck tokens`: API tokens for the order API.

use claimcheck_core::ops::{self, Actor, TokenName};
use clap::Subcommand;

use super::open;
use super::output::{Output, print, print_json, print_list, time};
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

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

pub async fn run(command: TokensCommand) -> Result<(), ServerError> {
    match command {
        TokensCommand::Create {
            name,
            output,
            database,
        } => {
            let name = TokenName::parse(&name)
                .map_err(|e| ServerError::Command(format!("--name: {e}")))?;
            let store = open(&database).await?;
            let token = ops::create_token(&store, &Actor::cli(), &name)
                .await
                .map_err(|e| ServerError::Command(e.to_string()))?;
            if output.json {
                return print_json(&serde_json::json!({
                    "token_id": token.token_id,
                    "name": name.as_str(),
                    "token": token.token,
                }));
            }
            print(&format!(
                "{}\n\nThe API token for '{}' (id {}). It is shown only now: store it in the \
                 shop's backend and send it as Authorization: Bearer <token>.",
                token.token,
                name.as_str(),
                token.token_id
            ));
            Ok(())
        }
        TokensCommand::List { output, database } => {
            let store = open(&database).await?;
            let tokens = store.tokens().list().await.map_err(database.error())?;
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
            ops::revoke_token(&store, &Actor::cli(), &token_id)
                .await
                .map_err(|e| ServerError::Command(e.to_string()))?;
            print(&format!("token {} revoked", token_id.trim()));
            Ok(())
        }
    }
}
