//! The flags and environment variables behind `serve` and the commands that share its
//! settings (database, Stripe client, workers). Every setting has both, and a default that
//! works out of the box: the one `ServeConfig::default()` and its parts hold, never written
//! here again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use claimcheck_core::billing::Plans;
use claimcheck_core::fulfilment::Packages;
use claimcheck_core::payments::CheckoutUrls;
use claimcheck_core::stripe::{ApiKey, StripeApi, StripeConfig};
use claimcheck_core::webhook::{SignatureVerifier, SigningSecret, StripeMode};
use claimcheck_core::worker::WorkerConfig;
use claimcheck_core::{DatabaseUrl, Store, StoreError, StoreOptions};
use clap::{Args, ValueEnum};

use super::span::Span;

use super::{
    DEFAULT_DATABASE_URL, DashboardConfig, HttpLimits, MetricsConfig, MetricsToken, MigrateMode,
    PublicUrl, ReconcileSchedule, ServeConfig, WebhookConfig,
};
use crate::client_ip::{ClientAddress, ClientIpHeader, TrustedProxies};
use crate::error::ServerError;

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Where claims, orders and the ledger live: sqlite://PATH or postgres://USER@HOST/DB.
    #[arg(
        long = "database-url",
        env = "DATABASE_URL",
        value_name = "DATABASE_URL",
        default_value = DEFAULT_DATABASE_URL
    )]
    pub database_url: DatabaseUrl,
}

impl DatabaseArgs {
    /// Opens the database without touching its schema.
    pub async fn connect(&self) -> Result<Store, ServerError> {
        Store::connect(&self.database_url, &StoreOptions::default())
            .await
            .map_err(self.error())
    }

