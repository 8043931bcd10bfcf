//! One module per page.

mod not_found;
mod overview;

pub use not_found::NotFound;
pub use overview::OverviewPage;
