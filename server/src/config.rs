//! What `serve` needs to know: [`ServeConfig`] and its parts, with defaults that work out of
//! the box. The command line's flags and environment variables that fill it are in
//! [`flags`].

pub mod alerts;
pub mod flags;
pub mod outbound;
pub mod span;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use claimcheck_core::DatabaseUrl;
use claimcheck_core::payments::CheckoutUrls;
use claimcheck_core::stripe::StripeApi;
use claimcheck_core::webhook::{SignatureVerifier, StripeMode};
use claimcheck_core::worker::WorkerConfig;

use crate::client_ip::ClientAddress;
pub use alerts::AlertsConfig;

/// How often `serve` releases expired holds and expires lots.
pub const DEFAULT_CREDIT_UPKEEP: Duration = Duration::from_secs(30);

/// Everything `serve` needs to know.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub database_url: DatabaseUrl,
    /// Port 0 picks a free port (tests).
    pub bind: SocketAddr,
    /// Where the dashboard's files are read from; `None`: the ones the binary carries, or
    /// `target/site` if it carries none.
    pub site_root: Option<PathBuf>,
    pub webhook: WebhookConfig,
    pub worker: WorkerConfig,
    /// Fulfilment workers in this process (0: this instance only ingests).
    pub workers: usize,
    /// Outgoing Stripe calls; `None` without STRIPE_API_KEY.
    pub stripe: Option<StripeApi>,
    /// Where Checkout returns customers; `None`: the order API is not configured.
    pub checkout_urls: Option<CheckoutUrls>,
    pub dashboard: DashboardConfig,
    /// Delivery logs and payloads of processed claims older than this are pruned; `None`
    /// keeps everything.
    pub retention: Option<Duration>,
    /// The reconciler (runs when `stripe` is set and the interval is not zero).
    pub reconcile: ReconcileSchedule,
    /// The alert checks and the channels their messages go out on.
    pub alerts: AlertsConfig,
    /// Who may scrape `/metrics`, where, and how often it reads the database.
    pub metrics: MetricsConfig,
    /// What one client may hold of the server: connections, time to send headers and
    /// bodies, deliveries at once.
    pub limits: HttpLimits,
    /// Whether `serve` applies pending migrations at start.
    pub migrate: MigrateMode,
    /// How often holds past their expiry are released and lots past theirs expire (zero:
    /// never; tests that write lots dated in the past drive the upkeep themselves).
    pub credit_upkeep: Duration,
}

/// Whether `serve` applies pending migrations at start (`auto`), or refuses to start while
/// one this binary ships is not applied (`off`: `claimcheck migrate` is its own deploy step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MigrateMode {
    #[default]
    Auto,
    Off,
}

/// `/metrics`: open on the main listener by default, like `/healthz`.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    /// A scrape must carry `Authorization: Bearer <token>`.
    pub token: Option<MetricsToken>,
    /// Serve `/metrics` on this address only (not on the main one): a port the balancer
    /// does not expose.
    pub bind: Option<SocketAddr>,
    /// The database's figures (claims by state, open alerts) are read at most once per this
    /// interval, however many scrape; zero reads them at every scrape.
    pub database_every: Duration,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            token: None,
            bind: None,
            database_every: Duration::from_secs(5),
        }
    }
}

/// The bearer token `/metrics` asks for. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct MetricsToken(String);

impl MetricsToken {
    /// Compares in constant time, like every secret.
    pub fn matches(&self, given: &str) -> bool {
        use subtle::ConstantTimeEq;
        self.0.as_bytes().ct_eq(given.as_bytes()).into()
    }
}

impl std::fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsToken(…)")
    }
}

impl std::str::FromStr for MetricsToken {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let token = s.trim();
        if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the metrics token is at least 16 visible ASCII characters".into());
        }
        Ok(MetricsToken(token.to_owned()))
    }
}

/// The limits on what one client may hold of the server (applied by `serve.rs`).
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// A request's headers must have arrived this long after the connection opened or the
    /// previous answer was sent; so it is also how long an idle keep-alive connection stays.
    pub header_timeout: Duration,
    /// A request's body must have arrived this long after its headers (every route).
    pub body_timeout: Duration,
    /// Connections open at once (fewer if the open-file limit is lower). At the limit the
    /// idle connection open longest is closed for a new one; if none is idle, the new one is.
    pub max_connections: usize,
    /// Webhook deliveries read and claimed at once; more are answered 503 at once (Stripe
    /// retries them), never left waiting.
    pub webhook_concurrency: usize,
    /// The bodies those deliveries may hold in memory together (each counts what it
    /// announces, or the webhook's body limit if it announces nothing); past it, 503 too.
    pub webhook_memory_bytes: usize,
    /// After the first SIGTERM (or Ctrl-C), `/readyz` answers 503 at once and requests are
    /// still answered for this long, so the balancer takes this instance out before it stops
    /// taking connections.
    pub shutdown_grace: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connections: 1024,
            webhook_concurrency: 512,
            webhook_memory_bytes: 64 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// How often the reconciler runs, and how.
