//! Data the dashboard pages show, and the server functions that fetch it.
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

pub mod alerts;

/// The signed-in operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub username: String,
    pub role: Role,
}

impl Me {
    pub fn can_redrive(&self) -> bool {
        self.role.can_redrive()
    }

    pub fn is_admin(&self) -> bool {
        self.role.can_administer()
    }
}

/// The overview page's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// "sqlite" or "postgres".
    pub backend: String,
    /// When the server read these figures, as text in UTC.
    pub checked_at: String,
    /// Claims per state, in the order operators read them.
    pub claims: Vec<StateCount>,
    /// Deliveries per hour over the last 24 hours, oldest first.
    pub hours: Vec<HourCount>,
    /// Acknowledgement latency bounds (ms) since this server started, and over how many.
    pub ack_p50_ms: Option<f64>,
    pub ack_p99_ms: Option<f64>,
    pub acked: u64,
    /// Credits unlocked since midnight UTC.
    pub credits_today: i64,
    /// The reconciler's last run, if any.
    pub reconcile: Option<ReconcileSummary>,
    /// Deliveries refused for their signature since the last accepted one (this server).
    pub bad_signatures_in_a_row: u64,
    /// The operator may reconcile now (an admin, with STRIPE_API_KEY configured).
    pub can_reconcile: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileSummary {
    pub at: String,
    pub actor: String,
    pub dry_run: bool,
    pub listed: i64,
    pub claimed: i64,
    pub error: Option<String>,
}

/// What the dashboard knows of the webhook and the reconciler, from the server.
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct ServerHealth {
    pub bad_signatures_in_a_row: std::sync::Arc<dyn Fn() -> u64 + Send + Sync>,
    pub stripe: Option<claimcheck_core::stripe::StripeApi>,
    pub reconcile: claimcheck_core::reconcile::ReconcileConfig,
}

/// A dry run of the reconciler: what "Reconcile now" would claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcilePreview {
    /// False without STRIPE_API_KEY: nothing can be listed.
    pub configured: bool,
    pub since: String,
    pub listed: u64,
    pub already_claimed: u64,
    pub would_claim: u64,
    /// (event type, listed, already claimed, would claim)
    pub per_type: Vec<(String, u64, u64, u64)>,
}

