//! An operator's own language and time zone.

use super::*;

/// How the signed-in operator reads the dashboard, and the time zones to pick from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preferences {
    /// `None`: as the browser asks.
    pub language: Option<claimcheck_core::language::Language>,
    /// `None`: the default zone.
    pub time_zone: Option<String>,
    pub zones: Vec<String>,
    /// Now, as the dashboard shows times to this operator.
    pub now: String,
}

#[server(prefix = "/dashboard/fn", endpoint = "preferences")]
pub async fn get_preferences() -> Result<Preferences, ServerFnError> {
    let (_, operator) = server::require(Role::Viewer).await?;
    Ok(Preferences {
        language: operator.language,
        time_zone: operator.time_zone,
        zones: crate::i18n::time_zones().map(str::to_owned).collect(),
        now: server::time(claimcheck_core::now_ms()),
    })
}
