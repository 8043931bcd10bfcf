//! Orders and customers: search, one order with its ledger and Idempotency-Keys. (The
//! refund form is `pages::refund`.)

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{
    Me, OrderDetail, OrderListRow, OrderSearch, OrdersList, get_me, get_order, list_orders,
    search_orders,
};
use claimcheck_core::money::{DisputeStatus, LedgerKind, OrderStatus};

use crate::components::{ActionNotices, Loaded, LoadedWithMe};
use crate::i18n::*;
use crate::pages::requests::RequestTable;
use crate::pages::timeline::OrderTimeline;
use crate::refresh::{LIVE_REGION, RefreshWhileVisible};

/// An order status in the reader's words.
pub fn order_status_name(i18n: I18nContext<Locale>, status: OrderStatus) -> String {
    match status {
        OrderStatus::AwaitingPayment => t_string!(i18n, orders.status_awaiting_payment),
        OrderStatus::PaymentFailed => t_string!(i18n, orders.status_payment_failed),
        OrderStatus::Paid => t_string!(i18n, orders.status_paid),
        OrderStatus::PartiallyRefunded => t_string!(i18n, orders.status_partially_refunded),
        OrderStatus::Refunded => t_string!(i18n, orders.status_refunded),
        OrderStatus::Disputed => t_string!(i18n, orders.status_disputed),
        OrderStatus::Chargeback => t_string!(i18n, orders.status_chargeback),
    }
    .to_string()
}

/// Stripe's `payment_status` of the order's Checkout Session in the reader's words; a value
/// Stripe adds later is shown as Stripe wrote it.
pub fn payment_status_name(i18n: I18nContext<Locale>, status: &str) -> String {
    match status {
        "paid" => t_string!(i18n, orders.payment_paid).to_string(),
        "unpaid" => t_string!(i18n, orders.payment_unpaid).to_string(),
        "no_payment_required" => t_string!(i18n, orders.payment_no_payment_required).to_string(),
        other => other.to_owned(),
    }
}

/// Where a dispute stands, in the reader's words.
pub fn dispute_status_name(i18n: I18nContext<Locale>, status: DisputeStatus) -> String {
    match status {
        DisputeStatus::Open => t_string!(i18n, orders.dispute_open),
        DisputeStatus::Won => t_string!(i18n, orders.dispute_won),
        DisputeStatus::Lost => t_string!(i18n, orders.dispute_lost),
    }
    .to_string()
}

/// A ledger entry's kind in the reader's words.
pub fn ledger_kind_name(i18n: I18nContext<Locale>, kind: LedgerKind) -> String {
    match kind {
        LedgerKind::Unlock => t_string!(i18n, orders.kind_unlock),
        LedgerKind::Revoke => t_string!(i18n, orders.kind_revoke),
        LedgerKind::Restore => t_string!(i18n, orders.kind_restore),
        LedgerKind::DisputeHold => t_string!(i18n, orders.kind_dispute_hold),
        LedgerKind::DisputeRelease => t_string!(i18n, orders.kind_dispute_release),
    }
    .to_string()
}

#[component]
pub fn OrdersPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let term = move || query.read().get("q").unwrap_or_default();
    let found = Resource::new(term, search_orders);
    view! {
        <Title text=t_string!(i18n, orders.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, orders.heading)}</h1>
            <form method="get" action="/orders" class="filters" role="search">
                <label>
                    {t!(i18n, orders.find)}
                    <input
                        name="q"
                        value=term
                        placeholder=move || t_string!(i18n, orders.find_placeholder)
                    />
                </label>
                <button type="submit" class="button">{t!(i18n, orders.search)}</button>
            </form>
            {move || {
                if term().trim().is_empty() {
                    view! { <OrdersList/> }.into_any()
                } else {
                    view! { <Loaded resource=found view=results/> }.into_any()
                }
            }}
        </section>
    }
}

/// The filter fields the orders list keeps in its links.
const LIST_FIELDS: [&str; 4] = ["status", "package", "from", "to"];

