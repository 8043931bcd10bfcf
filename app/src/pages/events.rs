//! Events: the list (filters, search, keyset pages), one event in detail, and the re-drive
//! confirmation.

use claimcheck_core::{ClaimSource, ClaimState, EventKind};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{ClaimRow, EventDetail, EventsPage as Page, Me, get_event, get_me, list_events};
use crate::components::{
    ActionNotices, ConfirmButton, Loaded, LoadedWithMe, StateBadge, state_name,
};
use crate::i18n::*;
use crate::pages::orders::OrderSummary;
use crate::refresh::{LIVE_REGION, RefreshWhileVisible};

/// Claims as a table; each row links to its event, its customer and its order. Given the
/// operator (`me`), the claims page's table also lets support tick re-drivable rows for a
/// re-drive of the selection (the checkboxes belong to the form [`SELECTION_FORM`]) and lets
/// an admin resolve a failed claim without re-driving it, or reopen a resolved one.
#[component]
pub fn ClaimTable(rows: Vec<ClaimRow>, #[prop(optional)] me: Option<Me>) -> impl IntoView {
    let i18n = use_i18n();
    if rows.is_empty() {
        return view! { <p class="empty">{t!(i18n, events.no_claims)}</p> }.into_any();
    }
    let select = me.as_ref().is_some_and(Me::can_redrive);
    let admin = me.as_ref().is_some_and(Me::is_admin);
    view! {
        <div class="table-wrap">
            <table class="stacked" aria-label=move || t_string!(i18n, events.table_label)>
                <thead>
                    <tr>
                        {select.then(|| view! { <th scope="col"><span class="visually-hidden">{t!(i18n, events.col_select)}</span></th> })}
                        <th scope="col">{t!(i18n, events.col_event)}</th>
                        <th scope="col">{t!(i18n, events.col_type)}</th>
                        <th scope="col">{t!(i18n, events.col_customer)}</th>
                        <th scope="col">{t!(i18n, events.col_amount)}</th>
                        <th scope="col">{t!(i18n, events.col_state)}</th>
                        <th scope="col">{t!(i18n, events.col_age)}</th>
                        <th scope="col">{t!(i18n, events.col_attempts)}</th>
                        <th scope="col">{t!(i18n, events.col_last_error)}</th>
                        {admin.then(|| view! { <th scope="col">{t!(i18n, events.col_actions)}</th> })}
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|r| view! { <ClaimLine r select admin/> })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}

/// The id of the form the claims page's selection boxes belong to.
pub const SELECTION_FORM: &str = "selection";

