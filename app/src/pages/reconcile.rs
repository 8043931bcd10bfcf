//! Reconcile now (admins): a dry run first shows what Stripe's event list holds that was never
//! claimed, then a reason and the button run it for real through the same path.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{ReconcilePreview, get_reconcile_preview};
use crate::components::{ActionNotices, Loaded};

#[component]
pub fn ReconcilePage() -> impl IntoView {
    let preview = Resource::new(|| (), |_| get_reconcile_preview());
    view! {
        <Title text="Reconcile"/>
        <section class="page narrow">
            <h1>"Reconcile with Stripe"</h1>
            <ActionNotices/>
            <p>
                "Lists the events Stripe holds (the last 30 days at most) and claims those that "
                "never arrived here, through the same path as a delivery: nothing is granted twice."
            </p>
            <Loaded resource=preview view=preview_view/>
        </section>
    }
}

fn preview_view(preview: ReconcilePreview) -> impl IntoView {
    if !preview.configured {
        return view! {
            <p class="notice notice-error" role="alert">
                "Reconciling needs STRIPE_API_KEY on the server (a restricted key that may read events is enough)."
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
            "Since " {preview.since} ": " {preview.listed} " events listed, "
            {preview.already_claimed} " claimed already, " <strong>{preview.would_claim}</strong>
            " would be claimed now."
        </p>
        <div class="table-wrap">
            <table aria-label="Events by type">
                <thead>
                    <tr>
                        <th scope="col">"Type"</th>
                        <th scope="col">"Listed"</th>
                        <th scope="col">"Claimed already"</th>
                        <th scope="col">"Would claim"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <form method="post" action="/dashboard/actions/reconcile" class="stack">
            <label for="reason">"Why (kept in the audit log)"</label>
            <textarea id="reason" name="reason" required rows="2"></textarea>
            <button type="submit" class="button">"Reconcile now"</button>
        </form>
    }
    .into_any()
}
