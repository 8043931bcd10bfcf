//! Bulk re-drive: a filter, the preview (claims, orders, orders already credited, the first
//! rows), the confirmation by typing the count; then the batch's progress page, which
//! refreshes itself once hydrated (and has a refresh link without WASM), with a guarded
//! cancel and, for an interrupted batch, a resume.

use claimcheck_core::ClaimState;
use claimcheck_core::bulk::BatchState;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_location, use_params_map, use_query_map};

use crate::api::{
    BatchDetail, BatchProgress, BatchSummary, BulkPreviewView, Me, bulk_batch, bulk_batch_progress,
    bulk_batches, bulk_preview, get_me,
};
use crate::components::{ActionNotices, ErrorNotice, Loaded, StateBadge, error_message};

/// The states a bulk re-drive may select; empty is all three.
const STATES: [&str; 4] = ["", "failed", "stale", "pending"];

/// The filter fields, as the page's query names them.
const FIELDS: [&str; 7] = ["status", "type", "from", "to", "older_than", "error", "q"];

#[component]
pub fn BulkRedrivePage() -> impl IntoView {
    let query = use_query_map();
    let field = move |name: &'static str| move || query.read().get(name).unwrap_or_default();
    let me = Resource::new(|| (), |_| get_me());
    let preview = Resource::new(
        move || {
            let q = query.read();
            (
                q.get("preview").is_some(),
                FIELDS.map(|f| q.get(f).unwrap_or_default()),
            )
        },
        |(asked, [status, event_type, from, to, older_than, error, search])| async move {
            // Only support and admins preview (the server function refuses the others, and
            // a refusal here would answer the whole page 403).
            if !asked || !get_me().await?.can_redrive() {
                return Ok(None);
            }
            bulk_preview(status, event_type, from, to, older_than, error, search)
                .await
                .map(Some)
        },
    );
    let batches = Resource::new(|| (), |_| bulk_batches());
    view! {
        <Title text="Bulk re-drive"/>
        <section class="page">
            <h1>"Re-drive claims in bulk"</h1>
            <ActionNotices/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || {
                    me.get()
                        .map(|me| match me {
                            Ok(me) if me.can_redrive() => {
                                view! {
                                    <p>
                                        "Pick the claims, look at what a re-drive will do, then confirm by typing "
                                        "how many. Each claim runs in turn through the same path as a single "
                                        "re-drive: an order that has its credits gets nothing twice, and a claim "
                                        "another operator or worker holds is skipped."
                                    </p>
                                    <form method="get" action="/claims/redrive" class="filters" role="search">
                                        <input type="hidden" name="preview" value="1"/>
                                        <label>
                                            "State"
                                            <select name="status">
                                                {STATES
                                                    .map(|s| {
                                                        let selected = move || field("status")() == s;
                                                        view! {
                                                            <option value=s selected=selected>
                                                                {if s.is_empty() { "pending, stale or failed" } else { s }}
                                                            </option>
                                                        }
                                                    })
                                                    .collect_view()}
                                            </select>
                                        </label>
                                        <label>
                                            "Type"
                                            <input name="type" value=field("type") placeholder="checkout.session.completed"/>
                                        </label>
                                        <label>"Received from" <input name="from" type="date" value=field("from")/></label>
                                        <label>"Received to" <input name="to" type="date" value=field("to")/></label>
                                        <label>
                                            "Older than"
                                            <input name="older_than" value=field("older_than") placeholder="10m, 2h, 3d" size="8"/>
                                        </label>
                                        <label>
                                            "Last error contains"
                                            <input name="error" value=field("error") placeholder="no credit amount"/>
                                        </label>
                                        <label>
                                            "Search"
                                            <input name="q" value=field("q") placeholder="order id, session, email"/>
                                        </label>
                                        <button type="submit" class="button">"Preview"</button>
                                    </form>
                                    {move || {
                                        preview
                                            .get()
                                            .map(|result| match result {
                                                Ok(Some(preview)) => view! { <PreviewView preview/> }.into_any(),
                                                Ok(None) => ().into_any(),
                                                Err(error) => {
                                                    view! { <ErrorNotice message=error_message(&error)/> }.into_any()
                                                }
                                            })
                                    }}
                                }
                                    .into_any()
                            }
                            Ok(me) => {
                                view! {
                                    <p class="notice notice-error" role="alert">
                                        "Re-driving needs the support or admin role; you are " {me.role.as_str()} "."
                                    </p>
                                }
                                    .into_any()
                            }
                            Err(error) => view! { <ErrorNotice message=error_message(&error)/> }.into_any(),
                        })
                }}
            </Transition>
            <h2>"Recent batches"</h2>
            <Loaded resource=batches view=batch_list/>
        </section>
    }
}