#[component]
fn ClaimLine(r: ClaimRow, select: bool, admin: bool) -> impl IntoView {
    let i18n = use_i18n();
    let href = crate::links::event(&r.event_id);
    let row_id = r.event_id.clone();
    let tick = (select && r.status.is_redrivable() && !r.for_a_newer_version).then(|| {
        let label = t_string!(i18n, events.select_claim, event = r.event_id.clone()).to_string();
        view! { <input type="checkbox" name="id" value=r.event_id.clone() form=SELECTION_FORM aria-label=label/> }
    });
    let customer = r.customer.clone().map(|email| {
        let link = crate::links::customer(&email);
        view! { <a href=link>{email}</a> }
    });
    let order = r.order_id.clone().map(|order_id| {
        let link = crate::links::order(&order_id);
        view! { <br/> <a href=link class="mono">{order_id}</a> }
    });
    let waits = r
        .next_attempt
        .clone()
        .map(|at| view! { <br/> <span class="muted">{t!(i18n, events.next_attempt, at)}</span> });
    let resolved = r.resolved_by.clone().map(|by| {
        let reason = r.resolution.clone().unwrap_or_default();
        view! { <br/> <span class="muted">{t!(i18n, events.resolved_by, by, reason)}</span> }
    });
    let newer = r.for_a_newer_version.then(|| {
        view! { <br/> <span class="muted" data-testid="newer-version">{t!(i18n, events.newer_version_short)}</span> }
    });
    let actions = admin.then(|| claim_actions(&r));
    view! {
        <tr data-event=row_id>
            {select.then(|| view! { <td data-label="">{tick}</td> })}
            <td class="mono" data-label=move || t_string!(i18n, events.col_event)>
                <a href=href>{r.event_id.clone()}</a>
            </td>
            <td data-label=move || t_string!(i18n, events.col_type)>{r.event_type.clone()}</td>
            <td data-label=move || t_string!(i18n, events.col_customer)>{customer}{order}</td>
            <td class="nowrap" data-label=move || t_string!(i18n, events.col_amount)>{r.amount.clone()}</td>
            <td data-label=move || t_string!(i18n, events.col_state)>
                <StateBadge state=r.status/>
                {newer}
            </td>
            <td class="age" title=r.received_at.clone() data-label=move || t_string!(i18n, events.col_age)>{r.age.clone()}</td>
            <td data-label=move || t_string!(i18n, events.col_attempts)>{r.attempts}{waits}</td>
            <td class="error-text" data-label=move || t_string!(i18n, events.col_last_error)>
                {r.last_error.clone().unwrap_or_default()}{resolved}
            </td>
            {actions.map(|actions| view! { <td data-label=move || t_string!(i18n, events.col_actions)>{actions}</td> })}
        </tr>
    }
}

/// An admin's resolve (a failed claim) or reopen (a resolved one): a question first, which
/// asks why; works without WASM.
fn claim_actions(r: &ClaimRow) -> Option<impl IntoView + use<>> {
    let i18n = use_i18n();
    let (action, label, question, confirm) = match r.status {
        ClaimState::Failed => (
            "/dashboard/actions/claims/resolve",
            t_string!(i18n, events.resolve).to_string(),
            t_string!(i18n, events.resolve_question).to_string(),
            t_string!(i18n, events.resolve_confirm).to_string(),
        ),
        ClaimState::Resolved => (
            "/dashboard/actions/claims/reopen",
            t_string!(i18n, events.reopen).to_string(),
            t_string!(i18n, events.reopen_question).to_string(),
            t_string!(i18n, events.reopen_confirm).to_string(),
        ),
        _ => return None,
    };
    let event_id = r.event_id.clone();
    Some(view! {
        <details class="confirm">
            <summary class="link-button">{label}</summary>
            <form method="post" action=action class="stack">
                <input type="hidden" name="event_id" value=event_id/>
                <p>{question}</p>
                <label>
                    {t!(i18n, events.reason)}
                    <textarea name="reason" required rows="2" maxlength="1000"></textarea>
                </label>
                <button type="submit" class="button danger">{confirm}</button>
            </form>
        </details>
    })
}

/// Where a claim came from, in the reader's words.
pub fn source_name(i18n: I18nContext<Locale>, source: ClaimSource) -> String {
    match source {
        ClaimSource::Webhook => t_string!(i18n, events.source_webhook).to_string(),
        ClaimSource::Reconcile => t_string!(i18n, events.source_reconcile).to_string(),
    }
}

