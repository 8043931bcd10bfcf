//! Orders and customers: search, one order with its ledger and Idempotency-Keys, and the
//! refund confirmation.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{Me, OrderDetail, OrderSearch, get_me, get_order, search_orders};
use crate::components::{ActionNotices, ErrorNotice, Loaded, error_message};

#[component]
pub fn OrdersPage() -> impl IntoView {
    let query = use_query_map();
    let term = move || query.read().get("q").unwrap_or_default();
    let found = Resource::new(term, search_orders);
    view! {
        <Title text="Orders"/>
        <section class="page">
            <h1>"Orders and customers"</h1>
            <form method="get" action="/orders" class="filters" role="search">
                <label>
                    "Find"
                    <input
                        name="q"
                        value=term
                        placeholder="customer email, order id, session or payment intent"
                    />
                </label>
                <button type="submit" class="button">"Search"</button>
            </form>
            {move || {
                (!term().trim().is_empty())
                    .then(|| view! { <Loaded resource=found view=results/> })
            }}
        </section>
    }
}

fn results(found: OrderSearch) -> impl IntoView {
    if found.orders.is_empty() {
        return view! {
            <p class="empty">"No order matches. Try the customer's email or the order id."</p>
        }
        .into_any();
    }
    view! {
        {found
            .balance
            .map(|b| {
                view! {
                    <p class="balance">
                        "Customer balance: " <strong data-testid="customer-balance">{b}</strong> " credits"
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
    let href = format!("/orders/{}", order.order_id);
    let data_order = order.order_id.clone();
    view! {
        <article class="summary" data-order=data_order>
            <a href=href class="mono">{order.order_id}</a>
            " · " {order.status.as_str()} " · " {order.customer_email.unwrap_or_default()} " · "
            <span>{order.credits_granted} " of " {order.credits} " credits granted"</span>
        </article>
    }
}

#[component]
pub fn OrderPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let order = Resource::new(id, get_order);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text="Order"/>
        <section class="page">
            <ActionNotices/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
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
    let refund = (order.refundable.is_some() && me.as_ref().is_some_and(Me::is_admin))
        .then(|| format!("/orders/{}/refund", order.order_id));
    view! {
        <div class="page-head">
            <h1 class="mono">{order.order_id.clone()}</h1>
            {refund.map(|href| view! { <a href=href class="button danger">"Refund…"</a> })}
        </div>
        <dl class="facts">
            <dt>"Status"</dt>
            <dd data-testid="order-status">{order.status.as_str()}</dd>
            <dt>"Payment"</dt>
            <dd>{order.payment_status}</dd>
            <dt>"Customer"</dt>
            <dd>{order.customer_email.unwrap_or_default()}</dd>
            <dt>"Package"</dt>
            <dd>{order.package.unwrap_or_default()}</dd>
            <dt>"Credits granted"</dt>
            <dd data-testid="credits-granted">{order.credits_granted} " of " {order.credits}</dd>
            <dt>"Paid"</dt>
            <dd data-testid="order-paid">{order.paid.unwrap_or_else(|| "-".into())}</dd>
            <dt>"Refunded"</dt>
            <dd data-testid="order-refunded">{order.refunded.unwrap_or_else(|| "-".into())}</dd>
            {order.dispute.map(|d| view! { <dt>"Dispute"</dt><dd data-testid="order-dispute">{d}</dd> })}
            <dt>"Checkout session"</dt>
            <dd class="mono">{order.checkout_session_id.unwrap_or_default()}</dd>
            <dt>"Payment intent"</dt>
            <dd class="mono">{order.payment_intent_id.unwrap_or_default()}</dd>
            <dt>"Created"</dt>
            <dd>{order.created_at}</dd>
        </dl>
        <h2>"Credit ledger"</h2>
        {if order.ledger.is_empty() {
            view! { <p class="empty">"No credits granted or revoked yet."</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap">
                    <table aria-label="Credit ledger">
                        <thead>
                            <tr>
                                <th scope="col">"When"</th>
                                <th scope="col">"Entry"</th>
                                <th scope="col">"Credits"</th>
                                <th scope="col">"Money"</th>
                                <th scope="col">"Because of"</th>
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
                                            <td>{e.kind.as_str()}</td>
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
        <h2>"Idempotency-Keys sent to Stripe"</h2>
        {if order.requests.is_empty() {
            view! { <p class="empty">"No request has been sent to Stripe for this order."</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap">
                    <table aria-label="Stripe requests">
                        <thead>
                            <tr>
                                <th scope="col">"Idempotency-Key"</th>
                                <th scope="col">"Status"</th>
                                <th scope="col">"HTTP"</th>
                                <th scope="col">"Attempts"</th>
                                <th scope="col">"Stripe object"</th>
                                <th scope="col">"Error"</th>
                                <th scope="col">"Updated"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {order
                                .requests
                                .into_iter()
                                .map(|r| {
                                    view! {
                                        <tr>
                                            <td class="mono">{r.idempotency_key}</td>
                                            <td>{r.status}</td>
                                            <td>{r.http_status.map(|s| s.to_string()).unwrap_or("-".into())}</td>
                                            <td>{r.attempts}</td>
                                            <td class="mono">{r.object_id.unwrap_or_default()}</td>
                                            <td class="error-text">{r.error.unwrap_or_default()}</td>
                                            <td>{r.at}</td>
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
    }
}

/// What a refund will do, then the reason and the button (admins).
#[component]
pub fn RefundPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let order = Resource::new(id, get_order);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text="Refund"/>
        <section class="page narrow">
            <h1>"Refund an order"</h1>
            <ActionNotices/>
            <Loaded resource=me view=|me: Me| {
                (!me.is_admin())
                    .then(|| {
                        view! {
                            <p class="notice notice-error" role="alert">
                                "Refunds need the admin role; you are " {me.role.as_str()} "."
                            </p>
                        }
                    })
            }/>
            <Loaded resource=order view=refund_form/>
        </section>
    }
}

fn refund_form(order: OrderDetail) -> impl IntoView {
    view! {
        <dl class="facts">
            <dt>"Order"</dt>
            <dd class="mono">{order.order_id.clone()}</dd>
            <dt>"Customer"</dt>
            <dd>{order.customer_email.unwrap_or_default()}</dd>
            <dt>"Payment intent"</dt>
            <dd class="mono">{order.payment_intent_id.unwrap_or_default()}</dd>
            <dt>"Paid"</dt>
            <dd>{order.paid.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>"Refunded so far"</dt>
            <dd>{order.refunded.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>"What happens"</dt>
            <dd>
                "Stripe refunds the amount below (all that is left if you leave it empty); of the "
                {order.credits_granted} " credit(s) granted, the share refunded is revoked, once. "
                "The Idempotency-Key names the order and the refunded total after this refund, so "
                "pressing twice refunds once."
            </dd>
        </dl>
        {match order.refundable {
            Some(left) => {
                view! {
                    <form method="post" action="/dashboard/actions/refund" class="stack">
                        <input type="hidden" name="order_id" value=order.order_id/>
                        <label for="amount">"Amount (up to " {left.clone()} "; empty: all of it)"</label>
                        <input id="amount" name="amount" inputmode="decimal" placeholder=left autocomplete="off"/>
                        <label for="reason">"Why (kept in the audit log)"</label>
                        <textarea id="reason" name="reason" required rows="3"></textarea>
                        <button type="submit" class="button danger">"Refund now"</button>
                    </form>
                }
                    .into_any()
            }
            None => {
                view! {
                    <p class="notice">
                        "This order is " {order.status.as_str()} ": nothing is left to refund."
                    </p>
                }
                    .into_any()
            }
        }}
    }
}