#[component]
fn PreviewView(preview: BulkPreviewView) -> impl IntoView {
    let location = use_location();
    // Back to this very preview if the start is refused (the notices are dropped).
    let back = {
        let query = location.search.get_untracked();
        let kept: Vec<&str> = query
            .trim_start_matches('?')
            .split('&')
            .filter(|p| !p.starts_with("error=") && !p.starts_with("notice=") && !p.is_empty())
            .collect();
        format!("/claims/redrive?{}", kept.join("&"))
    };
    if preview.claims == 0 {
        return view! {
            <p class="empty" data-testid="bulk-preview">
                "No pending, stale or failed claim matches (" {preview.described} "). Nothing to re-drive."
            </p>
        }
        .into_any();
    }
    let count = preview.claims.to_string();
    let filter = preview.filter.clone();
    let hidden = |name: &'static str, value: Option<String>| {
        view! { <input type="hidden" name=name value=value.unwrap_or_default()/> }
    };
    let more = preview.claims - preview.rows.len() as i64;
    view! {
        <div class="preview" data-testid="bulk-preview">
            <h2>"What a re-drive will do"</h2>
            <dl class="facts">
                <dt>"Selected"</dt>
                <dd data-testid="bulk-claims">{preview.claims} " claims (" {preview.described} ")"</dd>
                <dt>"Orders"</dt>
                <dd data-testid="bulk-orders">{preview.orders} " distinct orders"</dd>
                <dt>"Already credited"</dt>
                <dd data-testid="bulk-credited">
                    {preview.orders_credited}
                    " of them have their credits already: a re-drive does not grant them again"
                </dd>
                {(preview.without_order > 0)
                    .then(|| {
                        view! {
                            <dt>"No order yet"</dt>
                            <dd>{preview.without_order} " claims are about a payment no order is known for yet"</dd>
                        }
                    })}
                {(preview.unplannable > 0)
                    .then(|| {
                        view! {
                            <dt>"Will fail again"</dt>
                            <dd>{preview.unplannable} " claims cannot be fulfilled as they stand"</dd>
                        }
                    })}
                <dt>"Outgoing Stripe calls"</dt>
                <dd>"None: fulfilment writes the ledger only."</dd>
            </dl>
            <div class="table-wrap">
                <table aria-label="The first claims">
                    <thead>
                        <tr>
                            <th scope="col">"Event"</th>
                            <th scope="col">"Type"</th>
                            <th scope="col">"State"</th>
                            <th scope="col">"Age"</th>
                            <th scope="col">"Order"</th>
                            <th scope="col">"Credited"</th>
                            <th scope="col">"Last error"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {preview
                            .rows
                            .into_iter()
                            .map(|r| {
                                let href = format!("/events/{}", r.claim.event_id);
                                view! {
                                    <tr>
                                        <td class="mono"><a href=href>{r.claim.event_id}</a></td>
                                        <td>{r.claim.event_type}</td>
                                        <td><StateBadge state=r.claim.status/></td>
                                        <td title=r.claim.received_at>{r.claim.age}</td>
                                        <td class="mono">{r.order_id.unwrap_or_else(|| "-".into())}</td>
                                        <td>{if r.credited { "yes" } else { "no" }}</td>
                                        <td class="error-text">{r.claim.last_error.unwrap_or_default()}</td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            {(more > 0).then(|| view! { <p class="muted">"… and " {more} " more."</p> })}
            <form method="post" action="/dashboard/actions/bulk-redrive" class="stack">
                {hidden("status", filter.state.map(|s: ClaimState| s.as_str().to_owned()))}
                {hidden("event_type", filter.event_type)}
                {hidden("received_after", filter.received_after.map(|v| v.to_string()))}
                {hidden("received_before", filter.received_before.map(|v| v.to_string()))}
                {hidden("error_contains", filter.error_contains)}
                {hidden("search", filter.search)}
                <input type="hidden" name="back" value=back/>
                <label for="reason">"Why (kept in the audit log)"</label>
                <textarea id="reason" name="reason" required rows="2"></textarea>
                <label for="confirm">"Type " <strong>{count.clone()}</strong> " to confirm"</label>
                <input
                    id="confirm"
                    name="confirm"
                    required
                    inputmode="numeric"
                    autocomplete="off"
                    pattern=count.clone()
                    title=format!("Type {count}")
                />
                <button type="submit" class="button">"Re-drive " {count.clone()} " claims"</button>
            </form>
        </div>
    }
    .into_any()
}

fn batch_list(batches: Vec<BatchSummary>) -> impl IntoView {
    if batches.is_empty() {
        return view! { <p class="empty">"No bulk re-drive yet."</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table aria-label="Recent batches">
                <thead>
                    <tr>
                        <th scope="col">"Batch"</th>
                        <th scope="col">"State"</th>
                        <th scope="col">"Done"</th>
                        <th scope="col">"Failed"</th>
                        <th scope="col">"Skipped"</th>
                        <th scope="col">"By"</th>
                        <th scope="col">"Started"</th>
                        <th scope="col">"Why"</th>
                    </tr>
                </thead>
                <tbody>
                    {batches
                        .into_iter()
                        .map(|b| {
                            let href = format!("/claims/redrive/{}", b.batch_id);
                            view! {
                                <tr>
                                    <td class="mono"><a href=href>{b.batch_id}</a></td>
                                    <td><BatchBadge state=b.state/></td>
                                    <td>{format!("{} / {}", b.done, b.total)}</td>
                                    <td>{b.failed}</td>
                                    <td>{b.skipped}</td>
                                    <td>{b.actor}</td>
                                    <td>{b.started_at}</td>
                                    <td>{b.reason}</td>
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
fn BatchBadge(state: BatchState) -> impl IntoView {
    let class = format!("badge batch-{state}");
    view! { <span class=class>{state.as_str()}</span> }
}

/// One batch's progress. Server-rendered with a refresh link; while it runs, its progress
/// follows the batch by itself once hydrated ([`LiveProgress`]).
#[component]
pub fn BulkBatchPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let batch = Resource::new(id, bulk_batch);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text="Bulk re-drive"/>
        <section class="page narrow">
            <p><a href="/claims/redrive">"← Bulk re-drive"</a></p>
            <ActionNotices/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || {
                    let me = me.get().and_then(Result::ok);
                    batch
                        .get()
                        .map(|result| match result {
                            Ok(Some(batch)) => view! { <BatchView batch me/> }.into_any(),
                            Ok(None) => {
                                view! { <ErrorNotice message="No such batch.".to_owned()/> }.into_any()
                            }
                            Err(error) => view! { <ErrorNotice message=error_message(&error)/> }.into_any(),
                        })
                }}
            </Transition>
        </section>
    }
}

#[component]
fn BatchView(batch: BatchDetail, me: Option<Me>) -> impl IntoView {
    let can_act = me.as_ref().is_some_and(Me::can_redrive);
    let href = format!("/claims/redrive/{}", batch.batch_id);
    let state = batch.state;
    let summary = match state {
        BatchState::Running if batch.cancel_requested_by.is_some() => format!(
            "Stopping: {} asked it to stop; it stops before its next claim.",
            batch.cancel_requested_by.clone().unwrap_or_default()
        ),
        BatchState::Running => "Running: one claim after the other.".to_owned(),
        BatchState::Finished => "Finished: every claim was worked.".to_owned(),
        BatchState::Cancelled => format!(
            "Cancelled by {} after {} of {} claims; the other {} stay as they were.",
            batch.cancel_requested_by.clone().unwrap_or_default(),
            batch.done,
            batch.total,
            batch.remaining
        ),
        BatchState::Interrupted => format!(
            "Interrupted: the process running it stopped after {} of {} claims. The other {} \
             stay as they were; resume it to run them.",
            batch.done, batch.total, batch.remaining
        ),
    };
    let progress = BatchProgress {
        state,
        total: batch.total,
        done: batch.done,
        processed: batch.processed,
        failed: batch.failed,
        skipped: batch.skipped,
    };
    let cancel_form = (can_act && state == BatchState::Running && batch.cancel_requested_by.is_none())
        .then(|| {
            view! {
                <form method="post" action="/dashboard/actions/bulk-redrive/cancel" class="stack">
                    <input type="hidden" name="batch_id" value=batch.batch_id.clone()/>
                    <label>
                        <input type="checkbox" name="confirm" value="yes" required/>
                        " Stop this batch before its next claim (the claims it has not reached stay as they are)"
                    </label>
                    <button type="submit" class="button button-danger">"Cancel batch"</button>
                </form>
            }
        });
    let resume_form = (can_act && state == BatchState::Interrupted).then(|| {
        view! {
            <form method="post" action="/dashboard/actions/bulk-redrive/resume" class="stack">
                <input type="hidden" name="batch_id" value=batch.batch_id.clone()/>
                <label for="reason">"Why you resume it (kept in the audit log)"</label>
                <textarea id="reason" name="reason" required rows="2"></textarea>
                <button type="submit" class="button">"Resume"</button>
            </form>
        }
    });
    let items = |title: &'static str, rows: Vec<crate::api::BatchItemRow>| {
        (!rows.is_empty()).then(|| {
            view! {
                <h2>{title}</h2>
                <ul class="plain">
                    {rows
                        .into_iter()
                        .map(|r| {
                            let href = format!("/events/{}", r.event_id);
                            view! {
                                <li>
                                    <a class="mono" href=href>{r.event_id}</a> " "
                                    <span class="muted">{r.detail}</span>
                                </li>
                            }
                        })
                        .collect_view()}
                </ul>
            }
        })
    };
    view! {
        <div class="page-head">
            <h1>"Batch " <span class="mono">{batch.batch_id.clone()}</span></h1>
            <span data-testid="batch-state"><BatchBadge state/></span>
        </div>
        <p role="status">{summary}</p>
        <LiveProgress batch_id=batch.batch_id.clone() progress/>
        {(state == BatchState::Running)
            .then(|| view! { <p><a href=href data-testid="batch-refresh">"Refresh"</a></p> })}
        <dl class="facts">
            <dt>"Claims"</dt>
            <dd>{batch.described}</dd>
            <dt>"By"</dt>
            <dd>{batch.actor}</dd>
            <dt>"Why"</dt>
            <dd>{batch.reason}</dd>
            <dt>"Started"</dt>
            <dd>{batch.started_at}</dd>
            <dt>"Ended"</dt>
            <dd>{batch.finished_at.unwrap_or_else(|| "-".into())}</dd>
        </dl>
        {cancel_form}
        {resume_form}
        {items("Failed again", batch.failures)}
        {items("Skipped (someone else held or had done them)", batch.skips)}
    }
}

/// A batch's bar and counts. While the batch runs, the island reads its progress every
/// second; when it has ended, the page is loaded again for the final account (and the forms
/// that go with it).
#[island]
fn LiveProgress(batch_id: String, progress: BatchProgress) -> impl IntoView {
    let (current, set_current) = signal(progress);
    if progress.state == BatchState::Running {
        poll_progress(batch_id, set_current);
    }
    view! {
        <progress
            max=move || current.get().total
            value=move || current.get().done
            aria-label="Claims done"
            data-testid="batch-bar"
        ></progress>
        <p data-testid="batch-progress">
            {move || {
                let p = current.get();
                format!(
                    "{} / {} done: {} processed, {} failed, {} skipped",
                    p.done, p.total, p.processed, p.failed, p.skipped
                )
            }}
        </p>
    }
}

/// Reads `batch_id`'s progress once a second (in the browser; effects do not run on the
/// server) until the batch is no longer running, then reloads the page.
fn poll_progress(batch_id: String, set_current: WriteSignal<BatchProgress>) {
    let (tick, set_tick) = signal(0u32);
    Effect::new(move |_| {
        tick.track();
        let batch_id = batch_id.clone();
        set_timeout(
            move || {
                leptos::task::spawn_local(async move {
                    match bulk_batch_progress(batch_id).await {
                        Ok(Some(progress)) if progress.state == BatchState::Running => {
                            set_current.set(progress);
                            set_tick.update(|t| *t = t.wrapping_add(1));
                        }
                        Ok(Some(progress)) => {
                            set_current.set(progress);
                            let _ = window().location().reload();
                        }
                        // The server unreachable for a moment: try again.
                        Err(_) => set_tick.update(|t| *t = t.wrapping_add(1)),
                        // Gone: the Refresh link stays.
                        Ok(None) => {}
                    }
                });
            },
            std::time::Duration::from_secs(1),
        );
    });
}
