//! Data the dashboard pages show, and the server functions that fetch it, one module per
//! page.
//!
//! Types here cross the wire between server and browser, so they are plain serde structs
//! in the engine's vocabulary (claim states, roles), which compiles for the browser too; the
//! engine's storage stays on the server. Every server function checks the session and
//! the role on the server before it reads anything (`require`). Mutations are form posts to
//! `/dashboard/actions/…` (see the server crate), so they work without WASM.

#[cfg(feature = "ssr")]
use crate::i18n::td_string;
use claimcheck_core::ClaimState;
use claimcheck_core::auth::Role;
use claimcheck_core::money::{LedgerKind, OrderStatus};
use claimcheck_core::outgoing::RequestStatus;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

// One module per page (as `pages/`), each with its wire types and server functions; the
// server-side helpers they share are in `server`.
pub mod alerts;
mod audit;
mod bulk_redrive;
mod claims;
mod customers;
mod events;
mod me;
mod operators;
mod orders;
mod overview;
mod preferences;
mod reconcile;
mod refund;
mod requests;
mod search;
#[cfg(feature = "ssr")]
mod server;
mod subscriptions;
mod timeline;
mod two_factor;

pub use audit::*;
pub use bulk_redrive::*;
pub use claims::*;
pub use customers::*;
pub use events::*;
pub use me::*;
pub use operators::*;
pub use orders::*;
pub use overview::*;
pub use preferences::*;
pub use reconcile::*;
pub use refund::*;
pub use requests::*;
pub use search::*;
pub use subscriptions::*;
pub use timeline::*;
pub use two_factor::*;