#[server(prefix = "/dashboard/fn", endpoint = "reconcile_preview")]
pub async fn get_reconcile_preview() -> Result<ReconcilePreview, ServerFnError> {
    let (store, operator) = server::require(Role::Admin).await?;
    let health = use_context::<ServerHealth>().ok_or_else(|| {
        server::error(td_string!(server::locale(), messages.not_connected_server))
    })?;
    let Some(api) = health.stripe else {
        return Ok(ReconcilePreview {
            configured: false,
            since: String::new(),
            listed: 0,
            already_claimed: 0,
            would_claim: 0,
            per_type: Vec::new(),
        });
    };
    let actor = claimcheck_core::ops::Actor::Dashboard(operator.username).to_string();
    let report =
        claimcheck_core::reconcile::run(&store, &api, &health.reconcile, &actor, None, true)
            .await
            .map_err(|error| {
                server::error(td_string!(server::locale(), messages.preview_failed, error))
            })?;
    Ok(ReconcilePreview {
        configured: true,
        since: server::time(report.since * 1000),
        listed: report.listed,
        already_claimed: report.already_claimed,
        would_claim: report.claimed,
        per_type: report
            .per_type
            .into_iter()
            .map(|(kind, c)| (kind, c.listed, c.already_claimed, c.claimed))
            .collect(),
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HourCount {
    /// "14:00" (UTC), the start of the hour.
    pub label: String,
    /// Claimed (new events).
    pub claimed: i64,
    /// Duplicates and twins answered 200 without a new claim.
    pub duplicate: i64,
    /// Ignored types and refused payloads.
    pub other: i64,
}

/// Where the overview reads acknowledgement latencies: the server's own metrics.
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct AckLatency(pub std::sync::Arc<dyn Fn(f64) -> Option<(f64, u64)> + Send + Sync>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: ClaimState,
    pub count: i64,
}

/// A claim in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRow {
    pub event_id: String,
    pub event_type: String,
    pub object_id: String,
    pub status: ClaimState,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub received_at: String,
    /// How long ago it was received, in words.
    pub age: String,
    pub received_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsPage {
    pub rows: Vec<ClaimRow>,
    /// The cursor of the next page (`received_ms:event_id`), if there is one.
    pub next: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRow {
    pub outcome: String,
    pub received_at: String,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: String,
    pub what: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDetail {
    pub claim: ClaimRow,
    pub payload: String,
    pub deliveries: Vec<DeliveryRow>,
    pub timeline: Vec<TimelineEntry>,
    pub order: Option<OrderDetail>,
    /// The order the event names (metadata.order_id or client_reference_id), known even
    /// before its first fulfilment created the order.
    pub order_id: Option<String>,
    /// Whether a re-drive can take it now (pending, stale or failed).
    pub redrivable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRow {
    pub kind: LedgerKind,
    pub delta: i64,
    /// The money behind the step, in words (`refund of CHF 24.50`).
    pub money: String,
    /// The event (or, for a refund Claimcheck made, the request) behind the entry.
    pub source: String,
    pub source_is_event: bool,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRow {
    pub idempotency_key: String,
    pub operation: String,
    pub order_id: String,
    pub status: RequestStatus,
    pub http_status: Option<i64>,
    pub attempts: i64,
    pub object_id: Option<String>,
    pub error: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderDetail {
    pub order_id: String,
    pub status: OrderStatus,
    pub payment_status: String,
    pub package: Option<String>,
    pub customer_email: Option<String>,
    pub credits: i64,
    pub credits_granted: i64,
    pub payment_intent_id: Option<String>,
    pub checkout_session_id: Option<String>,
    pub created_at: String,
    /// What was paid, formatted (`CHF 49.00`), when known.
    pub paid: Option<String>,
    /// Refunded and not failed, formatted.
    pub refunded: Option<String>,
    /// What an admin may still refund, formatted; `None` when nothing can be refunded.
    pub refundable: Option<String>,
    /// The dispute, when there is one: open, won or lost.
    pub dispute: Option<String>,
    pub ledger: Vec<LedgerRow>,
    pub requests: Vec<KeyRow>,
}

/// Outgoing Stripe requests in one status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestsPage {
    pub status: RequestStatus,
    /// How many there are; `rows` holds the most recently updated of them.
    pub total: i64,
    pub rows: Vec<KeyRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderSearch {
    pub orders: Vec<OrderDetail>,
    /// The balance of the customer, when the term was an email with orders.
    pub balance: Option<i64>,
}

/// What the header search found, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchView {
    pub term: String,
    /// The customer (e-mail or customer id), their balance and how many orders they have.
    pub customer: Option<CustomerHit>,
    pub orders: Vec<OrderDetail>,
    pub events: Vec<ClaimRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomerHit {
    pub customer: String,
    pub balance: i64,
    pub orders: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub reason: String,
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorRow {
    pub username: String,
    pub role: Role,
    pub created_at: String,
    pub disabled: bool,
}

#[cfg(feature = "ssr")]
mod server {
    use claimcheck_core::auth::{AccessRefused, Role, SignedIn};
    use claimcheck_core::money::LedgerKind;
    use claimcheck_core::{ClaimView, OrderView, Store, StoreError, StripeRequestView};
    use leptos::prelude::*;

    use super::{ClaimRow, KeyRow, LedgerRow, OrderDetail};
    use crate::i18n::{Locale, names, reader, td_string};

    /// The language of the request being answered.
    pub fn locale() -> Locale {
        reader().locale()
    }

    /// A server function's error in the reader's words.
    pub fn error(text: impl std::fmt::Display) -> ServerFnError {
        ServerFnError::new(text.to_string())
    }

    fn status(code: http::StatusCode) {
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(code);
        }
    }

    /// The store and the operator, if signed in with at least `needed`; otherwise an error
    /// (401 or 403) that says what to do.
    pub async fn require(needed: Role) -> Result<(Store, SignedIn), ServerFnError> {
        let parts: http::request::Parts = leptos_axum::extract().await?;
        let store = use_context::<Store>()
            .ok_or_else(|| error(td_string!(locale(), messages.not_connected_db)))?;
        match claimcheck_core::auth::require(parts.extensions.get::<SignedIn>(), needed) {
            Ok(operator) => Ok((store, operator.clone())),
            Err(AccessRefused::SignIn) => {
                status(http::StatusCode::UNAUTHORIZED);
                Err(error(td_string!(locale(), messages.sign_in)))
            }
            Err(AccessRefused::Role { needed, have }) => {
                status(http::StatusCode::FORBIDDEN);
                let locale = locale();
                let (needed, role) = (names::role(locale, needed), names::role(locale, have));
                Err(error(td_string!(locale, messages.needs_role, needed, role)))
            }
        }
    }

    pub fn unavailable(cause: StoreError) -> ServerFnError {
        tracing::error!(
            error = &cause as &dyn std::error::Error,
            "dashboard: storage"
        );
        status(http::StatusCode::SERVICE_UNAVAILABLE);
        error(td_string!(locale(), messages.db_unavailable))
    }

    /// Input that cannot be read: 400, with what was wrong.
    pub fn bad_input(what: impl std::fmt::Display) -> ServerFnError {
        status(http::StatusCode::BAD_REQUEST);
        error(what)
    }

    /// A claim state from a filter: pending, running, stale, processed or failed.
    pub fn claim_state(text: &str) -> Result<claimcheck_core::ClaimState, ServerFnError> {
        text.parse()
            .map_err(|_| bad_input(td_string!(locale(), messages.not_a_claim_state, text)))
    }

    pub fn not_found(what: String) -> ServerFnError {
        status(http::StatusCode::NOT_FOUND);
        ServerFnError::new(what)
    }

    /// A date (YYYY-MM-DD, UTC) as unix ms: its first instant, or with `end` the first
    /// instant of the next day; empty is no bound.
    pub fn day(s: &str, end: bool) -> Result<Option<i64>, ServerFnError> {
        if s.trim().is_empty() {
            return Ok(None);
        }
        let date = chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
            .map_err(|_| bad_input(td_string!(locale(), messages.not_a_date, s)))?;
        let date = if end {
            date.succ_opt().unwrap_or(date)
        } else {
            date
        };
        Ok(date
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc().timestamp_millis()))
    }

    /// A moment in the reader's time zone and words.
    pub fn time(ms: i64) -> String {
        reader().time(ms)
    }

    pub fn claim_row(c: ClaimView) -> ClaimRow {
        let reader = reader();
        ClaimRow {
            age: reader.age(c.received_at),
            received_at: reader.time(c.received_at),
            received_ms: c.received_at,
            event_id: c.event_id,
            event_type: c.event_type,
            object_id: c.object_id,
            status: c.status,
            attempts: c.attempts,
            last_error: c.last_error,
        }
    }

    pub fn key_row(r: StripeRequestView) -> KeyRow {
        KeyRow {
            idempotency_key: r.idempotency_key,
            operation: r.operation,
            order_id: r.order_id,
            status: r.status,
            http_status: r.http_status,
            attempts: r.attempts,
            object_id: r.object_id,
            error: r.error,
            at: time(r.updated_at),
        }
    }

    pub fn order_detail(o: OrderView) -> OrderDetail {
        let reader = reader();
        let locale = reader.locale();
        let currency = o.currency.clone().unwrap_or_else(|| "chf".into());
        let money = |minor: i64| reader.money(minor, &currency);
        // Revokes and restores carry the refunded total after them; each step's own money is
        // the difference to the one before.
        let mut refunded_before = 0;
        let ledger = o
            .ledger
            .into_iter()
            .map(|e| {
                let words = match (e.kind, e.amount) {
                    (LedgerKind::Unlock, _) => o
                        .amount
                        .map(|a| td_string!(locale, messages.ledger_paid, amount = money(a))),
                    (LedgerKind::Revoke, Some(total)) => {
                        let step = money(total - refunded_before);
                        refunded_before = total;
                        let total = money(total);
                        Some(td_string!(locale, messages.ledger_refund, step, total))
                    }
                    (LedgerKind::Restore, Some(total)) => {
                        let step = money(refunded_before - total);
                        refunded_before = total;
                        let total = money(total);
                        Some(td_string!(
                            locale,
                            messages.ledger_refund_failed,
                            step,
                            total
                        ))
                    }
                    (LedgerKind::DisputeHold, Some(a)) => Some(td_string!(
                        locale,
                        messages.ledger_dispute,
                        amount = money(a)
                    )),
                    (LedgerKind::DisputeRelease, _) => {
                        Some(td_string!(locale, messages.ledger_dispute_won).to_string())
                    }
                    _ => None,
                };
                LedgerRow {
                    kind: e.kind,
                    delta: e.delta,
                    money: words.unwrap_or_default(),
                    source_is_event: e.event_id.is_some(),
                    source: e.event_id.or(e.idempotency_key).unwrap_or_default(),
                    at: reader.time(e.created_at),
                }
            })
            .collect();
        let refundable = match o.amount {
            Some(amount) if o.status.accepts_refunds() && amount > o.amount_refunded => {
                Some(money(amount - o.amount_refunded))
            }
            _ => None,
        };
        OrderDetail {
            paid: o.amount.map(money),
            refunded: (o.amount_refunded > 0).then(|| money(o.amount_refunded)),
            refundable,
            dispute: o.dispute_status.clone(),
            ledger,
            requests: o.stripe_requests.into_iter().map(key_row).collect(),
            created_at: reader.time(o.created_at),
            order_id: o.order_id,
            status: o.status,
            payment_status: o.payment_status,
            package: o.package,
            customer_email: o.customer_email,
            credits: o.credits,
            credits_granted: o.credits_granted,
            payment_intent_id: o.payment_intent_id,
            checkout_session_id: o.checkout_session_id,
        }
    }
}

/// Who is signed in.
#[server(prefix = "/dashboard/fn", endpoint = "me")]
pub async fn get_me() -> Result<Me, ServerFnError> {
    let (_, operator) = server::require(Role::Viewer).await?;
    Ok(Me {
        username: operator.username,
        role: operator.role,
    })
}

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

/// Claims per state and when they were counted.
#[server(prefix = "/dashboard/fn", endpoint = "overview")]
pub async fn get_overview() -> Result<Overview, ServerFnError> {
    use claimcheck_core::{ClaimState, DeliveryOutcome, now_ms};

    let (store, operator) = server::require(Role::Viewer).await?;
    let reader = crate::i18n::reader();
    let now = now_ms();
    let counts = store
        .claims()
        .counts(now)
        .await
        .map_err(server::unavailable)?;
    // 24 whole hours ending with the current one.
    let hour = 3_600_000;
    let since = (now / hour - 23) * hour;
    let mut hours: Vec<HourCount> = (0..24)
        .map(|i| HourCount {
            label: reader.hour(since + i * hour),
            claimed: 0,
            duplicate: 0,
            other: 0,
        })
        .collect();
    for (i, outcome, n) in store
        .claims()
        .deliveries_by_hour(since)
        .await
        .map_err(server::unavailable)?
    {
        if let Some(bucket) = usize::try_from(i).ok().and_then(|i| hours.get_mut(i)) {
            match outcome {
                DeliveryOutcome::Claimed => bucket.claimed += n,
                DeliveryOutcome::DuplicateEvent | DeliveryOutcome::DuplicateAction => {
                    bucket.duplicate += n
                }
                _ => bucket.other += n,
            }
        }
    }
    let midnight = now - now.rem_euclid(86_400_000);
    let credits_today = store
        .orders()
        .credits_unlocked_since(midnight)
        .await
        .map_err(server::unavailable)?;
    let latency = use_context::<AckLatency>();
    let quantile = |q| latency.as_ref().and_then(|l| (l.0)(q));
    let health = use_context::<ServerHealth>();
    let reconcile = store
        .reconcile_runs()
        .recent(1)
        .await
        .map_err(server::unavailable)?
        .pop()
        .map(|run| ReconcileSummary {
            at: server::time(run.finished_at),
            actor: run.actor,
            dry_run: run.dry_run,
            listed: run.listed,
            claimed: run.claimed,
            error: run.error,
        });
    Ok(Overview {
        reconcile,
        bad_signatures_in_a_row: health
            .as_ref()
            .map(|h| (h.bad_signatures_in_a_row)())
            .unwrap_or(0),
        can_reconcile: operator.role.can_administer()
            && health.as_ref().is_some_and(|h| h.stripe.is_some()),
        backend: store.backend().as_str().to_owned(),
        checked_at: reader.time_precise(now),
        claims: ClaimState::ALL
            .into_iter()
            .map(|state| StateCount {
                state,
                count: counts.get(state),
            })
            .collect(),
        hours,
        ack_p50_ms: quantile(0.5).map(|(ms, _)| ms),
        ack_p99_ms: quantile(0.99).map(|(ms, _)| ms),
        acked: quantile(0.5).map(|(_, n)| n).unwrap_or(0),
        credits_today,
    })
}

/// Events (claims), newest first, filtered and searched, 50 per page.
#[server(prefix = "/dashboard/fn", endpoint = "events")]
pub async fn list_events(
    status: String,
    event_type: String,
    search: String,
    from: String,
    to: String,
    after: String,
) -> Result<EventsPage, ServerFnError> {
    use claimcheck_core::{EventFilter, now_ms};

    const PAGE: i64 = 50;
    let (store, _) = server::require(Role::Viewer).await?;
    let nonempty = |s: String| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let state = match nonempty(status) {
        None => None,
        Some(s) => Some(server::claim_state(&s)?),
    };
    let filter = EventFilter {
        state,
        event_type: nonempty(event_type),
        from: server::day(&from, false)?,
        to: server::day(&to, true)?,
        search: nonempty(search),
        error_contains: None,
    };
    let after = after
        .split_once(':')
        .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())));
    let mut rows = store
        .claims()
        .list_events(&filter, after, now_ms(), PAGE + 1)
        .await
        .map_err(server::unavailable)?;
    let more = rows.len() as i64 > PAGE;
    rows.truncate(PAGE as usize);
    let next = more
        .then(|| {
            rows.last()
                .map(|r| format!("{}:{}", r.received_at, r.event_id))
        })
        .flatten();
    Ok(EventsPage {
        rows: rows.into_iter().map(server::claim_row).collect(),
        next,
    })
}

/// One event: its claim, payload, deliveries, timeline and the order it touched.
#[server(prefix = "/dashboard/fn", endpoint = "event")]
pub async fn get_event(event_id: String) -> Result<EventDetail, ServerFnError> {
    use crate::i18n::names;
    use claimcheck_core::fulfilment::{Packages, Plan, plan};
    use claimcheck_core::{EventId, now_ms};

    let (store, _) = server::require(Role::Viewer).await?;
    let id = EventId::parse(event_id.trim()).map_err(|e| server::not_found(e.to_string()))?;
    let now = now_ms();
    let claim = store
        .claims()
        .get(&id, now)
        .await
        .map_err(server::unavailable)?
        .ok_or_else(|| {
            server::not_found(td_string!(
                server::locale(),
                messages.no_event,
                id = id.clone()
            ))
        })?;
    let payload = store
        .claims()
        .payload(&id)
        .await
        .map_err(server::unavailable)?
        .unwrap_or_default();
    let locale = server::locale();
    let pretty = if payload.is_empty() {
        td_string!(locale, messages.payload_pruned).to_string()
    } else {
        serde_json::from_str::<serde_json::Value>(&payload)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .unwrap_or(payload.clone())
    };
    let deliveries = store
        .claims()
        .deliveries(&id)
        .await
        .map_err(server::unavailable)?
        .into_iter()
        .map(|d| DeliveryRow {
            outcome: names::outcome(locale, d.outcome),
            received_at: server::time(d.received_at),
            detail: d.detail.or(d
                .duplicate_of
                .map(|event| td_string!(locale, messages.claimed_by, event))),
        })
        .collect();
    let planned = plan(&claim.event_type, &payload, &Packages::default());
    let order = match &planned {
        Ok(Plan::Session { order, .. }) => store.orders().get(&order.order_id).await,
        Ok(Plan::Money { payment_intent, .. }) => {
            store.orders().by_payment_intent(payment_intent).await
        }
        _ => Ok(None),
    }
    .map_err(server::unavailable)?
    .map(server::order_detail);
    let order_id = match &planned {
        Ok(Plan::Session { order, .. }) => Some(order.order_id.to_string()),
        _ => order.as_ref().map(|o| o.order_id.clone()),
    };
    let audit = store
        .audit()
        .about(&claim.event_id)
        .await
        .map_err(server::unavailable)?;
    let mut timeline = vec![TimelineEntry {
        at: server::time(claim.received_at),
        what: td_string!(locale, messages.timeline_claimed).to_string(),
    }];
    for entry in audit {
        let (action, actor, reason, outcome) =
            (entry.action, entry.actor, entry.reason, entry.outcome);
        timeline.push(TimelineEntry {
            at: server::time(entry.at),
            what: td_string!(
                locale,
                messages.timeline_audit,
                action,
                actor,
                reason,
                outcome
            ),
        });
    }
    if let Some(owner) = &claim.lease_owner {
        let until = claim.lease_expires_at.map(server::time).unwrap_or_default();
        timeline.push(TimelineEntry {
            at: until.clone(),
            what: td_string!(
                locale,
                messages.timeline_leased,
                owner,
                until = until.clone()
            ),
        });
    }
    if claim.attempts > 0 {
        let n = claim.attempts;
        timeline.push(TimelineEntry {
            at: String::new(),
            what: match claim.last_error.as_deref() {
                Some(error) => td_string!(locale, messages.timeline_attempts_error, n, error),
                None => td_string!(locale, messages.timeline_attempts, n),
            },
        });
    }
    if let Some(at) = claim.processed_at {
        timeline.push(TimelineEntry {
            at: server::time(at),
            what: names::state(locale, ClaimState::Processed),
        });
    }
    let redrivable = claim.status.is_redrivable();
    Ok(EventDetail {
        claim: server::claim_row(claim),
        payload: pretty,
        deliveries,
        timeline,
        order,
        order_id,
        redrivable,
    })
}

/// Orders by id, customer email or id, session or payment intent.
#[server(prefix = "/dashboard/fn", endpoint = "orders")]
pub async fn search_orders(term: String) -> Result<OrderSearch, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let term = term.trim().to_owned();
    if term.is_empty() {
        return Ok(OrderSearch {
            orders: Vec::new(),
            balance: None,
        });
    }
    let orders: Vec<OrderDetail> = store
        .orders()
        .find(&term, 100)
        .await
        .map_err(server::unavailable)?
        .into_iter()
        .map(server::order_detail)
        .collect();
    let balance = (term.contains('@') && !orders.is_empty())
        .then(|| orders.iter().map(|o| o.credits_granted).sum());
    Ok(OrderSearch { orders, balance })
}

/// Everything the header search finds for `term`, grouped by kind (`/search/go` opens the
/// one match straight away; this is the list when there is not exactly one).
#[server(prefix = "/dashboard/fn", endpoint = "search")]
pub async fn global_search(term: String) -> Result<SearchView, ServerFnError> {
    use claimcheck_core::now_ms;
    use claimcheck_core::search::search;

    let (store, _) = server::require(Role::Viewer).await?;
    let found = search(&store, &term, now_ms())
        .await
        .map_err(server::unavailable)?;
    Ok(SearchView {
        term: found.term,
        customer: found.customer.map(|c| CustomerHit {
            customer: c.customer,
            balance: c.balance,
            orders: c.orders.len(),
        }),
        orders: found.orders.into_iter().map(server::order_detail).collect(),
        events: found.events.into_iter().map(server::claim_row).collect(),
    })
}

#[server(prefix = "/dashboard/fn", endpoint = "order")]
pub async fn get_order(order_id: String) -> Result<OrderDetail, ServerFnError> {
    use claimcheck_core::OrderId;

    let (store, _) = server::require(Role::Viewer).await?;
    let id = OrderId::parse(order_id.trim()).map_err(|e| server::not_found(e.to_string()))?;
    store
        .orders()
        .get(&id)
        .await
        .map_err(server::unavailable)?
        .map(server::order_detail)
        .ok_or_else(|| {
            server::not_found(td_string!(
                server::locale(),
                messages.no_order,
                id = id.clone()
            ))
        })
}

/// The outgoing Stripe requests in `status` (indeterminate when empty), the most recently
/// updated 200.
#[server(prefix = "/dashboard/fn", endpoint = "requests")]
pub async fn list_requests(status: String) -> Result<RequestsPage, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let status = match status.trim() {
        "" => RequestStatus::Indeterminate,
        text => text.parse().map_err(|_| {
            server::bad_input(td_string!(server::locale(), messages.not_a_request_status))
        })?,
    };
    let (total, rows) = store
        .stripe_requests()
        .in_status(status, 200)
        .await
        .map_err(server::unavailable)?;
    Ok(RequestsPage {
        status,
        total,
        rows: rows.into_iter().map(server::key_row).collect(),
    })
}

/// The audit log, newest first, 100 per page before the entry id `before`.
#[server(prefix = "/dashboard/fn", endpoint = "audit")]
pub async fn get_audit(before: Option<i64>) -> Result<Vec<AuditRow>, ServerFnError> {
    let (store, _) = server::require(Role::Viewer).await?;
    let entries = store
        .audit()
        .newest(before, 100)
        .await
        .map_err(server::unavailable)?;
    Ok(entries
        .into_iter()
        .map(|a| AuditRow {
            id: a.id,
            at: server::time(a.at),
            actor: a.actor,
            action: a.action,
            target: a.target,
            reason: a.reason,
            outcome: a.outcome,
        })
        .collect())
}

/// Operators (admins only).
#[server(prefix = "/dashboard/fn", endpoint = "operators")]
pub async fn list_operators() -> Result<Vec<OperatorRow>, ServerFnError> {
    let (store, _) = server::require(Role::Admin).await?;
    let operators = store
        .operators()
        .list()
        .await
        .map_err(server::unavailable)?;
    Ok(operators
        .into_iter()
        .map(|o| OperatorRow {
            username: o.username,
            role: o.role,
            created_at: server::time(o.created_at),
            disabled: o.disabled_at.is_some(),
        })
        .collect())
}

/// What a bulk re-drive over a filter would do (support and admin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkPreviewView {
    /// The filter as the start will apply it (times absolute): the confirmation form
    /// carries it back unchanged.
    pub filter: claimcheck_core::bulk::BulkFilter,
    /// The filter in words.
    pub described: String,
    pub claims: i64,
    pub orders: i64,
    pub orders_credited: i64,
    pub without_order: i64,
    pub unplannable: i64,
    pub rows: Vec<BulkPreviewRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkPreviewRow {
    pub claim: ClaimRow,
    pub order_id: Option<String>,
    pub credited: bool,
}

/// A bulk re-drive, as its progress page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchDetail {
    pub batch_id: String,
    pub state: claimcheck_core::bulk::BatchState,
    pub total: i64,
    pub done: i64,
    pub processed: i64,
    pub failed: i64,
    pub skipped: i64,
    pub remaining: i64,
    pub actor: String,
    pub reason: String,
    pub described: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Who asked it to stop (it may still be finishing its current claim).
    pub cancel_requested_by: Option<String>,
    /// The claims that failed again, and why (the first 100).
    pub failures: Vec<BatchItemRow>,
    /// The claims left alone because someone else held or had done them (the first 100).
    pub skips: Vec<BatchItemRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchItemRow {
    pub event_id: String,
    pub detail: String,
}

/// What a bulk re-drive over the filter would do. Times: `from` and `to` are dates
/// (YYYY-MM-DD, UTC), `older_than` an age (10m, 2h, 3d).
#[server(prefix = "/dashboard/fn", endpoint = "bulk_preview")]
pub async fn bulk_preview(
    status: String,
    event_type: String,
    from: String,
    to: String,
    older_than: String,
    error_contains: String,
    search: String,
) -> Result<BulkPreviewView, ServerFnError> {
    use claimcheck_core::bulk::{BulkFilter, parse_age};
    use claimcheck_core::now_ms;
    use claimcheck_core::ops::bulk_redrive::{BulkError, preview};

    let (store, _) = server::require(Role::Support).await?;
    let worker = use_context::<std::sync::Arc<claimcheck_core::worker::WorkerConfig>>()
        .ok_or_else(|| {
            server::error(td_string!(server::locale(), messages.not_connected_server))
        })?;
    let now = now_ms();
    let nonempty = |s: String| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let state = match nonempty(status) {
        None => None,
        Some(s) => Some(server::claim_state(&s)?),
    };
    let older = match nonempty(older_than) {
        None => None,
        Some(age) => Some(
            now - parse_age(&age).map_err(|_| {
                server::bad_input(td_string!(server::locale(), messages.not_an_age, age))
            })?,
        ),
    };
    let to = server::day(&to, true)?;
    let received_before = match (older, to) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let filter = BulkFilter {
        state,
        event_type: nonempty(event_type),
        received_after: server::day(&from, false)?,
        received_before,
        error_contains: nonempty(error_contains),
        search: nonempty(search),
    };
    let preview = preview(&store, &worker, filter, now)
        .await
        .map_err(|error| match error {
            BulkError::Store(error) => server::unavailable(error),
            other => server::error(crate::i18n::explain::bulk(server::locale(), &other)),
        })?;
    Ok(BulkPreviewView {
        described: crate::i18n::describe_filter(&preview.filter),
        filter: preview.filter,
        claims: preview.claims,
        orders: preview.orders,
        orders_credited: preview.orders_credited,
        without_order: preview.without_order,
        unplannable: preview.unplannable,
        rows: preview
            .first
            .into_iter()
            .map(|r| BulkPreviewRow {
                claim: server::claim_row(r.claim),
                order_id: r.order_id,
                credited: r.credited,
            })
            .collect(),
    })
}

/// One bulk re-drive, for its progress page; `None` if there is no such batch.
#[server(prefix = "/dashboard/fn", endpoint = "bulk_batch")]
pub async fn bulk_batch(batch_id: String) -> Result<Option<BatchDetail>, ServerFnError> {
    use claimcheck_core::bulk::ItemOutcome;
    use claimcheck_core::{BatchId, now_ms};

    let (store, _) = server::require(Role::Viewer).await?;
    let Ok(id) = BatchId::parse(batch_id.trim()) else {
        return Ok(None);
    };
    let Some(batch) = store
        .bulk_redrives()
        .get(&id, now_ms())
        .await
        .map_err(server::unavailable)?
    else {
        return Ok(None);
    };
    let items = |outcome| {
        let store = store.clone();
        let id = id.clone();
        async move {
            store
                .bulk_redrives()
                .items(&id, Some(outcome), 100)
                .await
                .map_err(server::unavailable)
                .map(|items| {
                    items
                        .into_iter()
                        .map(|i| BatchItemRow {
                            event_id: i.event_id,
                            detail: i.detail.unwrap_or_default(),
                        })
                        .collect::<Vec<_>>()
                })
        }
    };
    let failures = if batch.failed > 0 {
        items(ItemOutcome::Failed).await?
    } else {
        Vec::new()
    };
    let skips = if batch.skipped > 0 {
        items(ItemOutcome::Skipped).await?
    } else {
        Vec::new()
    };
    Ok(Some(BatchDetail {
        done: batch.done(),
        remaining: batch.remaining(),
        described: crate::i18n::describe_filter(&batch.filter),
        started_at: server::time(batch.created_at),
        finished_at: batch.finished_at.map(server::time),
        batch_id: batch.batch_id,
        state: batch.state,
        total: batch.total,
        processed: batch.processed,
        failed: batch.failed,
        skipped: batch.skipped,
        actor: batch.actor,
        reason: batch.reason,
        cancel_requested_by: batch.cancel_requested_by,
        failures,
        skips,
    }))
}

/// A bulk re-drive in the list of recent ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSummary {
    pub batch_id: String,
    pub state: claimcheck_core::bulk::BatchState,
    pub total: i64,
    pub done: i64,
    pub failed: i64,
    pub skipped: i64,
    pub actor: String,
    pub reason: String,
    pub started_at: String,
}

/// How far a batch has come: what its page follows while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchProgress {
    pub state: claimcheck_core::bulk::BatchState,
    pub total: i64,
    pub done: i64,
    pub processed: i64,
    pub failed: i64,
    pub skipped: i64,
}

