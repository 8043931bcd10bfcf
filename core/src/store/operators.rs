//! Dashboard operators and their sessions.

use serde::Serialize;

use super::query::sql;
use super::{Operators, Sessions};
use crate::auth::Role;
use crate::error::StoreError;
use crate::language::Language;
use crate::two_factor::TotpSecret;

/// An operator as the dashboard and CLI show it: never the hash or the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperatorView {
    pub username: String,
    pub role: Role,
    pub created_at: i64,
    pub disabled_at: Option<i64>,
    /// Whether sign-in asks for a code from an authenticator app.
    pub two_factor: bool,
    /// The dashboard's language chosen by the operator; `None`: as the browser asks.
    pub language: Option<Language>,
    /// The IANA time zone the dashboard shows times in; `None`: the default (Europe/Zurich).
    pub time_zone: Option<String>,
}

/// An operator with the hash and second factor, for signing in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorCredentials {
    pub operator: OperatorView,
    pub password_hash: String,
    /// The TOTP secret: confirmed when `operator.two_factor`, else an enrolment under way.
    pub totp_secret: Option<TotpSecret>,
}

type OperatorRow = (
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

fn operator_row(row: OperatorRow) -> Result<OperatorCredentials, StoreError> {
    let (
        username,
        password_hash,
        role,
        created_at,
        disabled_at,
        secret,
        enabled_at,
        language,
        time_zone,
    ) = row;
    Ok(OperatorCredentials {
        operator: OperatorView {
            role: role.parse().map_err(StoreError::UnknownValue)?,
            username,
            created_at,
            disabled_at,
            two_factor: enabled_at.is_some(),
            language: language
                .map(|l| l.parse().map_err(StoreError::UnknownValue))
                .transpose()?,
            time_zone,
        },
        password_hash,
        totp_secret: secret.map(TotpSecret::from_base32),
    })
}

const OPERATOR_COLUMNS: &str = "username, password_hash, role, created_at, disabled_at, \
                                totp_secret, totp_enabled_at, language, time_zone";

const DELETE_SESSIONS_OF: &str = "DELETE FROM dashboard_sessions WHERE username = $1";

impl Operators<'_> {
    /// Adds an operator; `false` if the username is taken.
    pub async fn add(
        self,
        username: &str,
        password_hash: &str,
        role: Role,
        now: i64,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "INSERT INTO operators (username, password_hash, role, created_at) \
                           VALUES ($1, $2, $3, $4) ON CONFLICT (username) DO NOTHING";
        let n = self
            .pool
            .on()
            .execute(
                sql(SQL)
                    .bind(username)
                    .bind(password_hash)
                    .bind(role.as_str())
                    .bind(now),
            )
            .await?;
        Ok(n == 1)
    }

    /// Remembers how `username` reads the dashboard: its language (`None`: as the browser
    /// asks) and time zone (`None`: the default). The caller checks the zone is one it knows.
    /// `false` if there is no such operator.
    pub async fn set_preferences(
        self,
        username: &str,
        language: Option<Language>,
        time_zone: Option<&str>,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE operators SET language = $2, time_zone = $3 WHERE username = $1";
        let n = self
            .pool
            .on()
            .execute(
                sql(SQL)
                    .bind(username)
                    .bind(language.map(Language::tag))
                    .bind(time_zone),
            )
            .await?;
        Ok(n == 1)
    }

    pub async fn credentials(
        self,
        username: &str,
    ) -> Result<Option<OperatorCredentials>, StoreError> {
        let statement = format!("SELECT {OPERATOR_COLUMNS} FROM operators WHERE username = $1");
        let row: Option<OperatorRow> = self
            .pool
            .on()
            .optional(sql(&statement).bind(username))
            .await?;
        row.map(operator_row).transpose()
    }

    pub async fn list(self) -> Result<Vec<OperatorView>, StoreError> {
        let statement = format!("SELECT {OPERATOR_COLUMNS} FROM operators ORDER BY username");
        let rows: Vec<OperatorRow> = self.pool.on().all(sql(&statement)).await?;
        rows.into_iter()
            .map(|row| operator_row(row).map(|c| c.operator))
            .collect()
    }

    /// Replaces an operator's password hash; `false` if there is no such operator.
    pub async fn set_password(
        self,
        username: &str,
        password_hash: &str,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE operators SET password_hash = $2 WHERE username = $1";
        let n = self
            .pool
            .on()
            .execute(sql(SQL).bind(username).bind(password_hash))
            .await?;
        Ok(n == 1)
    }

    /// Disables (or enables again) an operator; `false` if there is no such operator. A
    /// disabled operator's sessions end with it.
    pub async fn set_disabled(
        self,
        username: &str,
        disabled: bool,
        now: i64,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE operators SET disabled_at = $2 WHERE username = $1";
        let at = disabled.then_some(now);
        let n = {
            let mut tx = self.pool.begin().await?;
            let n = tx.on().execute(sql(SQL).bind(username).bind(at)).await?;
            if disabled {
                tx.on()
                    .execute(sql(DELETE_SESSIONS_OF).bind(username))
                    .await?;
            }
            tx.commit().await?;
            n
        };
        Ok(n == 1)
    }

    /// Removes an operator and every session and recovery code of theirs.
    pub async fn remove(self, username: &str) -> Result<bool, StoreError> {
        const SQL: &str = "DELETE FROM operators WHERE username = $1";
        const CODES: &str = "DELETE FROM recovery_codes WHERE username = $1";
        let n = {
            let mut tx = self.pool.begin().await?;
            tx.on().execute(sql(CODES).bind(username)).await?;
            let n = tx.on().execute(sql(SQL).bind(username)).await?;
            tx.on()
                .execute(sql(DELETE_SESSIONS_OF).bind(username))
                .await?;
            tx.commit().await?;
            n
        };
        Ok(n == 1)
    }

    /// Starts (or restarts) enrolling a second factor: the secret is kept, not yet required.
    /// `false` if the operator has a confirmed one (reset it first) or does not exist.
    pub async fn begin_two_factor(
        self,
        username: &str,
        secret: &TotpSecret,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE operators SET totp_secret = $2, totp_last_step = NULL \
                           WHERE username = $1 AND totp_enabled_at IS NULL";
        let n = self
            .pool
            .on()
            .execute(sql(SQL).bind(username).bind(secret.as_base32()))
            .await?;
        Ok(n == 1)
    }

    /// Confirms the enrolment whose code belonged to `step` and stores the recovery codes'
    /// hashes (replacing any). `false` if there was no enrolment under way.
    pub async fn confirm_two_factor(
        self,
        username: &str,
        step: i64,
        recovery_hashes: &[String],
        now: i64,
    ) -> Result<bool, StoreError> {
        const ENABLE: &str = "UPDATE operators SET totp_enabled_at = $2, totp_last_step = $3 \
            WHERE username = $1 AND totp_secret IS NOT NULL AND totp_enabled_at IS NULL";
        const CLEAR: &str = "DELETE FROM recovery_codes WHERE username = $1";
        const ADD: &str = "INSERT INTO recovery_codes (username, code_hash, created_at) \
                           VALUES ($1, $2, $3)";
        let n = {
            let mut tx = self.pool.begin().await?;
            let n = tx
                .on()
                .execute(sql(ENABLE).bind(username).bind(now).bind(step))
                .await?;
            if n == 1 {
                tx.on().execute(sql(CLEAR).bind(username)).await?;
                for hash in recovery_hashes {
                    tx.on()
                        .execute(sql(ADD).bind(username).bind(hash).bind(now))
                        .await?;
                }
            }
            tx.commit().await?;
            n
        };
        Ok(n == 1)
    }

    /// Accepts a code's time step once: `false` if this step (or a later one) was used
    /// already, so a code seen over a shoulder or replayed is refused.
    pub async fn accept_totp_step(self, username: &str, step: i64) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE operators SET totp_last_step = $2 WHERE username = $1 \
            AND totp_enabled_at IS NOT NULL AND (totp_last_step IS NULL OR totp_last_step < $2)";
        let n = {
            let mut tx = self.pool.begin().await?;
            let n = tx.on().execute(sql(SQL).bind(username).bind(step)).await?;
            tx.commit().await?;
            n
        };
        Ok(n == 1)
    }

    /// Uses a recovery code once; `false` if it is unknown or used.
    pub async fn use_recovery_code(
        self,
        username: &str,
        code_hash: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        const SQL: &str = "UPDATE recovery_codes SET used_at = $3 \
            WHERE username = $1 AND code_hash = $2 AND used_at IS NULL";
        let n = {
            let mut tx = self.pool.begin().await?;
            let n = tx
                .on()
                .execute(sql(SQL).bind(username).bind(code_hash).bind(now))
                .await?;
            tx.commit().await?;
            n
        };
        Ok(n == 1)
    }

    /// Recovery codes not used yet.
    pub async fn recovery_codes_left(self, username: &str) -> Result<i64, StoreError> {
        const SQL: &str =
            "SELECT COUNT(*) FROM recovery_codes WHERE username = $1 AND used_at IS NULL";
        let n = self.pool.on().value(sql(SQL).bind(username)).await?;
        Ok(n)
    }

    /// Removes an operator's second factor and recovery codes and ends their sessions (a
    /// lost phone); `false` if there is no such operator.
    pub async fn reset_two_factor(self, username: &str) -> Result<bool, StoreError> {
        const RESET: &str = "UPDATE operators SET totp_secret = NULL, totp_enabled_at = NULL, \
                             totp_last_step = NULL WHERE username = $1";
        const CODES: &str = "DELETE FROM recovery_codes WHERE username = $1";
        let n = {
            let mut tx = self.pool.begin().await?;
            let n = tx.on().execute(sql(RESET).bind(username)).await?;
            tx.on().execute(sql(CODES).bind(username)).await?;
            tx.on()
                .execute(sql(DELETE_SESSIONS_OF).bind(username))
                .await?;
            tx.commit().await?;
            n
        };
        Ok(n == 1)
    }
}

