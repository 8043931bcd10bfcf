//! Orders and customers: search, one order with its ledger and Idempotency-Keys, and the
//! refund confirmation.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{Me, OrderDetail, OrderSearch, get_me, get_order, search_orders};
use claimcheck_core::money::{LedgerKind, OrderStatus};

use crate::components::{ActionNotices, ErrorNotice, Loaded, error_message};
use crate::i18n::*;
use crate::pages::requests::RequestTable;

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
                (!term().trim().is_empty())
                    .then(|| view! { <Loaded resource=found view=results/> })
            }}
        </section>
    }
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
    let href = format!("/orders/{}", order.order_id);
    let data_order = order.order_id.clone();
    view! {
        <article class="summary" data-order=data_order>
            <a href=href class="mono">{order.order_id}</a>
            " · " <span data-status=order.status.as_str()>{order_status_name(i18n, order.status)}</span> " · "
            {order.customer_email.unwrap_or_default()} " · "
            <span>
                {t!(i18n, orders.credits_granted_of, granted = order.credits_granted, total = order.credits)}
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
            <Transition fallback=move || view! { <p class="muted">{t!(i18n, common.loading)}</p> }>
                {move || {
                    let me = me.get().and_then(Result::ok);
                    order
                        .get()
                        .map(|result| match result {
                            Ok(order) => view! { <OrderView order me/> }.into_any(),
                            Err(error) => view! { <ErrorNotice message=error_message(&error)/> }.into_any(),
                        })
                }}
            </Transition>
        </section>
    }
}

#[component]
fn OrderView(order: OrderDetail, me: Option<Me>) -> impl IntoView {
    let i18n = use_i18n();
    let refund = (order.refundable.is_some() && me.as_ref().is_some_and(Me::is_admin))
        .then(|| format!("/orders/{}/refund", order.order_id));
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
            <dd>{order.payment_status}</dd>
            <dt>{t!(i18n, orders.customer)}</dt>
            <dd>{order.customer_email.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.package)}</dt>
            <dd>{order.package.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.credits_granted)}</dt>
            <dd data-testid="credits-granted">
                {t!(i18n, orders.of, granted = order.credits_granted, total = order.credits)}
            </dd>
            <dt>{t!(i18n, orders.paid)}</dt>
            <dd data-testid="order-paid">{order.paid.unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, orders.refunded)}</dt>
            <dd data-testid="order-refunded">{order.refunded.unwrap_or_else(|| "-".into())}</dd>
            {order.dispute.map(|d| view! { <dt>{t!(i18n, orders.dispute)}</dt><dd data-testid="order-dispute">{d}</dd> })}
            <dt>{t!(i18n, orders.checkout_session)}</dt>
            <dd class="mono">{order.checkout_session_id.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.payment_intent)}</dt>
            <dd class="mono">{order.payment_intent_id.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.created)}</dt>
            <dd data-testid="order-created">{order.created_at}</dd>
        </dl>
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
                                        let href = format!("/events/{}", e.source);
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

/// What a refund will do, then the reason and the button (admins).
#[component]
pub fn RefundPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let order = Resource::new(id, get_order);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text=t_string!(i18n, orders.refund_title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, orders.refund_heading)}</h1>
            <ActionNotices/>
            <Loaded resource=me view=|me: Me| {
                let i18n = use_i18n();
                (!me.is_admin())
                    .then(|| {
                        view! {
                            <p class="notice notice-error" role="alert">
                                {t!(i18n, orders.refund_needs_admin, role = names::role(i18n.get_locale(), me.role))}
                            </p>
                        }
                    })
            }/>
            <Loaded resource=order view=refund_form/>
        </section>
    }
}

fn refund_form(order: OrderDetail) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <dl class="facts">
            <dt>{t!(i18n, orders.order)}</dt>
            <dd class="mono">{order.order_id.clone()}</dd>
            <dt>{t!(i18n, orders.customer)}</dt>
            <dd>{order.customer_email.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.payment_intent)}</dt>
            <dd class="mono">{order.payment_intent_id.unwrap_or_default()}</dd>
            <dt>{t!(i18n, orders.paid)}</dt>
            <dd>{order.paid.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, orders.refunded_so_far)}</dt>
            <dd>{order.refunded.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, orders.what_happens)}</dt>
            <dd>
                {t!(i18n, orders.refund_effect, n = order.credits_granted)}
            </dd>
        </dl>
        {match order.refundable {
            Some(left) => {
                view! {
                    <form method="post" action="/dashboard/actions/refund" class="stack">
                        <input type="hidden" name="order_id" value=order.order_id/>
                        <label for="amount">{t!(i18n, orders.amount_label, left = left.clone())}</label>
                        <input id="amount" name="amount" inputmode="decimal" placeholder=left autocomplete="off"/>
                        <label for="reason">{t!(i18n, orders.reason)}</label>
                        <textarea id="reason" name="reason" required rows="3"></textarea>
                        <button type="submit" class="button danger">{t!(i18n, orders.refund_now)}</button>
                    </form>
                }
                    .into_any()
            }
            None => {
                view! {
                    <p class="notice">
                        {t!(i18n, orders.nothing_to_refund, status = order_status_name(i18n, order.status))}
                    </p>
                }
                    .into_any()
            }
        }}
    }
}
