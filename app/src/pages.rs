//! One module per page.

mod alerts;
mod audit;
mod bulk_redrive;
mod claims;
mod customers;
mod events;
mod login;
mod not_found;
mod operators;
mod orders;
mod overview;
mod preferences;
mod reconcile;
mod refund;
mod requests;
mod search;
mod timeline;
mod two_factor;

pub use alerts::{AlertBadge, AlertsPage};
pub use audit::AuditPage;
pub use bulk_redrive::{BulkBatchPage, BulkRedrivePage};
pub use claims::ClaimsPage;
pub use customers::CustomerPage;
pub use events::{EventPage, EventsPage, RedrivePage};
pub use login::LoginPage;
pub use not_found::NotFound;
pub use operators::OperatorsPage;
pub use orders::{OrderPage, OrdersPage};
pub use overview::OverviewPage;
pub use preferences::PreferencesPage;
pub use reconcile::ReconcilePage;
pub use refund::RefundPage;
pub use requests::RequestsPage;
pub use search::SearchPage;
pub use two_factor::{TwoFactorLoginPage, TwoFactorPage};
