//! The binary's error: what stops start-up or a command.

use std::net::SocketAddr;

use claimcheck_core::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("configuration: {0}")]
    Config(String),
    #[error("{0}")]
    Command(String),
    #[error("database {url}")]
    Store {
        /// The URL with its password hidden.
        url: String,
        #[source]
        source: StoreError,
    },
    #[error("cannot listen on {addr} (CLAIMCHECK_BIND or CLAIMCHECK_METRICS_BIND)")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}
