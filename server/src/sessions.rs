//! Dashboard sessions: tower-sessions records kept in the engine's database (SQLite or
//! PostgreSQL alike), so a restart or another instance knows who is signed in.

use async_trait::async_trait;
use claimcheck_core::{Store, now_ms};
use tower_sessions::SessionStore;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{Error, Result};

#[derive(Clone)]
pub struct DbSessionStore {
    store: Store,
}

impl std::fmt::Debug for DbSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DbSessionStore")
    }
}

impl DbSessionStore {
    pub fn new(store: Store) -> DbSessionStore {
        DbSessionStore { store }
    }
}

fn backend(error: claimcheck_core::StoreError) -> Error {
    Error::Backend(error.to_string())
}

/// The key under which the signed-in operator's name is kept in a session.
pub(crate) const OPERATOR_KEY: &str = "operator";

fn encode(record: &Record) -> Result<(String, Option<String>, i64)> {
    let data = serde_json::to_string(record).map_err(|e| Error::Encode(e.to_string()))?;
    let username = record
        .data
        .get(OPERATOR_KEY)
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    let expires_at = (record.expiry_date.unix_timestamp_nanos() / 1_000_000) as i64;
    Ok((data, username, expires_at))
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> Result<()> {
        // A fresh id until one is free: two sessions never share an id.
        loop {
            let (data, username, expires_at) = encode(record)?;
            let id = record.id.to_string();
            if self
                .store
                .sessions()
                .save(&id, &data, username.as_deref(), expires_at, true)
                .await
                .map_err(backend)?
            {
                return Ok(());
            }
            record.id = Id::default();
        }
    }

    /// Updates a session that still exists; one that was ended meanwhile stays ended.
    async fn save(&self, record: &Record) -> Result<()> {
        let (data, username, expires_at) = encode(record)?;
        self.store
            .sessions()
            .save(
                &record.id.to_string(),
                &data,
                username.as_deref(),
                expires_at,
                false,
            )
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn load(&self, id: &Id) -> Result<Option<Record>> {
        let data = self
            .store
            .sessions()
            .load(&id.to_string(), now_ms())
            .await
            .map_err(backend)?;
        data.map(|d| serde_json::from_str(&d).map_err(|e| Error::Decode(e.to_string())))
            .transpose()
    }

    async fn delete(&self, id: &Id) -> Result<()> {
        self.store
            .sessions()
            .delete(&id.to_string())
            .await
            .map_err(backend)
    }
}
