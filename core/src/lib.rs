//! The Claimcheck engine: storage for claims on Stripe events and the queries the dashboard
//! and CLI need. Nothing here knows about HTTP frameworks or the UI.
#![forbid(unsafe_code)]

pub mod auth;
mod claim;
mod clock;
mod database_url;
mod error;
mod failpoint;
pub mod fulfilment;
mod ids;
pub mod money;
pub mod payments;
pub mod reconcile;
mod store;
pub mod stripe;
pub mod token;
pub mod two_factor;
pub mod webhook;
pub mod worker;

pub use claim::{ClaimCounts, ClaimState};
pub use clock::now_ms;
pub use database_url::{Backend, DatabaseUrl, DatabaseUrlError};
pub use error::StoreError;
pub use ids::{EventId, IdError, ObjectId, OrderId};
pub use store::{
    AuditEntry, BatchWriter, ClaimOutcome, ClaimSource, ClaimView, CustomerView,
    DELIVERIES_KEPT_PER_EVENT, DeliveryView, EventFilter, Fulfilled, LeasedClaim, LedgerEntryView,
    MigrationStatus, NewOrder, OperatorCredentials, OperatorView, OrderCreation, OrderView,
    ReconcileRunView, RequestOutcome, RequestStatus, SYNTHETIC_CUSTOMERS, Store, StoreOptions,
    StripeRequestView, TokenView, WriteOp, WriteResult,
};