/// One bulk re-drive's progress alone, for its page to follow; `None` if there is no such
/// batch.
#[server(prefix = "/dashboard/fn", endpoint = "bulk_batch_progress")]
pub async fn bulk_batch_progress(batch_id: String) -> Result<Option<BatchProgress>, ServerFnError> {
    use claimcheck_core::{BatchId, now_ms};

    let (store, _) = server::require(Role::Viewer).await?;
    let Ok(id) = BatchId::parse(batch_id.trim()) else {
        return Ok(None);
    };
    let batch = store
        .bulk_redrives()
        .get(&id, now_ms())
        .await
        .map_err(server::unavailable)?;
    Ok(batch.map(|b| BatchProgress {
        state: b.state,
        total: b.total,
        done: b.done(),
        processed: b.processed,
        failed: b.failed,
        skipped: b.skipped,
    }))
}

/// The latest bulk re-drives, newest first.
#[server(prefix = "/dashboard/fn", endpoint = "bulk_batches")]
pub async fn bulk_batches() -> Result<Vec<BatchSummary>, ServerFnError> {
    use claimcheck_core::now_ms;

    let (store, _) = server::require(Role::Viewer).await?;
    let batches = store
        .bulk_redrives()
        .recent(now_ms(), 20)
        .await
        .map_err(server::unavailable)?;
    Ok(batches
        .into_iter()
        .map(|b| BatchSummary {
            done: b.done(),
            started_at: server::time(b.created_at),
            batch_id: b.batch_id,
            state: b.state,
            total: b.total,
            failed: b.failed,
            skipped: b.skipped,
            actor: b.actor,
            reason: b.reason,
        })
        .collect())
}