    /// Wraps a storage error with this database's URL (password hidden).
    pub fn error(&self) -> impl Fn(StoreError) -> ServerError + use<> {
        let url = self.database_url.to_string();
        move |source| ServerError::Store {
            url: url.clone(),
            source,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// `auto`: apply pending migrations at start; `off`: refuse to start while one is
    /// pending, naming it (migrations run as their own deploy step, `claimcheck migrate`).
    #[arg(
        long,
        env = "CLAIMCHECK_MIGRATE",
        value_name = "CLAIMCHECK_MIGRATE",
        value_enum,
        default_value_t = MigrateMode::Auto
    )]
    pub migrate: MigrateMode,
    /// Address and port to listen on.
    #[arg(
        long,
        env = "CLAIMCHECK_BIND",
        value_name = "CLAIMCHECK_BIND",
        default_value_t = ServeConfig::default().bind
    )]
    pub bind: SocketAddr,
    /// Folder holding the built dashboard assets (pkg/claimcheck.js, .wasm, .css), served
    /// instead of the ones a release binary carries (development: `cargo leptos watch`).
    /// Default: what the binary carries, else `target/site`.
    #[arg(long, env = "LEPTOS_SITE_ROOT", value_name = "LEPTOS_SITE_ROOT")]
    pub site_root: Option<PathBuf>,
    /// Stripe endpoint signing secrets (whsec_…). Several, comma-separated, while a secret
    /// is rotated: a delivery signed with any of them is accepted.
    #[arg(
        long = "webhook-secret",
        env = "STRIPE_WEBHOOK_SECRET",
        value_name = "STRIPE_WEBHOOK_SECRET",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub webhook_secrets: Vec<String>,
    /// Refuse deliveries whose signature timestamp is older than this many seconds.
    #[arg(
        long = "webhook-tolerance-secs",
        env = "CLAIMCHECK_WEBHOOK_TOLERANCE_SECS",
        value_name = "CLAIMCHECK_WEBHOOK_TOLERANCE_SECS",
        default_value_t = SignatureVerifier::DEFAULT_TOLERANCE.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub webhook_tolerance_secs: u64,
    /// Largest webhook body accepted, in bytes; larger deliveries are answered 413.
    #[arg(
        long = "webhook-max-body-bytes",
        env = "CLAIMCHECK_WEBHOOK_MAX_BODY_BYTES",
        value_name = "CLAIMCHECK_WEBHOOK_MAX_BODY_BYTES",
        default_value_t = WebhookConfig::default().max_body_bytes,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=u64::from(u32::MAX))
    )]
    pub webhook_max_body_bytes: usize,
    /// Which Stripe mode's events this endpoint accepts; the other mode's are refused.
    #[arg(
        long = "stripe-mode",
        env = "CLAIMCHECK_STRIPE_MODE",
        value_name = "CLAIMCHECK_STRIPE_MODE",
        value_enum,
        default_value_t = WebhookConfig::default().mode.into()
    )]
    pub stripe_mode: ModeArg,
    #[command(flatten)]
    pub worker: WorkerArgs,
    #[command(flatten)]
    pub stripe: StripeArgs,
    /// Where Stripe Checkout sends a customer after paying ({CHECKOUT_SESSION_ID} is filled
    /// in by Stripe). Needed by the order API.
    #[arg(
        long = "checkout-success-url",
        env = "CLAIMCHECK_CHECKOUT_SUCCESS_URL",
        value_name = "CLAIMCHECK_CHECKOUT_SUCCESS_URL"
    )]
    pub checkout_success_url: Option<String>,
    /// Where Stripe Checkout sends a customer who cancels. Needed by the order API.
    #[arg(
        long = "checkout-cancel-url",
        env = "CLAIMCHECK_CHECKOUT_CANCEL_URL",
        value_name = "CLAIMCHECK_CHECKOUT_CANCEL_URL"
    )]
    pub checkout_cancel_url: Option<String>,
    /// A dashboard session ends after this many minutes without a request.
    #[arg(
        long = "session-idle-minutes",
        env = "CLAIMCHECK_SESSION_IDLE_MINUTES",
        value_name = "CLAIMCHECK_SESSION_IDLE_MINUTES",
        default_value_t = DashboardConfig::default().idle_timeout.as_secs() / 60,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub session_idle_minutes: u64,
    /// A dashboard session ends this many hours after sign-in.
    #[arg(
        long = "session-absolute-hours",
        env = "CLAIMCHECK_SESSION_ABSOLUTE_HOURS",
        value_name = "CLAIMCHECK_SESSION_ABSOLUTE_HOURS",
        default_value_t = DashboardConfig::default().absolute_timeout.as_secs() / 3600,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub session_absolute_hours: u64,
    /// Mark the session cookie Secure (HTTPS only). Default: yes, unless the server is bound
    /// to a loopback address (plain HTTP on this machine).
    #[arg(
        long = "secure-cookie",
        env = "CLAIMCHECK_SECURE_COOKIE",
        value_name = "CLAIMCHECK_SECURE_COOKIE",
        action = clap::ArgAction::Set
    )]
    pub secure_cookie: Option<bool>,
    /// Where people reach the dashboard, e.g. https://pay.shop.ch behind a TLS proxy: the
    /// session cookie is Secure when it is https.
    #[arg(
        long = "public-url",
        env = "CLAIMCHECK_PUBLIC_URL",
        value_name = "CLAIMCHECK_PUBLIC_URL"
    )]
    pub public_url: Option<PublicUrl>,
    /// Reverse proxies (addresses or networks, comma-separated) whose client-address header
    /// (--client-ip-header) names the client; from any other peer it is ignored.
    #[arg(
        long = "trusted-proxies",
        env = "CLAIMCHECK_TRUSTED_PROXIES",
        value_name = "CLAIMCHECK_TRUSTED_PROXIES",
        default_value = ""
    )]
    pub trusted_proxies: TrustedProxies,
    /// The one header the trusted proxies set to name the client (the proxy must set or
    /// append it): x-forwarded-for, forwarded or x-real-ip. No other header is read.
    #[arg(
        long = "client-ip-header",
        env = "CLAIMCHECK_CLIENT_IP_HEADER",
        value_name = "CLAIMCHECK_CLIENT_IP_HEADER",
        value_enum,
        default_value_t = DashboardConfig::default().client_address.header
    )]
    pub client_ip_header: ClientIpHeader,
    /// Prune delivery logs and the payloads of processed claims older than this many days
    /// (claims themselves are kept, so late retries still dedupe). 0 keeps everything.
    #[arg(
        long = "retention-days",
        env = "CLAIMCHECK_RETENTION_DAYS",
        value_name = "CLAIMCHECK_RETENTION_DAYS",
        default_value_t = ServeConfig::default().retention.map_or(0, |d| d.as_secs() / 86_400)
    )]
    pub retention_days: u64,
    /// Who must sign in with a code from an authenticator app: off, admin or all. An
    /// operator without one is sent to set it up before anything else.
    #[arg(
        long = "require-2fa",
        env = "CLAIMCHECK_REQUIRE_2FA",
        value_name = "CLAIMCHECK_REQUIRE_2FA",
        default_value_t = DashboardConfig::default().require_two_factor
    )]
    pub require_two_factor: claimcheck_core::two_factor::TwoFactorPolicy,
    /// The language (en or de-CH) of alert messages, and of the dashboard for a reader who
    /// chose none and whose browser asks for neither.
    #[arg(
        long = "language",
        env = "CLAIMCHECK_LANGUAGE",
        value_name = "CLAIMCHECK_LANGUAGE",
        default_value_t = DashboardConfig::default().language
    )]
    pub language: claimcheck_core::language::Language,
    /// The most credits a support operator may add or take back in one adjustment on the
    /// dashboard (admins: any number).
    #[arg(
        long = "support-adjust-limit",
        env = "CLAIMCHECK_SUPPORT_ADJUST_LIMIT",
        value_name = "CLAIMCHECK_SUPPORT_ADJUST_LIMIT",
        default_value_t = DashboardConfig::default().support_adjust_limit,
        value_parser = clap::value_parser!(i64).range(0..=claimcheck_core::fulfilment::MAX_CREDITS)
    )]
    pub support_adjust_limit: i64,
    /// How often the reconciler lists Stripe's events and claims the ones never delivered
    /// (`15m`, `1h`, `90s`; `0` turns it off). It needs STRIPE_API_KEY.
    #[arg(
        long = "reconcile-interval",
        env = "CLAIMCHECK_RECONCILE_INTERVAL",
        value_name = "CLAIMCHECK_RECONCILE_INTERVAL",
        default_value_t = Span(ReconcileSchedule::default().interval)
    )]
    pub reconcile_interval: Span,
    /// How far back the reconciler's first run looks (at most 30 days).
    #[arg(
        long = "reconcile-lookback",
        env = "CLAIMCHECK_RECONCILE_LOOKBACK",
        value_name = "CLAIMCHECK_RECONCILE_LOOKBACK",
        default_value_t = Span(ReconcileSchedule::default().config.first_lookback)
    )]
    pub reconcile_lookback: Span,
    #[command(flatten)]
    pub alerts: super::alerts::AlertArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// A bearer token /metrics asks for (at least 16 characters); unset, anyone who reaches
    /// it may scrape.
    #[arg(
        long = "metrics-token",
        env = "CLAIMCHECK_METRICS_TOKEN",
        value_name = "CLAIMCHECK_METRICS_TOKEN",
        hide_env_values = true
    )]
    pub metrics_token: Option<MetricsToken>,
    /// Serve /metrics on this address only (e.g. 127.0.0.1:9090), not on CLAIMCHECK_BIND.
    #[arg(
        long = "metrics-bind",
        env = "CLAIMCHECK_METRICS_BIND",
        value_name = "CLAIMCHECK_METRICS_BIND"
    )]
    pub metrics_bind: Option<SocketAddr>,
    /// /metrics reads the claims and alerts from the database at most once per this
    /// interval, however many scrape (`0`: at every scrape).
    #[arg(
        long = "metrics-database-interval",
        env = "CLAIMCHECK_METRICS_DATABASE_INTERVAL",
        value_name = "CLAIMCHECK_METRICS_DATABASE_INTERVAL",
        default_value_t = Span(MetricsConfig::default().database_every)
    )]
    pub metrics_database_interval: Span,
}

