//! Reconcile with Stripe: the runs so far, then (admins) a dry run that shows what Stripe's
//! event list holds that was never claimed, and the run for real through the same path.
//! Opening the page changes nothing and asks Stripe nothing.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{ReconcileHistory, ReconcileRunRow, get_reconcile_history};
use crate::components::{ActionNotices, Loaded};
use crate::i18n::*;

#[component]
pub fn ReconcilePage() -> impl IntoView {
    let i18n = use_i18n();
    let history = Resource::new(|| (), |_| get_reconcile_history());
    view! {
        <Title text=t_string!(i18n, reconcile.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, reconcile.heading)}</h1>
            <ActionNotices/>
            <p>{t!(i18n, reconcile.intro)}</p>
            <Loaded resource=history view=history_view/>
        </section>
    }
}

fn history_view(history: ReconcileHistory) -> impl IntoView {
    let i18n = use_i18n();
    let actions = match (history.configured, history.can_run) {
        (false, _) => Some(
            view! {
                <p class="notice notice-error" role="alert">{t!(i18n, reconcile.needs_key)}</p>
            }
            .into_any(),
        ),
        (true, true) => Some(
            view! {
                <div class="narrow">
                    <form method="post" action="/dashboard/actions/reconcile/preview" class="stack">
                        <p class="muted">{t!(i18n, reconcile.dry_run_hint)}</p>
                        <button type="submit" class="button secondary">{t!(i18n, reconcile.dry_run)}</button>
                    </form>
                    <form method="post" action="/dashboard/actions/reconcile" class="stack">
                        <label for="reason">{t!(i18n, reconcile.reason)}</label>
                        <textarea id="reason" name="reason" required rows="2"></textarea>
                        <button type="submit" class="button">{t!(i18n, reconcile.now)}</button>
                    </form>
                </div>
            }
            .into_any(),
        ),
        (true, false) => None,
    };
    view! {
        {actions}
        <h2>{t!(i18n, reconcile.history)}</h2>
        {if history.runs.is_empty() {
            view! { <p class="empty">{t!(i18n, reconcile.no_runs)}</p> }.into_any()
        } else {
            view! {
                <div class="table-wrap">
                    <table aria-label=move || t_string!(i18n, reconcile.history) data-testid="reconcile-runs">
                        <thead>
                            <tr>
                                <th scope="col">{t!(i18n, reconcile.col_started)}</th>
                                <th scope="col">{t!(i18n, reconcile.col_actor)}</th>
                                <th scope="col">{t!(i18n, reconcile.col_kind)}</th>
                                <th scope="col">{t!(i18n, reconcile.col_since)}</th>
                                <th scope="col">{t!(i18n, reconcile.col_listed)}</th>
                                <th scope="col">{t!(i18n, reconcile.col_already)}</th>
                                <th scope="col">{t!(i18n, reconcile.col_claimed)}</th>
                                <th scope="col">{t!(i18n, reconcile.col_error)}</th>
                            </tr>
                        </thead>
                        <tbody>{history.runs.into_iter().map(run_row).collect_view()}</tbody>
                    </table>
                </div>
            }
                .into_any()
        }}
    }
}

fn run_row(run: ReconcileRunRow) -> impl IntoView {
    let i18n = use_i18n();
    let kind = if run.dry_run {
        t_string!(i18n, reconcile.kind_dry_run).to_string()
    } else {
        t_string!(i18n, reconcile.kind_run).to_string()
    };
    view! {
        <tr data-dry-run=run.dry_run.to_string()>
            <td class="nowrap">{run.started_at}</td>
            <td class="mono">{run.actor}</td>
            <td>{kind}</td>
            <td class="nowrap">{run.since}</td>
            <td>{run.listed}</td>
            <td>{run.already_claimed}</td>
            <td data-testid="run-claimed">{run.claimed}</td>
            <td class="error-text">{run.error.unwrap_or_default()}</td>
        </tr>
    }
}
