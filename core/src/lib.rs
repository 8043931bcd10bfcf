//! The Claimcheck engine: storage for claims on Stripe events and the queries the dashboard
//! and CLI need. Nothing here knows about HTTP frameworks or the UI.
//!
//! The vocabulary (claim states, roles, ids, money, languages) compiles everywhere, the browser
//! included; everything that touches the database, the network or the clock is behind the
//! default `store` feature.
#![forbid(unsafe_code)]

pub mod alert;
pub mod auth;
pub mod backoff;
pub mod bulk;
mod claim;
pub mod event_kind;
mod ids;
pub mod language;
pub mod money;
mod outcome;
pub mod outgoing;
pub mod text;

#[cfg(feature = "store")]
pub mod adoption;
#[cfg(feature = "store")]
pub mod alert_check;
#[cfg(feature = "store")]
pub mod alert_handling;
#[cfg(feature = "store")]
pub mod audit;
#[cfg(feature = "store")]
pub mod billing;
#[cfg(feature = "store")]
mod clock;
#[cfg(feature = "store")]
mod database_url;
#[cfg(feature = "store")]
mod error;
#[cfg(feature = "store")]
mod failpoint;
#[cfg(feature = "store")]
pub mod fulfilment;
#[cfg(feature = "store")]
pub mod observe;
#[cfg(feature = "store")]
pub mod ops;
#[cfg(feature = "store")]
pub mod payments;
#[cfg(feature = "store")]
pub mod reconcile;
#[cfg(feature = "store")]
pub mod report;
#[cfg(feature = "store")]
pub mod search;
#[cfg(feature = "store")]
pub mod spending;
#[cfg(feature = "store")]
mod store;
#[cfg(feature = "store")]
pub mod stripe;
#[cfg(feature = "store")]
pub mod token;
#[cfg(feature = "store")]
pub mod two_factor;
#[cfg(feature = "store")]
pub mod webhook;
#[cfg(feature = "store")]
pub mod worker;

pub use claim::{ClaimCounts, ClaimSource, ClaimState};
pub use event_kind::EventKind;
pub use ids::{BatchId, EventId, IdError, ObjectId, OrderId, SubscriptionRef};
pub use outcome::DeliveryOutcome;

#[cfg(feature = "store")]
pub use clock::now_ms;
#[cfg(feature = "store")]
pub use database_url::{Backend, DatabaseUrl, DatabaseUrlError};
#[cfg(feature = "store")]
pub use error::StoreError;
#[cfg(feature = "store")]
pub use store::{
    AlertDeliveryView, AlertView, AuditEntry, BatchItemView, BatchView, BatchWriter, CancelMark,
    ClaimOutcome, ClaimSummary, ClaimView, CreditWriter, CustomerView, DELIVERIES_KEPT_PER_EVENT,
    DayFigures, DeliveryView, DueDelivery, EventFilter, Fulfilled, GrantView, History, LeasedClaim,
    LedgerEntryView, LoggedDelivery, MigrationRow, MigrationStatus, NewOrder, NotRefundable,
    OperatorCredentials, OperatorView, OrderCreation, OrderFilter, OrderHistory, OrderLine,
    OrderView, ReconcileRunView, Recorded, RequestOutcome, RequestStatus, ScheduledChange,
    SelectedClaim, Store, StoreOptions, StripeRequestView, SubscriptionCheckoutView,
    SubscriptionFilter, SubscriptionView, TIMELINE_ROWS, TokenView, UnplannedRenewal, WriteHealth,
    WriteOp, WriteResult, Writes,
};