/// What one client may hold of the server.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// A request's headers must arrive within this after the connection opens or the last
    /// answer; it is also how long an idle keep-alive connection stays open.
    #[arg(
        long = "header-timeout",
        env = "CLAIMCHECK_HEADER_TIMEOUT",
        value_name = "CLAIMCHECK_HEADER_TIMEOUT",
        default_value_t = Span(HttpLimits::default().header_timeout)
    )]
    pub header_timeout: Span,
    /// A request's body must arrive within this after its headers, on every route.
    #[arg(
        long = "body-timeout",
        env = "CLAIMCHECK_BODY_TIMEOUT",
        value_name = "CLAIMCHECK_BODY_TIMEOUT",
        default_value_t = Span(HttpLimits::default().body_timeout)
    )]
    pub body_timeout: Span,
    /// Connections open at once (fewer if the open-file limit is lower); at the limit the
    /// longest idle one is closed for a new one.
    #[arg(
        long = "max-connections",
        env = "CLAIMCHECK_MAX_CONNECTIONS",
        value_name = "CLAIMCHECK_MAX_CONNECTIONS",
        default_value_t = HttpLimits::default().max_connections,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000)
    )]
    pub max_connections: usize,
    /// Webhook deliveries read and claimed at once; more are answered 503 (Stripe retries).
    #[arg(
        long = "webhook-concurrency",
        env = "CLAIMCHECK_WEBHOOK_CONCURRENCY",
        value_name = "CLAIMCHECK_WEBHOOK_CONCURRENCY",
        default_value_t = HttpLimits::default().webhook_concurrency,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000)
    )]
    pub webhook_concurrency: usize,
    /// Bytes of body the webhook's deliveries may hold in memory together (each counts what
    /// it announces, or the body limit); more are answered 503.
    #[arg(
        long = "webhook-memory-bytes",
        env = "CLAIMCHECK_WEBHOOK_MEMORY_BYTES",
        value_name = "CLAIMCHECK_WEBHOOK_MEMORY_BYTES",
        default_value_t = HttpLimits::default().webhook_memory_bytes,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=u64::from(u32::MAX))
    )]
    pub webhook_memory_bytes: usize,
    /// After SIGTERM, /readyz answers 503 at once and requests are still answered for this
    /// long (the balancer notices), then no new connection is taken (at most 20s).
    #[arg(
        long = "shutdown-grace",
        env = "CLAIMCHECK_SHUTDOWN_GRACE",
        value_name = "CLAIMCHECK_SHUTDOWN_GRACE",
        default_value_t = Span(HttpLimits::default().shutdown_grace)
    )]
    pub shutdown_grace: Span,
}

