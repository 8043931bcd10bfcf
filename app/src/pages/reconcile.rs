//! Reconcile now (admins): a dry run first shows what Stripe's event list holds that was never
//! claimed, then a reason and the button run it for real through the same path.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{ReconcilePreview, get_reconcile_preview};
use crate::components::{ActionNotices, Loaded};
use crate::i18n::*;

#[component]
pub fn ReconcilePage() -> impl IntoView {
    let i18n = use_i18n();
    let preview = Resource::new(|| (), |_| get_reconcile_preview());
    view! {
        <Title text=t_string!(i18n, reconcile.title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, reconcile.heading)}</h1>
            <ActionNotices/>
            <p>{t!(i18n, reconcile.intro)}</p>
            <Loaded resource=preview view=preview_view/>
        </section>
    }
}

fn preview_view(preview: ReconcilePreview) -> impl IntoView {
    let i18n = use_i18n();
    if !preview.configured {
        return view! {
            <p class="notice notice-error" role="alert">
                {t!(i18n, reconcile.needs_key)}
            </p>
        }
        .into_any();
    }
    let rows = preview
        .per_type
        .into_iter()
        .map(|(kind, listed, already, would)| {
            view! {
                <tr>
                    <td class="mono">{kind}</td>
                    <td>{listed}</td>
                    <td>{already}</td>
                    <td>{would}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p data-testid="reconcile-preview">
            {t!(i18n, reconcile.summary, since = preview.since, listed = preview.listed, already = preview.already_claimed)}
            " " <strong>{preview.would_claim}</strong> " " {t!(i18n, reconcile.would_claim_now)}
        </p>
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, reconcile.table_label)>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, reconcile.col_type)}</th>
                        <th scope="col">{t!(i18n, reconcile.col_listed)}</th>
                        <th scope="col">{t!(i18n, reconcile.col_already)}</th>
                        <th scope="col">{t!(i18n, reconcile.col_would)}</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <form method="post" action="/dashboard/actions/reconcile" class="stack">
            <label for="reason">{t!(i18n, reconcile.reason)}</label>
            <textarea id="reason" name="reason" required rows="2"></textarea>
            <button type="submit" class="button">{t!(i18n, reconcile.now)}</button>
        </form>
    }
    .into_any()
}
