//! Setting up the second factor.

use super::*;

/// Where the signed-in operator's two-factor sign-in stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwoFactor {
    pub enabled: bool,
    /// The operator may not use the dashboard until it is on (`CLAIMCHECK_REQUIRE_2FA`).
    pub required: bool,
    pub recovery_codes_left: i64,
    /// An enrolment under way: the QR code (SVG) and the secret to type in by hand.
    pub pending: Option<PendingTwoFactor>,
    /// Recovery codes made just now, shown this once.
    pub fresh_codes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingTwoFactor {
    pub qr_svg: String,
    pub secret: String,
}

#[server(prefix = "/dashboard/fn", endpoint = "two_factor")]
pub async fn get_two_factor() -> Result<TwoFactor, ServerFnError> {
    use claimcheck_core::two_factor::{FreshRecoveryCodes, MustEnrol};

    let (store, operator) = server::require(Role::Viewer).await?;
    let parts: http::request::Parts = leptos_axum::extract().await?;
    let credentials = store
        .operators()
        .credentials(&operator.username)
        .await
        .map_err(server::unavailable)?
        .ok_or_else(|| server::error(td_string!(server::locale(), messages.sign_in)))?;
    let enabled = credentials.operator.two_factor;
    let pending = match credentials.totp_secret.filter(|_| !enabled) {
        Some(secret) => Some(PendingTwoFactor {
            qr_svg: secret.qr_svg(&operator.username).map_err(server::error)?,
            secret: secret.as_base32().to_owned(),
        }),
        None => None,
    };
    Ok(TwoFactor {
        enabled,
        required: parts.extensions.get::<MustEnrol>().is_some(),
        recovery_codes_left: store
            .operators()
            .recovery_codes_left(&operator.username)
            .await
            .map_err(server::unavailable)?,
        pending,
        fresh_codes: parts
            .extensions
            .get::<FreshRecoveryCodes>()
            .map(|c| c.0.clone())
            .unwrap_or_default(),
    })
}