impl LimitArgs {
    /// The grace leaves the requests in flight and the workers at least 10 s of the 30 s a
    /// stop may take.
    fn grace(&self) -> Result<Duration, ServerError> {
        let most = crate::shutdown::STOP_WITHIN - Duration::from_secs(10);
        if self.shutdown_grace.0 > most {
            return Err(ServerError::Config(format!(
                "CLAIMCHECK_SHUTDOWN_GRACE: at most {}s (a stop takes at most {}s)",
                most.as_secs(),
                crate::shutdown::STOP_WITHIN.as_secs()
            )));
        }
        Ok(self.shutdown_grace.0)
    }

    fn limits(&self) -> Result<HttpLimits, ServerError> {
        for (setting, span) in [
            ("CLAIMCHECK_HEADER_TIMEOUT", self.header_timeout),
            ("CLAIMCHECK_BODY_TIMEOUT", self.body_timeout),
        ] {
            if span.0.is_zero() {
                return Err(ServerError::Config(format!("{setting}: 0 is not allowed")));
            }
        }
        Ok(HttpLimits {
            header_timeout: self.header_timeout.0,
            body_timeout: self.body_timeout.0,
            max_connections: self.max_connections,
            webhook_concurrency: self.webhook_concurrency,
            webhook_memory_bytes: self.webhook_memory_bytes,
            shutdown_grace: self.grace()?,
        })
    }
}

/// The outgoing Stripe client: shared by `serve` and `orders refund`.
#[derive(Debug, Clone, Args)]
pub struct StripeArgs {
    /// Stripe secret key (sk_…) for outgoing calls (Checkout Sessions, refunds). Without it
    /// the order API answers 503 and refunds are refused.
    #[arg(
        long = "stripe-api-key",
        env = "STRIPE_API_KEY",
        value_name = "STRIPE_API_KEY",
        hide_env_values = true
    )]
    pub stripe_api_key: Option<String>,
    /// Base URL of the Stripe API (the simulator's, in tests and the demo).
    #[arg(
        long = "stripe-api-base",
        env = "STRIPE_API_BASE",
        value_name = "STRIPE_API_BASE",
        default_value = StripeConfig::DEFAULT_API_BASE
    )]
    pub stripe_api_base: String,
    /// How long one outgoing attempt may take before it counts as a timeout, in ms.
    #[arg(
        long = "stripe-timeout-ms",
        env = "CLAIMCHECK_STRIPE_TIMEOUT_MS",
        value_name = "CLAIMCHECK_STRIPE_TIMEOUT_MS",
        default_value_t = millis(StripeConfig::DEFAULT_TIMEOUT),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub stripe_timeout_ms: u64,
    /// Attempts per outgoing call (same Idempotency-Key each time) before it is left
    /// indeterminate for a later retry.
    #[arg(
        long = "stripe-max-attempts",
        env = "CLAIMCHECK_STRIPE_MAX_ATTEMPTS",
        value_name = "CLAIMCHECK_STRIPE_MAX_ATTEMPTS",
        default_value_t = StripeConfig::DEFAULT_MAX_ATTEMPTS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub stripe_max_attempts: u32,
    /// Wait before the second attempt, in ms; doubled for each further one (at most 8 s).
    #[arg(
        long = "stripe-backoff-ms",
        env = "CLAIMCHECK_STRIPE_BACKOFF_MS",
        value_name = "CLAIMCHECK_STRIPE_BACKOFF_MS",
        default_value_t = millis(StripeConfig::DEFAULT_BASE_BACKOFF)
    )]
    pub stripe_backoff_ms: u64,
}

