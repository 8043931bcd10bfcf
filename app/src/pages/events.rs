//! Events: the list (filters, search, keyset pages), one event in detail, and the re-drive
//! confirmation.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{ClaimRow, EventDetail, EventsPage as Page, Me, get_event, get_me, list_events};
use crate::components::{
    ActionNotices, ErrorNotice, Loaded, StateBadge, error_message, state_name,
};
use crate::i18n::*;
use crate::pages::orders::OrderSummary;

/// Claims as a table; each row links to its event.
#[component]
pub fn ClaimTable(rows: Vec<ClaimRow>) -> impl IntoView {
    let i18n = use_i18n();
    if rows.is_empty() {
        return view! { <p class="empty">{t!(i18n, events.no_claims)}</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, events.table_label)>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, events.col_event)}</th>
                        <th scope="col">{t!(i18n, events.col_type)}</th>
                        <th scope="col">{t!(i18n, events.col_state)}</th>
                        <th scope="col">{t!(i18n, events.col_age)}</th>
                        <th scope="col">{t!(i18n, events.col_attempts)}</th>
                        <th scope="col">{t!(i18n, events.col_last_error)}</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|r| {
                            let href = format!("/events/{}", r.event_id);
                            let row_id = r.event_id.clone();
                            view! {
                                <tr data-event=row_id>
                                    <td class="mono">
                                        <a href=href>{r.event_id}</a>
                                    </td>
                                    <td>{r.event_type}</td>
                                    <td>
                                        <StateBadge state=r.status/>
                                    </td>
                                    <td title=r.received_at>{r.age}</td>
                                    <td>{r.attempts}</td>
                                    <td class="error-text">{r.last_error.unwrap_or_default()}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
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
            ]
            .map(Option::unwrap_or_default)
        },
        |[status, event_type, search, from, to, after]| {
            list_events(status, event_type, search, from, to, after)
        },
    );
    let next_link = move |page: &Page| {
        page.next.as_ref().map(|next| {
            let q = query.read();
            let keep = ["status", "type", "q", "from", "to"]
                .iter()
                .filter_map(|k| q.get(k).map(|v| format!("{k}={}", urlencode(&v))))
                .collect::<Vec<_>>()
                .join("&");
            format!("/events?{keep}&after={}", urlencode(next))
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
                <button type="submit" class="button">{t!(i18n, events.filter)}</button>
            </form>
            <Transition fallback=move || view! { <p class="muted">{t!(i18n, common.loading)}</p> }>
                {move || {
                    events
                        .get()
                        .map(|result| match result {
                            Ok(page) => {
                                let next = next_link(&page);
                                view! {
                                    <ClaimTable rows=page.rows/>
                                    {next.map(|href| view! { <a href=href class="next">{t!(i18n, events.older)}</a> })}
                                }
                                    .into_any()
                            }
                            Err(error) => view! { <ErrorNotice message=error_message(&error)/> }.into_any(),
                        })
                }}
            </Transition>
        </section>
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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
            <Transition fallback=move || view! { <p class="muted">{t!(i18n, common.loading)}</p> }>
                {move || {
                    let me = me.get().and_then(Result::ok);
                    event
                        .get()
                        .map(|result| match result {
                            Ok(detail) => view! { <EventView detail me/> }.into_any(),
                            Err(error) => view! { <ErrorNotice message=error_message(&error)/> }.into_any(),
                        })
                }}
            </Transition>
        </section>
    }
}

#[component]
fn EventView(detail: EventDetail, me: Option<Me>) -> impl IntoView {
    let i18n = use_i18n();
    let claim = detail.claim;
    let redrive = (detail.redrivable && me.as_ref().is_some_and(Me::can_redrive))
        .then(|| format!("/events/{}/redrive", claim.event_id));
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
            </dd>
            <dt>{t!(i18n, events.attempts)}</dt>
            <dd>{claim.attempts}</dd>
            <dt>{t!(i18n, events.received)}</dt>
            <dd>{claim.received_at}</dd>
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
    let effect = match (claim.event_type.as_str(), &order) {
        ("charge.refunded", _) => t_string!(i18n, events.effect_refund).to_string(),
        (_, Some(o)) if o.credits_granted > 0 => {
            t_string!(i18n, events.effect_granted, n = o.credits_granted).to_string()
        }
        _ => t_string!(i18n, events.effect_fulfil).to_string(),
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
            <dd data-testid="credits-granted">{order.as_ref().map(|o| o.credits_granted).unwrap_or(0)}</dd>
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
            view! {
                <form method="post" action="/dashboard/actions/redrive" class="stack">
                    <input type="hidden" name="event_id" value=claim.event_id/>
                    <label for="reason">{t!(i18n, events.reason)}</label>
                    <textarea id="reason" name="reason" required rows="3"></textarea>
                    <button type="submit" class="button">{t!(i18n, events.redrive_now)}</button>
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
