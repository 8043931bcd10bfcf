//! One customer, found by e-mail or customer id: what is waiting, their orders, their credit
//! history and every event that names them.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::api::{CustomerDetail, get_customer};
use crate::components::Loaded;
use crate::i18n::*;
use crate::pages::events::ClaimTable;
use crate::pages::orders::{OrderSummary, ledger_kind_name};

#[component]
pub fn CustomerPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let who = move || params.read().get("who").unwrap_or_default();
    let customer = Resource::new(who, get_customer);
    view! {
        <Title text=t_string!(i18n, customers.title).to_string()/>
        <section class="page">
            <Loaded resource=customer view=customer_view/>
        </section>
    }
}

fn customer_view(c: CustomerDetail) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <h1 class="mono" data-testid="customer">{c.customer}</h1>
        <p class="balance">
            {t!(i18n, customers.balance_before)} " "
            <strong data-testid="customer-balance">{crate::i18n::number(i18n.get_locale(), c.balance)}</strong> " "
            {t!(i18n, customers.balance_after)}
        </p>
        <h2>{t!(i18n, customers.waiting)}</h2>
        {if c.waiting.is_empty() {
            view! { <p class="empty" data-testid="nothing-waiting">{t!(i18n, customers.nothing_waiting)}</p> }
                .into_any()
        } else {
            view! {
                <p class="muted">{t!(i18n, customers.waiting_hint)}</p>
                <div data-testid="customer-waiting">
                    <ClaimTable rows=c.waiting/>
                </div>
            }
                .into_any()
        }}
        <h2>{t!(i18n, customers.orders)}</h2>
        {if c.orders.is_empty() {
            view! { <p class="empty">{t!(i18n, customers.no_orders)}</p> }.into_any()
        } else {
            c.orders.into_iter().map(|order| view! { <OrderSummary order/> }).collect_view().into_any()
        }}
        <h2>{t!(i18n, customers.history)}</h2>
        {if c.history.is_empty() {
            view! { <p class="empty">{t!(i18n, customers.no_history)}</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap">
                    <table aria-label=move || t_string!(i18n, customers.history) data-testid="customer-history">
                        <thead>
                            <tr>
                                <th scope="col">{t!(i18n, customers.col_when)}</th>
                                <th scope="col">{t!(i18n, customers.col_order)}</th>
                                <th scope="col">{t!(i18n, customers.col_entry)}</th>
                                <th scope="col">{t!(i18n, customers.col_credits)}</th>
                                <th scope="col">{t!(i18n, customers.col_money)}</th>
                            </tr>
                        </thead>
                        <tbody>
                            {c
                                .history
                                .into_iter()
                                .map(|row| {
                                    let href = crate::links::order(&row.order_id);
                                    let e = row.entry;
                                    view! {
                                        <tr>
                                            <td class="nowrap">{e.at}</td>
                                            <td class="mono"><a href=href>{row.order_id}</a></td>
                                            <td data-kind=e.kind.as_str()>{ledger_kind_name(i18n, e.kind)}</td>
                                            <td class="nowrap">{format!("{:+}", e.delta)}</td>
                                            <td>{e.money}</td>
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
        <h2>{t!(i18n, customers.events)}</h2>
        <ClaimTable rows=c.events/>
    }
}