impl StripeArgs {
    /// The client, or `None` when no API key is set.
    pub fn api(&self) -> Result<Option<StripeApi>, ServerError> {
        let Some(key) = self
            .stripe_api_key
            .as_deref()
            .filter(|k| !k.trim().is_empty())
        else {
            return Ok(None);
        };
        let key =
            ApiKey::new(key).map_err(|e| ServerError::Config(format!("STRIPE_API_KEY: {e}")))?;
        super::outbound::check(&self.stripe_api_base)
            .map_err(|e| ServerError::Config(format!("STRIPE_API_BASE: {e}")))?;
        let config = StripeConfig {
            api_base: self.stripe_api_base.clone(),
            timeout: Duration::from_millis(self.stripe_timeout_ms),
            max_attempts: self.stripe_max_attempts,
            base_backoff: Duration::from_millis(self.stripe_backoff_ms),
            ..StripeConfig::new(key)
        };
        StripeApi::new(config)
            .map(Some)
            .map_err(|e| ServerError::Config(format!("STRIPE_API_BASE: {e}")))
    }
}

/// How claims are worked: shared by `serve` and `claims redrive`.
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// Fulfilment workers in this process; 0 makes an instance that only ingests.
    #[arg(
        long,
        env = "CLAIMCHECK_WORKERS",
        value_name = "CLAIMCHECK_WORKERS",
        default_value_t = claimcheck_core::worker::DEFAULT_WORKERS
    )]
    pub workers: usize,
    /// How long a worker holds a claim's lease (its fulfilment budget), in seconds.
    #[arg(
        long = "lease-secs",
        env = "CLAIMCHECK_LEASE_SECS",
        value_name = "CLAIMCHECK_LEASE_SECS",
        default_value_t = WorkerConfig::default().lease.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub lease_secs: u64,
    /// Attempts before a claim is marked failed and waits for an operator.
    #[arg(
        long = "max-attempts",
        env = "CLAIMCHECK_MAX_ATTEMPTS",
        value_name = "CLAIMCHECK_MAX_ATTEMPTS",
        default_value_t = WorkerConfig::default().max_attempts,
        value_parser = clap::value_parser!(i64).range(1..)
    )]
    pub max_attempts: i64,
    /// Wait before a failed claim is tried again, in ms; doubled for each further attempt (at
    /// most an hour).
    #[arg(
        long = "retry-backoff-ms",
        env = "CLAIMCHECK_RETRY_BACKOFF_MS",
        value_name = "CLAIMCHECK_RETRY_BACKOFF_MS",
        default_value_t = millis(WorkerConfig::default().base_backoff),
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub retry_backoff_ms: u64,
    /// Take stale claims (lease expired: their worker died) again automatically.
    #[arg(
        long = "auto-rescue",
        env = "CLAIMCHECK_AUTO_RESCUE",
        value_name = "CLAIMCHECK_AUTO_RESCUE",
        default_value_t = WorkerConfig::default().auto_rescue,
        action = clap::ArgAction::Set
    )]
    pub auto_rescue: bool,
    /// Packages on sale: NAME=CREDITS[:AMOUNT:CURRENCY],… (amount in minor units). Credits
    /// serve sessions without metadata.credits; the order API sells packages with a price.
    #[arg(
        long,
        env = "CLAIMCHECK_PACKAGES",
        value_name = "CLAIMCHECK_PACKAGES",
        default_value = ""
    )]
    pub packages: Packages,
    /// Subscription plans: NAME=CREDITS:AMOUNT:CURRENCY:INTERVAL[:reset],… (amount in minor
    /// units; interval day, week, month or year; `reset`: unused credits lapse at the
    /// period's end). A paid invoice's lines are matched to plans by unit price and currency.
    #[arg(
        long,
        env = "CLAIMCHECK_PLANS",
        value_name = "CLAIMCHECK_PLANS",
        default_value = ""
    )]
    pub plans: Plans,
}