/// Recent orders first, with their filters, pages and the CSV export of what they show.
#[component]
fn OrdersList() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let field = move |name: &'static str| move || query.read().get(name).unwrap_or_default();
    let orders = Resource::new(
        move || {
            let q = query.read();
            [
                q.get("status"),
                q.get("package"),
                q.get("from"),
                q.get("to"),
                q.get("after"),
            ]
            .map(Option::unwrap_or_default)
        },
        |[status, package, from, to, after]| list_orders(status, package, from, to, after),
    );
    // The first page keeps itself current; a later one is a place in the history.
    let first_page = query.read_untracked().get("after").is_none();
    let kept = move || {
        let q = query.read();
        LIST_FIELDS
            .iter()
            .filter_map(|k| {
                q.get(k)
                    .map(|v| format!("{k}={}", crate::links::encode(&v)))
            })
            .collect::<Vec<_>>()
            .join("&")
    };
    view! {
        <h2>{t!(i18n, orders.list_heading)}</h2>
        <form method="get" action="/orders" class="filters">
            <label>
                {t!(i18n, orders.filter_status)}
                <select name="status">
                    <option value="" selected=move || field("status")().is_empty()>
                        {t!(i18n, orders.filter_any)}
                    </option>
                    {OrderStatus::ALL
                        .map(|status| {
                            let s = status.as_str();
                            let selected = move || field("status")() == s;
                            view! {
                                <option value=s selected=selected>{order_status_name(i18n, status)}</option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>{t!(i18n, orders.filter_package)} <input name="package" value=field("package") placeholder="thesis-40"/></label>
            <label>{t!(i18n, orders.filter_from)} <input name="from" type="date" value=field("from")/></label>
            <label>{t!(i18n, orders.filter_to)} <input name="to" type="date" value=field("to")/></label>
            <button type="submit" class="button">{t!(i18n, orders.filter)}</button>
        </form>
        <p>
            <a href=move || format!("/orders.csv?{}", kept()) download="orders.csv" data-testid="orders-csv">
                {t!(i18n, orders.export)}
            </a>
        </p>
        {first_page.then(|| view! { <RefreshWhileVisible/> })}
        <div id=LIVE_REGION>
            <Loaded resource=orders view=move |list: OrdersList| {
                let next = list.next.map(|next| format!("/orders?{}&after={}", kept(), crate::links::encode(&next)));
                view! {
                    <OrdersTable rows=list.rows/>
                    {next.map(|href| view! { <p><a href=href rel="next">{t!(i18n, orders.older)}</a></p> })}
                }
            }/>
        </div>
    }
}

#[component]
fn OrdersTable(rows: Vec<OrderListRow>) -> impl IntoView {
    let i18n = use_i18n();
    if rows.is_empty() {
        return view! { <p class="empty">{t!(i18n, orders.no_orders)}</p> }.into_any();
    }
    // Each cell names its column for the phone, where the rows become cards.
    let labels = [
        t_string!(i18n, orders.col_order).to_string(),
        t_string!(i18n, orders.col_customer).to_string(),
        t_string!(i18n, orders.col_status).to_string(),
        t_string!(i18n, orders.col_amount).to_string(),
        t_string!(i18n, orders.col_credits_held).to_string(),
        t_string!(i18n, orders.col_created).to_string(),
    ];
    view! {
        <div class="table-wrap">
            <table class="stacked" aria-label=move || t_string!(i18n, orders.list_label) data-testid="orders-list">
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, orders.col_order)}</th>
                        <th scope="col">{t!(i18n, orders.col_customer)}</th>
                        <th scope="col">{t!(i18n, orders.col_status)}</th>
                        <th scope="col">{t!(i18n, orders.col_amount)}</th>
                        <th scope="col">{t!(i18n, orders.col_credits_held)}</th>
                        <th scope="col">{t!(i18n, orders.col_created)}</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|o| {
                            let href = crate::links::order(&o.order_id);
                            let row_id = o.order_id.clone();
                            let customer = o.customer_email.clone().map(|email| {
                                let link = crate::links::customer(&email);
                                view! { <a href=link>{email}</a> }
                            });
                            let [order, customer_label, status, amount, credits, created] = labels.clone();
                            view! {
                                <tr data-order=row_id>
                                    <td class="mono" data-label=order><a href=href>{o.order_id}</a></td>
                                    <td data-label=customer_label>{customer}</td>
                                    <td data-status=o.status.as_str() data-label=status>{order_status_name(i18n, o.status)}</td>
                                    <td class="nowrap" data-label=amount>{o.amount.unwrap_or_else(|| "-".into())}</td>
                                    <td class="nowrap" data-label=credits>{t!(i18n, orders.of, granted = crate::i18n::number(i18n.get_locale(), o.credits_granted), total = crate::i18n::number(i18n.get_locale(), o.credits))}</td>
                                    <td class="nowrap" data-label=created>{o.created_at}</td>
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

fn results(found: OrderSearch) -> impl IntoView {
    let i18n = use_i18n();
    if found.orders.is_empty() {
        return view! {
            <p class="empty">{t!(i18n, orders.no_match)}</p>
        }
        .into_any();
    }
    view! {
        {found
            .balance
            .map(|b| {
                view! {
                    <p class="balance">
                        {t!(i18n, orders.balance_before)} <strong data-testid="customer-balance">{b}</strong> {t!(i18n, orders.balance_after)}
                    </p>
                }
            })}
        {found.orders.into_iter().map(|order| view! { <OrderSummary order/> }).collect_view()}
    }
    .into_any()
}

/// An order in brief, linking to its page.
#[component]
pub fn OrderSummary(order: OrderDetail) -> impl IntoView {
    let i18n = use_i18n();
    let href = crate::links::order(&order.order_id);
    let data_order = order.order_id.clone();
    view! {
        <article class="summary" data-order=data_order>
            <a href=href class="mono">{order.order_id}</a>
            " · " <span data-status=order.status.as_str()>{order_status_name(i18n, order.status)}</span> " · "
            {order.customer_email.unwrap_or_default()} " · "
            <span>
                {t!(i18n, orders.credits_granted_of, granted = crate::i18n::number(i18n.get_locale(), order.credits_granted), total = crate::i18n::number(i18n.get_locale(), order.credits))}
            </span>
        </article>
    }
}

#[component]
pub fn OrderPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let order = Resource::new(id, get_order);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text=t_string!(i18n, orders.order_title).to_string()/>
        <section class="page">
            <ActionNotices/>
            <LoadedWithMe resource=order me view=|order, me| view! { <OrderView order me/> }/>
        </section>
    }
}

#[component]
fn OrderView(order: OrderDetail, me: Option<Me>) -> impl IntoView {
    let i18n = use_i18n();
    let refund = (order.refundable.is_some() && me.as_ref().is_some_and(Me::is_admin))
        .then(|| crate::links::refund(&order.order_id));
    let history = order.history.clone();
    let stripe_links = history.as_ref().and_then(|h| {
        let payment = h.stripe_payment.clone().map(|href| {
            view! { <a href=href rel="noopener noreferrer" target="_blank">{t!(i18n, timeline.stripe_payment)}</a> }
        });
        let customer = h.stripe_customer.clone().map(|href| {
            view! { " · " <a href=href rel="noopener noreferrer" target="_blank">{t!(i18n, timeline.stripe_customer)}</a> }
        });
        payment.map(|payment| view! {
            <dt>{t!(i18n, timeline.in_stripe)}</dt>
            <dd data-testid="order-in-stripe">{payment}{customer}</dd>
        })
    });
    view! {
        <div class="page-head">
            <h1 class="mono">{order.order_id.clone()}</h1>
            {refund.map(|href| view! { <a href=href class="button danger">{t!(i18n, orders.refund_link)}</a> })}
        </div>
        <dl class="facts">
            <dt>{t!(i18n, orders.status)}</dt>
            <dd data-testid="order-status" data-status=order.status.as_str()>
                {order_status_name(i18n, order.status)}
            </dd>
            <dt>{t!(i18n, orders.payment)}</dt>
            <dd data-testid="order-payment" data-status=order.payment_status.clone()>
                {payment_status_name(i18n, &order.payment_status)}
            </dd>
            <dt>{t!(i18n, orders.customer)}</dt>
            <dd>{order.customer_email.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.package)}</dt>
            <dd>{order.package.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.credits_granted)}</dt>
            <dd data-testid="credits-granted">
                {t!(i18n, orders.of, granted = crate::i18n::number(i18n.get_locale(), order.credits_granted), total = crate::i18n::number(i18n.get_locale(), order.credits))}
            </dd>
            {history.as_ref().and_then(|h| h.lot.clone()).map(|lot| {
                let locale = i18n.get_locale();
                let (spent, left) = (crate::i18n::number(locale, lot.spent), crate::i18n::number(locale, lot.remaining));
                let expires = if lot.expired {
                    t_string!(i18n, customers.expired).to_string()
                } else {
                    lot.expires.unwrap_or_else(|| t_string!(i18n, customers.never).to_string())
                };
                view! {
                    <dt>{t!(i18n, orders.lot_used)}</dt>
                    <dd data-testid="order-lot">{t!(i18n, orders.lot_spent_left, spent, left, expires)}</dd>
                }
            })}
            <dt>{t!(i18n, orders.paid)}</dt>
            <dd data-testid="order-paid">{order.paid.unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, orders.refunded)}</dt>
            <dd data-testid="order-refunded">{order.refunded.unwrap_or_else(|| "-".into())}</dd>
            {order.dispute.map(|d| view! {
                <dt>{t!(i18n, orders.dispute)}</dt>
                <dd data-testid="order-dispute" data-status=d.as_str()>{dispute_status_name(i18n, d)}</dd>
            })}
            <dt>{t!(i18n, orders.checkout_session)}</dt>
            <dd class="mono">{order.checkout_session_id.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.payment_intent)}</dt>
            <dd class="mono">{order.payment_intent_id.unwrap_or_default()}</dd>
            {history.as_ref().and_then(|h| h.paid_at.clone()).map(|at| view! {
                <dt>{t!(i18n, timeline.paid_at)}</dt>
                <dd data-testid="order-paid-at">{at}</dd>
            })}
            <dt>{t!(i18n, timeline.recorded_at)}</dt>
            <dd data-testid="order-created">{order.created_at}</dd>
            {history.as_ref().and_then(|h| h.failure.clone()).map(|why| view! {
                <dt>{t!(i18n, timeline.failure)}</dt>
                <dd data-testid="order-failure" class="failure">{why}</dd>
            })}
            {stripe_links}
        </dl>
        <h2>{t!(i18n, timeline.heading)}</h2>
        <p class="muted">{t!(i18n, timeline.intro)}</p>
        <OrderTimeline items=history.map(|h| h.timeline).unwrap_or_default()/>
        <h2>{t!(i18n, orders.ledger)}</h2>
        {if order.ledger.is_empty() {
            view! { <p class="empty">{t!(i18n, orders.no_ledger)}</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap">
                    <table aria-label=move || t_string!(i18n, orders.ledger)>
                        <thead>
                            <tr>
                                <th scope="col">{t!(i18n, orders.col_when)}</th>
                                <th scope="col">{t!(i18n, orders.col_entry)}</th>
                                <th scope="col">{t!(i18n, orders.col_credits)}</th>
                                <th scope="col">{t!(i18n, orders.col_money)}</th>
                                <th scope="col">{t!(i18n, orders.col_because)}</th>
                            </tr>
                        </thead>
                        <tbody>
                            {order
                                .ledger
                                .into_iter()
                                .map(|e| {
                                    let source = if e.source_is_event {
                                        let href = crate::links::event(&e.source);
                                        view! { <a href=href class="mono">{e.source}</a> }.into_any()
                                    } else {
                                        view! { <span class="mono">{e.source}</span> }.into_any()
                                    };
                                    view! {
                                        <tr>
                                            <td>{e.at}</td>
                                            <td data-kind=e.kind.as_str()>{ledger_kind_name(i18n, e.kind)}</td>
                                            <td>{format!("{:+}", e.delta)}</td>
                                            <td>{e.money}</td>
                                            <td>{source}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
            }
                .into_any()
        }}
        <h2>{t!(i18n, orders.keys_heading)}</h2>
        {if order.requests.is_empty() {
            view! { <p class="empty">{t!(i18n, orders.no_requests)}</p> }.into_any()
        } else {
            view! { <RequestTable rows=order.requests with_order=false/> }
                .into_any()
        }}
    }
}