#[component]
pub fn EventsPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let field = move |name: &'static str| move || query.read().get(name).unwrap_or_default();
    let events = Resource::new(
        move || {
            let q = query.read();
            [
                q.get("status"),
                q.get("type"),
                q.get("q"),
                q.get("from"),
                q.get("to"),
                q.get("after"),
                q.get("source"),
                q.get("run"),
            ]
            .map(Option::unwrap_or_default)
        },
        |[status, event_type, search, from, to, after, source, run]| {
            list_events(
                status,
                event_type,
                search,
                from,
                to,
                after,
                Some(source),
                Some(run),
            )
        },
    );
    // The first page keeps itself current; a later one is a place in the history.
    let first_page = query.read_untracked().get("after").is_none();
    let next_link = move |page: &Page| {
        page.next.as_ref().map(|next| {
            let q = query.read();
            let keep = ["status", "type", "q", "from", "to", "source", "run"]
                .iter()
                .filter_map(|k| {
                    q.get(k)
                        .map(|v| format!("{k}={}", crate::links::encode(&v)))
                })
                .collect::<Vec<_>>()
                .join("&");
            format!("/events?{keep}&after={}", crate::links::encode(next))
        })
    };
    view! {
        <Title text=t_string!(i18n, events.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, events.title)}</h1>
            <form method="get" action="/events" class="filters" role="search">
                <label>
                    {t!(i18n, events.search)}
                    <input
                        name="q"
                        value=field("q")
                        placeholder=move || t_string!(i18n, events.search_placeholder)
                    />
                </label>
                <label>
                    {t!(i18n, events.state)}
                    <select name="status">
                        <option value="" selected=move || field("status")().is_empty()>
                            {t!(i18n, events.any)}
                        </option>
                        {ClaimState::ALL
                            .map(|state| {
                                let s = state.as_str();
                                let selected = move || field("status")() == s;
                                view! {
                                    <option value=s selected=selected>
                                        {state_name(i18n, state)}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    {t!(i18n, events.event_type)} <input name="type" value=field("type") placeholder="checkout.session.completed"/>
                </label>
                <label>{t!(i18n, events.from)} <input name="from" type="date" value=field("from")/></label>
                <label>{t!(i18n, events.to)} <input name="to" type="date" value=field("to")/></label>
                <label>
                    {t!(i18n, events.source)}
                    <select name="source">
                        <option value="" selected=move || field("source")().is_empty()>{t!(i18n, events.any)}</option>
                        {ClaimSource::ALL
                            .map(|source| {
                                let s = source.as_str();
                                let selected = move || field("source")() == s;
                                view! { <option value=s selected=selected>{source_name(i18n, source)}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
                {move || {
                    // A run's recovered events (the reconcile alert's link) keep their run.
                    let run = field("run")();
                    (!run.is_empty()).then(|| view! {
                        <input type="hidden" name="run" value=run.clone()/>
                        <p class="notice" data-testid="run-filter">{t!(i18n, events.only_run, run)}</p>
                    })
                }}
                <button type="submit" class="button">{t!(i18n, events.filter)}</button>
            </form>
            {first_page.then(|| view! { <RefreshWhileVisible/> })}
            <div id=LIVE_REGION>
                <Loaded resource=events view=move |page: Page| {
                    let next = next_link(&page);
                    view! {
                        <ClaimTable rows=page.rows/>
                        {next.map(|href| view! { <a href=href class="next">{t!(i18n, events.older)}</a> })}
                    }
                }/>
            </div>
        </section>
    }
}

#[component]
pub fn EventPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let event = Resource::new(id, get_event);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text=t_string!(i18n, events.event_title).to_string()/>
        <section class="page">
            <ActionNotices/>
            <LoadedWithMe resource=event me view=|detail, me| view! { <EventView detail me/> }/>
        </section>
    }
}

#[component]
fn EventView(detail: EventDetail, me: Option<Me>) -> impl IntoView {
    let i18n = use_i18n();
    let claim = detail.claim;
    let redrive = (detail.redrivable && me.as_ref().is_some_and(Me::can_redrive))
        .then(|| crate::links::redrive(&claim.event_id));
    let newer_version = claim.for_a_newer_version.then(|| claim.event_type.clone());
    view! {
        <div class="page-head">
            <h1 class="mono">{claim.event_id.clone()}</h1>
            {redrive.map(|href| view! { <a href=href class="button">{t!(i18n, events.redrive_link)}</a> })}
        </div>
        <dl class="facts">
            <dt>{t!(i18n, events.event_type)}</dt>
            <dd>{claim.event_type}</dd>
            <dt>{t!(i18n, events.object)}</dt>
            <dd class="mono">{claim.object_id}</dd>
            <dt>{t!(i18n, events.state)}</dt>
            <dd data-testid="claim-state">
                <StateBadge state=claim.status/>
                {newer_version.map(|event_type| view! {
                    <p class="notice" data-testid="newer-version">
                        {t!(i18n, events.newer_version, event_type)}
                    </p>
                })}
            </dd>
            <dt>{t!(i18n, events.attempts)}</dt>
            <dd>{claim.attempts}</dd>
            <dt>{t!(i18n, events.received)}</dt>
            <dd>{claim.received_at}</dd>
            <dt>{t!(i18n, events.source)}</dt>
            <dd data-testid="claim-source" data-source=claim.source.as_str()>
                {source_name(i18n, claim.source)}
                {detail.recovered_by.map(|run| {
                    let href = format!("/events?run={run}");
                    view! { " · " <a href=href>{t!(i18n, events.run_number, run)}</a> }
                })}
            </dd>
        </dl>
        <h2>{t!(i18n, events.timeline)}</h2>
        <ol class="timeline">
            {detail
                .timeline
                .into_iter()
                .map(|t| view! { <li><span class="muted">{t.at}</span> " " {t.what}</li> })
                .collect_view()}
        </ol>
        <h2>{t!(i18n, events.order)}</h2>
        {match (detail.order, detail.order_id) {
            (Some(order), _) => view! { <OrderSummary order/> }.into_any(),
            (None, Some(id)) => {
                view! { <p class="empty">{t!(i18n, events.order_not_yet, id)}</p> }.into_any()
            }
            (None, None) => view! { <p class="empty">{t!(i18n, events.no_order)}</p> }.into_any(),
        }}
        <h2>{t!(i18n, events.deliveries)}</h2>
        <ul class="plain">
            {detail
                .deliveries
                .into_iter()
                .map(|d| {
                    view! {
                        <li>
                            <span class="muted">{d.received_at}</span> " " {d.outcome} " "
                            <span class="muted">{d.detail.unwrap_or_default()}</span>
                        </li>
                    }
                })
                .collect_view()}
        </ul>
        <h2>{t!(i18n, events.payload)}</h2>
        <pre class="payload">{detail.payload}</pre>
    }
}

/// What a re-drive will do, then the reason and the button.
#[component]
pub fn RedrivePage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let event = Resource::new(id, get_event);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text=t_string!(i18n, events.redrive_title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, events.redrive_heading)}</h1>
            <ActionNotices/>
            <Loaded resource=me view=|me: Me| {
                (!me.can_redrive())
                    .then(|| {
                        let i18n = use_i18n();
                        let role = crate::role_name(i18n, me.role);
                        view! {
                            <p class="notice notice-error" role="alert">
                                {t!(i18n, events.redrive_needs_role, role)}
                            </p>
                        }
                    })
            }/>
            <Loaded resource=event view=redrive_form/>
        </section>
    }
}

fn redrive_form(detail: EventDetail) -> impl IntoView {
    let i18n = use_i18n();
    let claim = detail.claim;
    let order = detail.order;
    let effect = match EventKind::parse(&claim.event_type) {
        Some(
            EventKind::ChargeRefunded
            | EventKind::RefundFailed
            | EventKind::ChargeDisputeCreated
            | EventKind::ChargeDisputeClosed,
        ) => t_string!(i18n, events.effect_money).to_string(),
        Some(
            EventKind::CheckoutSessionCompleted
            | EventKind::CheckoutSessionAsyncPaymentSucceeded
            | EventKind::CheckoutSessionAsyncPaymentFailed,
        ) => match &order {
            Some(o) if o.credits_granted == 1 => {
                t_string!(i18n, events.effect_granted_one, n = 1).to_string()
            }
            Some(o) if o.credits_granted > 0 => t_string!(
                i18n,
                events.effect_granted,
                n = crate::i18n::number(i18n.get_locale(), o.credits_granted)
            )
            .to_string(),
            _ => t_string!(i18n, events.effect_fulfil).to_string(),
        },
        Some(EventKind::InvoicePaid) => t_string!(i18n, events.effect_invoice).to_string(),
        Some(
            EventKind::InvoicePaymentFailed
            | EventKind::CustomerSubscriptionCreated
            | EventKind::CustomerSubscriptionUpdated
            | EventKind::CustomerSubscriptionDeleted
            | EventKind::SubscriptionScheduleCreated
            | EventKind::SubscriptionScheduleUpdated
            | EventKind::SubscriptionScheduleReleased
            | EventKind::SubscriptionScheduleCanceled
            | EventKind::SubscriptionScheduleCompleted
            | EventKind::SubscriptionScheduleAborted,
        ) => t_string!(i18n, events.effect_subscription).to_string(),
        Some(
            EventKind::PaymentIntentSucceeded
            | EventKind::ChargeSucceeded
            | EventKind::RefundCreated
            | EventKind::PaymentIntentPaymentFailed
            | EventKind::ChargeFailed
            | EventKind::InvoicePaymentSucceeded
            | EventKind::InvoiceCreated
            | EventKind::SubscriptionScheduleExpiring,
        )
        | None => t_string!(i18n, events.effect_nothing).to_string(),
    };
    let keys = order
        .as_ref()
        .map(|o| {
            o.requests
                .iter()
                .map(|r| r.idempotency_key.clone())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    view! {
        <dl class="facts">
            <dt>{t!(i18n, events.col_event)}</dt>
            <dd class="mono">{claim.event_id.clone()}</dd>
            <dt>{t!(i18n, events.event_type)}</dt>
            <dd>{claim.event_type}</dd>
            <dt>{t!(i18n, events.state)}</dt>
            <dd><StateBadge state=claim.status/></dd>
            <dt>{t!(i18n, events.order)}</dt>
            <dd class="mono">
                {match (&order, &detail.order_id) {
                    (Some(o), _) => o.order_id.clone(),
                    (None, Some(id)) => t_string!(i18n, events.order_no_row, id = id.clone()).to_string(),
                    (None, None) => t_string!(i18n, events.order_none).to_string(),
                }}
            </dd>
            <dt>{t!(i18n, events.credits_granted)}</dt>
            <dd data-testid="credits-granted">{crate::i18n::number(i18n.get_locale(), order.as_ref().map(|o| o.credits_granted).unwrap_or(0))}</dd>
            <dt>{t!(i18n, events.what_happens)}</dt>
            <dd>{effect}</dd>
            <dt>{t!(i18n, events.outgoing)}</dt>
            <dd>
                {t!(i18n, events.outgoing_none)} " "
                {if keys.is_empty() {
                    t_string!(i18n, events.no_keys).to_string()
                } else {
                    t_string!(i18n, events.keys_sent, keys = keys.join(", ")).to_string()
                }}
            </dd>
        </dl>
        {if detail.redrivable {
            let open = t_string!(i18n, events.redrive_now).to_string();
            let question = t_string!(i18n, events.redrive_question).to_string();
            let confirm = t_string!(i18n, events.redrive_confirm, event = claim.event_id.clone()).to_string();
            view! {
                <form method="post" action="/dashboard/actions/redrive" class="stack">
                    <input type="hidden" name="event_id" value=claim.event_id/>
                    <label for="reason">{t!(i18n, events.reason)}</label>
                    <textarea id="reason" name="reason" required rows="3"></textarea>
                    <ConfirmButton open question confirm/>
                </form>
            }
                .into_any()
        } else {
            view! {
                <p class="notice">{t!(i18n, events.nothing_to_redrive, state = state_name(i18n, claim.status))}</p>
            }
                .into_any()
        }}
    }
}