impl Sessions<'_> {
    /// Ends every session of `username` (sign out everywhere); returns how many.
    pub async fn delete_of(self, username: &str) -> Result<u64, StoreError> {
        let n = self
            .pool
            .on()
            .execute(sql(DELETE_SESSIONS_OF).bind(username))
            .await?;
        Ok(n)
    }

    /// A live session record (its JSON), if any.
    pub async fn load(self, id: &str, now: i64) -> Result<Option<String>, StoreError> {
        const SQL: &str = "SELECT data FROM dashboard_sessions WHERE id = $1 AND expires_at > $2";
        let data = self
            .pool
            .on()
            .optional_value(sql(SQL).bind(id).bind(now))
            .await?;
        Ok(data)
    }

    /// Writes a session record of `username` (if signed in). With `create`, only if the id
    /// is new; otherwise only if the session still exists: a request that loaded a session
    /// before it was ended (signed out, its operator disabled) cannot bring it back when it
    /// finishes. Returns whether it was written.
    pub async fn save(
        self,
        id: &str,
        data: &str,
        username: Option<&str>,
        expires_at: i64,
        create: bool,
    ) -> Result<bool, StoreError> {
        const CREATE: &str = "INSERT INTO dashboard_sessions (id, data, expires_at, username) \
                              VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING";
        const SAVE: &str = "UPDATE dashboard_sessions \
                            SET data = $2, expires_at = $3, username = $4 WHERE id = $1";
        let statement = if create { CREATE } else { SAVE };
        let n = self
            .pool
            .on()
            .execute(
                sql(statement)
                    .bind(id)
                    .bind(data)
                    .bind(expires_at)
                    .bind(username),
            )
            .await?;
        Ok(n == 1)
    }

    pub async fn delete(self, id: &str) -> Result<(), StoreError> {
        const SQL: &str = "DELETE FROM dashboard_sessions WHERE id = $1";
        self.pool
            .on()
            .execute(sql(SQL).bind(id))
            .await
            .map(|_| ())?;
        Ok(())
    }

    pub async fn delete_expired(self, now: i64) -> Result<u64, StoreError> {
        const SQL: &str = "DELETE FROM dashboard_sessions WHERE expires_at <= $1";
        let n = self.pool.on().execute(sql(SQL).bind(now)).await?;
        Ok(n)
    }
}