#[derive(Debug, Clone)]
pub struct ReconcileSchedule {
    /// Zero: never.
    pub interval: Duration,
    pub config: claimcheck_core::reconcile::ReconcileConfig,
}

impl Default for ReconcileSchedule {
    fn default() -> Self {
        ReconcileSchedule {
            interval: Duration::from_secs(15 * 60),
            config: claimcheck_core::reconcile::ReconcileConfig::default(),
        }
    }
}

/// Operator sessions on the dashboard.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// A session ends after this long without a request.
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in, however busy.
    pub absolute_timeout: Duration,
    /// `Secure` session cookie; `None`: as `public_url`'s scheme says, else secure unless
    /// bound to a loopback address (plain HTTP on this machine only).
    pub secure_cookie: Option<bool>,
    /// Where people reach the dashboard (`https://pay.shop.ch`), e.g. through a TLS proxy.
    pub public_url: Option<PublicUrl>,
    /// Who is asking: the peer, or behind trusted reverse proxies the address their header
    /// names.
    pub client_address: ClientAddress,
    /// Who must sign in with a second factor.
    pub require_two_factor: claimcheck_core::two_factor::TwoFactorPolicy,
    /// The language of pages for a reader who chose none and whose browser asks for
    /// neither of ours, and of alert messages (which have no reader).
    pub language: claimcheck_core::language::Language,
    /// The most credits a support operator may add or take back in one adjustment (admins:
    /// any number).
    pub support_adjust_limit: i64,
}

impl DashboardConfig {
    /// Whether the session cookie is `Secure` for a server bound to `local_addr`.
    pub fn secure_cookie(&self, local_addr: SocketAddr) -> bool {
        self.secure_cookie
            .or(self.public_url.as_ref().map(PublicUrl::is_https))
            .unwrap_or(!local_addr.ip().is_loopback())
    }
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            idle_timeout: Duration::from_secs(30 * 60),
            absolute_timeout: Duration::from_secs(12 * 3600),
            secure_cookie: None,
            public_url: None,
            client_address: ClientAddress::default(),
            require_two_factor: Default::default(),
            language: Default::default(),
            support_adjust_limit: 50,
        }
    }
}

/// The dashboard's public address: `http://` or `https://`, a host, no query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

impl PublicUrl {
    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for PublicUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let url = s.trim().trim_end_matches('/');
        let host = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or("the public URL starts with https:// (or http://)")?;
        if host.is_empty() || host.contains(['?', '#', ' ']) {
            return Err("the public URL is https://HOST[:PORT][/PATH], nothing more".into());
        }
        Ok(PublicUrl(url.to_owned()))
    }
}

/// How `POST /webhooks/stripe` checks deliveries.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// `None` without a signing secret: deliveries are answered 503 until one is set.
    pub verifier: Option<SignatureVerifier>,
    pub mode: StripeMode,
    pub max_body_bytes: usize,
}

impl Default for WebhookConfig {
    /// No signing secret yet, test mode, bodies up to 1 MiB.
    fn default() -> Self {
        WebhookConfig {
            verifier: None,
            mode: StripeMode::Test,
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// Where `serve` keeps its data when told nothing.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://data/claimcheck.db";

impl Default for ServeConfig {
    /// `serve` with no flags and no environment: SQLite in `data/`, 127.0.0.1:3000, two
    /// workers, no Stripe API key (order API and refunds off).
    fn default() -> Self {
        ServeConfig {
            database_url: DEFAULT_DATABASE_URL
                .parse()
                .unwrap_or_else(|_| unreachable!("a valid literal URL")),
            bind: SocketAddr::from(([127, 0, 0, 1], 3000)),
            site_root: None,
            webhook: WebhookConfig::default(),
            worker: WorkerConfig::default(),
            workers: claimcheck_core::worker::DEFAULT_WORKERS,
            stripe: None,
            checkout_urls: None,
            dashboard: DashboardConfig::default(),
            retention: None,
            reconcile: ReconcileSchedule::default(),
            alerts: AlertsConfig::default(),
            metrics: MetricsConfig::default(),
            limits: HttpLimits::default(),
            migrate: MigrateMode::default(),
            credit_upkeep: DEFAULT_CREDIT_UPKEEP,
        }
    }
}