impl WorkerArgs {
    pub fn config(&self) -> WorkerConfig {
        WorkerConfig {
            lease: Duration::from_secs(self.lease_secs),
            max_attempts: self.max_attempts,
            base_backoff: Duration::from_millis(self.retry_backoff_ms),
            auto_rescue: self.auto_rescue,
            packages: self.packages.clone(),
            plans: self.plans.clone(),
            ..WorkerConfig::default()
        }
    }
}

/// Whole milliseconds, for the settings given in ms.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Test,
    Live,
}

impl From<StripeMode> for ModeArg {
    fn from(mode: StripeMode) -> Self {
        match mode {
            StripeMode::Test => ModeArg::Test,
            StripeMode::Live => ModeArg::Live,
        }
    }
}

impl From<ModeArg> for StripeMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Test => StripeMode::Test,
            ModeArg::Live => StripeMode::Live,
        }
    }
}

impl ServeArgs {
    pub fn into_config(self) -> Result<ServeConfig, ServerError> {
        let secrets = self
            .webhook_secrets
            .into_iter()
            .filter(|s| !s.trim().is_empty())
            .map(SigningSecret::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ServerError::Config(format!("STRIPE_WEBHOOK_SECRET: {e}")))?;
        let verifier = if secrets.is_empty() {
            None
        } else {
            let tolerance = Duration::from_secs(self.webhook_tolerance_secs);
            Some(
                SignatureVerifier::new(secrets, tolerance)
                    .map_err(|e| ServerError::Config(e.to_string()))?,
            )
        };
        Ok(ServeConfig {
            migrate: self.migrate,
            database_url: self.database.database_url,
            bind: self.bind,
            site_root: self.site_root,
            webhook: WebhookConfig {
                verifier,
                mode: self.stripe_mode.into(),
                max_body_bytes: self.webhook_max_body_bytes,
            },
            worker: self.worker.config(),
            workers: self.worker.workers,
            stripe: self.stripe.api()?,
            dashboard: DashboardConfig {
                idle_timeout: Duration::from_secs(self.session_idle_minutes * 60),
                absolute_timeout: Duration::from_secs(self.session_absolute_hours * 3600),
                secure_cookie: self.secure_cookie,
                public_url: self.public_url,
                client_address: ClientAddress {
                    trusted: self.trusted_proxies,
                    header: self.client_ip_header,
                },
                require_two_factor: self.require_two_factor,
                language: self.language,
                support_adjust_limit: self.support_adjust_limit,
            },
            alerts: self.alerts.into_config()?,
            metrics: MetricsConfig {
                token: self.metrics_token,
                bind: self.metrics_bind,
                database_every: self.metrics_database_interval.0,
            },
            limits: self.limits.limits()?,
            credit_upkeep: super::DEFAULT_CREDIT_UPKEEP,
            retention: (self.retention_days > 0)
                .then(|| Duration::from_secs(self.retention_days.saturating_mul(86_400))),
            reconcile: ReconcileSchedule {
                interval: self.reconcile_interval.0,
                config: claimcheck_core::reconcile::ReconcileConfig {
                    first_lookback: self
                        .reconcile_lookback
                        .0
                        .min(claimcheck_core::reconcile::MAX_LOOKBACK),
                    mode: self.stripe_mode.into(),
                    ..Default::default()
                },
            },
            checkout_urls: match (self.checkout_success_url, self.checkout_cancel_url) {
                (Some(success_url), Some(cancel_url)) => Some(CheckoutUrls {
                    success_url,
                    cancel_url,
                }),
                (None, None) => None,
                _ => {
                    return Err(ServerError::Config(
                        "CLAIMCHECK_CHECKOUT_SUCCESS_URL and CLAIMCHECK_CHECKOUT_CANCEL_URL \
                         are set together"
                            .into(),
                    ));
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    /// `serve` with no flags, whatever this process's environment says.
    fn no_flags() -> ServeConfig {
        let matches = Serve::command()
            .mut_args(|arg| arg.env(None))
            .try_get_matches_from(["serve"])
            .unwrap();
        Serve::from_arg_matches(&matches)
            .unwrap()
            .args
            .into_config()
            .unwrap()
    }

    #[test]
    fn no_flags_is_the_default_configuration() {
        assert_eq!(
            format!("{:?}", no_flags()),
            format!("{:?}", ServeConfig::default())
        );
    }
}
