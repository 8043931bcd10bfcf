//! Who did what, when and why: re-drives, refunds, operator changes.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{AuditRow, get_audit};
use crate::components::Loaded;
use crate::i18n::*;

#[component]
pub fn AuditPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let before = move || {
        query
            .read()
            .get("before")
            .and_then(|b| b.parse::<i64>().ok())
    };
    let entries = Resource::new(before, get_audit);
    view! {
        <Title text=t_string!(i18n, audit.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, audit.title)}</h1>
            <Loaded resource=entries view=audit_table/>
        </section>
    }
}

fn audit_table(rows: Vec<AuditRow>) -> impl IntoView {
    let i18n = use_i18n();
    if rows.is_empty() {
        return view! { <p class="empty">{t!(i18n, audit.empty)}</p> }.into_any();
    }
    let older = (rows.len() == 100)
        .then(|| rows.last().map(|r| format!("/audit?before={}", r.id)))
        .flatten();
    view! {
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, audit.title)>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, audit.col_when)}</th>
                        <th scope="col">{t!(i18n, audit.col_who)}</th>
                        <th scope="col">{t!(i18n, audit.col_action)}</th>
                        <th scope="col">{t!(i18n, audit.col_on)}</th>
                        <th scope="col">{t!(i18n, audit.col_why)}</th>
                        <th scope="col">{t!(i18n, audit.col_outcome)}</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|r| {
                            view! {
                                <tr>
                                    <td>{r.at}</td>
                                    <td>{r.actor}</td>
                                    <td>{r.action}</td>
                                    <td class="mono">{r.target}</td>
                                    <td>{r.reason}</td>
                                    <td>{r.outcome}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
        {older.map(|href| view! { <a href=href>{t!(i18n, audit.older)}</a> })}
    }
    .into_any()
}
