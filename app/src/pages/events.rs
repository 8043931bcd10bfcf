//! Events: the list (filters, search, keyset pages), one event in detail, and the re-drive
//! confirmation.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{ClaimRow, EventDetail, EventsPage as Page, Me, get_event, get_me, list_events};
use crate::components::{ActionNotices, ErrorNotice, Loaded, StateBadge, error_message};
use crate::pages::orders::OrderSummary;

/// Claims as a table; each row links to its event.
#[component]
pub fn ClaimTable(rows: Vec<ClaimRow>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="empty">"No claims here. Nothing is waiting."</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table>
                <thead>
                    <tr>
                        <th scope="col">"Event"</th>
                        <th scope="col">"Type"</th>
                        <th scope="col">"State"</th>
                        <th scope="col">"Age"</th>
                        <th scope="col">"Attempts"</th>
                        <th scope="col">"Last error"</th>
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
        <Title text="Events"/>
        <section class="page">
            <h1>"Events"</h1>
            <form method="get" action="/events" class="filters" role="search">
                <label>
                    "Search"
                    <input
                        name="q"
                        value=field("q")
                        placeholder="event, session, payment intent, order id or email"
                    />
                </label>
                <label>
                    "State"
                    <select name="status">
                        {std::iter::once("")
                            .chain(ClaimState::ALL.map(ClaimState::as_str))
                            .map(|s| {
                                let selected = move || field("status")() == s;
                                view! {
                                    <option value=s selected=selected>
                                        {if s.is_empty() { "any" } else { s }}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    "Type" <input name="type" value=field("type") placeholder="checkout.session.completed"/>
                </label>
                <label>"From" <input name="from" type="date" value=field("from")/></label>
                <label>"To" <input name="to" type="date" value=field("to")/></label>
                <button type="submit" class="button">"Filter"</button>
            </form>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || {
                    events
                        .get()
                        .map(|result| match result {
                            Ok(page) => {
                                let next = next_link(&page);
                                view! {
                                    <ClaimTable rows=page.rows/>
                                    {next.map(|href| view! { <a href=href class="next">"Older events"</a> })}
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
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let event = Resource::new(id, get_event);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text="Event"/>
        <section class="page">
            <ActionNotices/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
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
    let claim = detail.claim;
    let redrive = (detail.redrivable && me.as_ref().is_some_and(Me::can_redrive))
        .then(|| format!("/events/{}/redrive", claim.event_id));
    view! {
        <div class="page-head">
            <h1 class="mono">{claim.event_id.clone()}</h1>
            {redrive.map(|href| view! { <a href=href class="button">"Re-drive…"</a> })}
        </div>
        <dl class="facts">
            <dt>"Type"</dt>
            <dd>{claim.event_type}</dd>
            <dt>"Object"</dt>
            <dd class="mono">{claim.object_id}</dd>
            <dt>"State"</dt>
            <dd data-testid="claim-state">
                <StateBadge state=claim.status/>
            </dd>
            <dt>"Attempts"</dt>
            <dd>{claim.attempts}</dd>
            <dt>"Received"</dt>
            <dd>{claim.received_at}</dd>
        </dl>
        <h2>"Timeline"</h2>
        <ol class="timeline">
            {detail
                .timeline
                .into_iter()
                .map(|t| view! { <li><span class="muted">{t.at}</span> " " {t.what}</li> })
                .collect_view()}
        </ol>
        <h2>"Order"</h2>
        {match (detail.order, detail.order_id) {
            (Some(order), _) => view! { <OrderSummary order/> }.into_any(),
            (None, Some(id)) => {
                view! {
                    <p class="empty">
                        "The event names order " <span class="mono">{id}</span>
                        ", which has no record yet: its first fulfilment creates it."
                    </p>
                }
                    .into_any()
            }
            (None, None) => view! { <p class="empty">"No order is linked to this event."</p> }.into_any(),
        }}
        <h2>"Deliveries"</h2>
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
        <h2>"Payload"</h2>
        <pre class="payload">{detail.payload}</pre>
    }
}

/// What a re-drive will do, then the reason and the button.
#[component]
pub fn RedrivePage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let event = Resource::new(id, get_event);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text="Re-drive"/>
        <section class="page narrow">
            <h1>"Re-drive a claim"</h1>
            <ActionNotices/>
            <Loaded resource=me view=|me: Me| {
                (!me.can_redrive())
                    .then(|| {
                        view! {
                            <p class="notice notice-error" role="alert">
                                "Re-driving needs the support or admin role; you are " {me.role.as_str()} "."
                            </p>
                        }
                    })
            }/>
            <Loaded resource=event view=redrive_form/>
        </section>
    }
}

fn redrive_form(detail: EventDetail) -> impl IntoView {
    let claim = detail.claim;
    let order = detail.order;
    let effect = match (claim.event_type.as_str(), &order) {
        ("charge.refunded", _) => {
            "Revokes the order's credits once, if they are not revoked yet.".to_owned()
        }
        (_, Some(o)) if o.credits_granted > 0 => format!(
            "The order already has {} credit(s) granted: the re-drive finds the unlock in the \
             ledger and grants nothing twice.",
            o.credits_granted
        ),
        _ => "Fulfils the event: if the session is paid, the order's credits are unlocked once."
            .to_owned(),
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
            <dt>"Event"</dt>
            <dd class="mono">{claim.event_id.clone()}</dd>
            <dt>"Type"</dt>
            <dd>{claim.event_type}</dd>
            <dt>"State"</dt>
            <dd><StateBadge state=claim.status/></dd>
            <dt>"Order"</dt>
            <dd class="mono">
                {match (&order, &detail.order_id) {
                    (Some(o), _) => o.order_id.clone(),
                    (None, Some(id)) => format!("{id} (no order row yet: this fulfilment makes it)"),
                    (None, None) => "none found in the event".to_owned(),
                }}
            </dd>
            <dt>"Credits granted"</dt>
            <dd data-testid="credits-granted">{order.as_ref().map(|o| o.credits_granted).unwrap_or(0)}</dd>
            <dt>"What happens"</dt>
            <dd>{effect}</dd>
            <dt>"Outgoing Stripe calls"</dt>
            <dd>
                "None: fulfilment writes the ledger only. "
                {if keys.is_empty() {
                    "No Idempotency-Key has been sent for this order.".to_owned()
                } else {
                    format!("Keys already sent for this order: {}.", keys.join(", "))
                }}
            </dd>
        </dl>
        {if detail.redrivable {
            view! {
                <form method="post" action="/dashboard/actions/redrive" class="stack">
                    <input type="hidden" name="event_id" value=claim.event_id/>
                    <label for="reason">"Why (kept in the audit log)"</label>
                    <textarea id="reason" name="reason" required rows="3"></textarea>
                    <button type="submit" class="button">"Re-drive now"</button>
                </form>
            }
                .into_any()
        } else {
            view! {
                <p class="notice">"This claim is " {claim.status.as_str()} ": there is nothing to re-drive."</p>
            }
                .into_any()
        }}
    }
}
