//! Who did what, when and why: re-drives, refunds, operator changes.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{AuditRow, get_audit};
use crate::components::Loaded;

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let before = move || {
        query
            .read()
            .get("before")
            .and_then(|b| b.parse::<i64>().ok())
    };
    let entries = Resource::new(before, get_audit);
    view! {
        <Title text="Audit log"/>
        <section class="page">
            <h1>"Audit log"</h1>
            <Loaded resource=entries view=audit_table/>
        </section>
    }
}

fn audit_table(rows: Vec<AuditRow>) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="empty">"Nothing has been done by hand yet."</p> }.into_any();
    }
    let older = (rows.len() == 100)
        .then(|| rows.last().map(|r| format!("/audit?before={}", r.id)))
        .flatten();
    view! {
        <div class="table-wrap">
            <table>
                <thead>
                    <tr>
                        <th scope="col">"When"</th>
                        <th scope="col">"Who"</th>
                        <th scope="col">"Action"</th>
                        <th scope="col">"On"</th>
                        <th scope="col">"Why"</th>
                        <th scope="col">"Outcome"</th>
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
        {older.map(|href| view! { <a href=href>"Older entries"</a> })}
    }
    .into_any()
}
