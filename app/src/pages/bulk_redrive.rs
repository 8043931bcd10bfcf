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
use crate::components::{
    ActionNotices, ErrorNotice, Loaded, LoadedWithMe, StateBadge, error_message, state_name,
};
use crate::i18n::*;

/// The filter fields, as the page's query names them.
const FIELDS: [&str; 7] = ["status", "type", "from", "to", "older_than", "error", "q"];

/// A batch's state in the reader's words.
pub(crate) fn batch_state_name(i18n: I18nContext<Locale>, state: BatchState) -> String {
    match state {
        BatchState::Running => t_string!(i18n, bulk.batch_running).to_string(),
        BatchState::Cancelled => t_string!(i18n, bulk.batch_cancelled).to_string(),
        BatchState::Finished => t_string!(i18n, bulk.batch_finished).to_string(),
        BatchState::Interrupted => t_string!(i18n, bulk.batch_interrupted).to_string(),
    }
}

#[component]
pub fn BulkRedrivePage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let field = move |name: &'static str| move || query.read().get(name).unwrap_or_default();
    let me = Resource::new(|| (), |_| get_me());
    let preview = Resource::new(
        move || {
            let q = query.read();
            // Rows ticked on the claims page come as `id=…` each.
            let ids = q.get_all("id").unwrap_or_default().join(" ");
            (
                q.get("preview").is_some(),
                FIELDS.map(|f| q.get(f).unwrap_or_default()),
                ids,
            )
        },
        |(asked, [status, event_type, from, to, older_than, error, search], ids)| async move {
            // Only support and admins preview (the server function refuses the others, and
            // a refusal here would answer the whole page 403).
            if !asked || !get_me().await?.can_redrive() {
                return Ok(None);
            }
            bulk_preview(
                status,
                event_type,
                from,
                to,
                older_than,
                error,
                search,
                Some(ids),
            )
            .await
            .map(Some)
        },
    );
    let batches = Resource::new(|| (), |_| bulk_batches());
    view! {
        <Title text=t_string!(i18n, bulk.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, bulk.heading)}</h1>
            <ActionNotices/>
            <Transition fallback=move || view! { <p class="muted">{t!(i18n, common.loading)}</p> }>
                {move || {
                    me.get()
                        .map(|me| match me {
                            Ok(me) if me.can_redrive() => {
                                view! {
                                    <p>{t!(i18n, bulk.intro)}</p>
                                    <form method="get" action="/claims/redrive" class="filters" role="search">
                                        <input type="hidden" name="preview" value="1"/>
                                        <label>
                                            {t!(i18n, bulk.state)}
                                            <select name="status">
                                                // Empty: every re-drivable state.
                                                <option value="" selected=move || field("status")().is_empty()>
                                                    {t!(i18n, bulk.any_state)}
                                                </option>
                                                {ClaimState::ALL
                                                    .into_iter()
                                                    .filter(|state| state.is_redrivable())
                                                    .map(|state| {
                                                        let s = state.as_str();
                                                        let selected = move || field("status")() == s;
                                                        view! {
                                                            <option value=s selected=selected>
                                                                {state_name(i18n, state)}
                                                            </option>
                                                        }
                                                    })
                                                    .collect_view()}
                                            </select>
                                        </label>
                                        <label>
                                            {t!(i18n, bulk.event_type)}
                                            <input name="type" value=field("type") placeholder="checkout.session.completed"/>
                                        </label>
                                        <label>{t!(i18n, bulk.received_from)} <input name="from" type="date" value=field("from")/></label>
                                        <label>{t!(i18n, bulk.received_to)} <input name="to" type="date" value=field("to")/></label>
                                        <label>
                                            {t!(i18n, bulk.older_than)}
                                            <input name="older_than" value=field("older_than") placeholder="10m, 2h, 3d" size="8"/>
                                        </label>
                                        <label>
                                            {t!(i18n, bulk.error_contains)}
                                            // The engine's errors are English: the example is one of them.
                                            <input name="error" value=field("error") placeholder="no credit amount"/>
                                        </label>
                                        <label>
                                            {t!(i18n, bulk.search)}
                                            <input
                                                name="q"
                                                value=field("q")
                                                placeholder=move || t_string!(i18n, bulk.search_placeholder)
                                            />
                                        </label>
                                        <button type="submit" class="button">{t!(i18n, bulk.preview)}</button>
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
                                let role = crate::role_name(i18n, me.role);
                                view! {
                                    <p class="notice notice-error" role="alert">
                                        {t!(i18n, bulk.needs_role, role)}
                                    </p>
                                }
                                    .into_any()
                            }
                            Err(error) => view! { <ErrorNotice message=error_message(&error)/> }.into_any(),
                        })
                }}
            </Transition>
            <h2>{t!(i18n, bulk.recent_batches)}</h2>
            <Loaded resource=batches view=batch_list/>
        </section>
    }
}

#[component]
fn PreviewView(preview: BulkPreviewView) -> impl IntoView {
    let i18n = use_i18n();
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
    let described = preview.described.clone();
    if preview.claims == 0 {
        return view! {
            <p class="empty" data-testid="bulk-preview">
                {t!(i18n, bulk.nothing_matches, described)}
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
    let (claims, orders, orders_credited) =
        (preview.claims, preview.orders, preview.orders_credited);
    let (without_order, unplannable) = (preview.without_order, preview.unplannable);
    let number = move |n: i64| crate::i18n::number(i18n.get_locale(), n);
    view! {
        <div class="preview" data-testid="bulk-preview">
            <h2>{t!(i18n, bulk.preview_heading)}</h2>
            <dl class="facts">
                <dt>{t!(i18n, bulk.selected)}</dt>
                <dd data-testid="bulk-claims">{match claims {
                    1 => t_string!(i18n, bulk.selected_claims_one, n = 1, described).to_string(),
                    n => t_string!(i18n, bulk.selected_claims, n = number(n), described).to_string(),
                }}</dd>
                <dt>{t!(i18n, bulk.orders)}</dt>
                <dd data-testid="bulk-orders">{match orders {
                    1 => t_string!(i18n, bulk.distinct_orders_one, n = 1).to_string(),
                    n => t_string!(i18n, bulk.distinct_orders, n = number(n)).to_string(),
                }}</dd>
                <dt>{t!(i18n, bulk.already_credited)}</dt>
                <dd data-testid="bulk-credited">{match orders_credited {
                    1 => t_string!(i18n, bulk.credited_count_one, n = 1).to_string(),
                    n => t_string!(i18n, bulk.credited_count, n = number(n)).to_string(),
                }}</dd>
                {(without_order > 0)
                    .then(|| {
                        view! {
                            <dt>{t!(i18n, bulk.no_order_yet)}</dt>
                            <dd>{match without_order {
                                1 => t_string!(i18n, bulk.without_order_one, n = 1).to_string(),
                                n => t_string!(i18n, bulk.without_order, n = number(n)).to_string(),
                            }}</dd>
                        }
                    })}
                {(unplannable > 0)
                    .then(|| {
                        view! {
                            <dt>{t!(i18n, bulk.will_fail)}</dt>
                            <dd>{match unplannable {
                                1 => t_string!(i18n, bulk.unplannable_one, n = 1).to_string(),
                                n => t_string!(i18n, bulk.unplannable, n = number(n)).to_string(),
                            }}</dd>
                        }
                    })}
                <dt>{t!(i18n, bulk.outgoing)}</dt>
                <dd>{t!(i18n, bulk.outgoing_none)}</dd>
            </dl>
            <div class="table-wrap">
                <table aria-label=move || t_string!(i18n, bulk.first_claims)>
                    <thead>
                        <tr>
                            <th scope="col">{t!(i18n, bulk.col_event)}</th>
                            <th scope="col">{t!(i18n, bulk.col_type)}</th>
                            <th scope="col">{t!(i18n, bulk.col_state)}</th>
                            <th scope="col">{t!(i18n, bulk.col_age)}</th>
                            <th scope="col">{t!(i18n, bulk.col_order)}</th>
                            <th scope="col">{t!(i18n, bulk.col_credited)}</th>
                            <th scope="col">{t!(i18n, bulk.col_last_error)}</th>
                        </tr>
                    </thead>
                    <tbody>
                        {preview
                            .rows
                            .into_iter()
                            .map(|r| {
                                let href = crate::links::event(&r.claim.event_id);
                                let order = r
                                    .order_id
                                    .unwrap_or_else(|| t_string!(i18n, common.none).to_string());
                                let credited = if r.credited {
                                    t_string!(i18n, common.yes).to_string()
                                } else {
                                    t_string!(i18n, common.no).to_string()
                                };
                                view! {
                                    <tr>
                                        <td class="mono"><a href=href>{r.claim.event_id}</a></td>
                                        <td>{r.claim.event_type}</td>
                                        <td><StateBadge state=r.claim.status/></td>
                                        <td title=r.claim.received_at>{r.claim.age}</td>
                                        <td class="mono">{order}</td>
                                        <td>{credited}</td>
                                        <td class="error-text">{r.claim.last_error.unwrap_or_default()}</td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            {(more > 0).then(|| view! { <p class="muted">{t!(i18n, bulk.more, n = more)}</p> })}
            <form method="post" action="/dashboard/actions/bulk-redrive" class="stack">
                {hidden("status", filter.state.map(|s: ClaimState| s.as_str().to_owned()))}
                {hidden("event_type", filter.event_type)}
                {hidden("received_after", filter.received_after.map(|v| v.to_string()))}
                {hidden("received_before", filter.received_before.map(|v| v.to_string()))}
                {hidden("error_contains", filter.error_contains)}
                {hidden("search", filter.search)}
                {hidden("event_ids", Some(filter.event_ids.join(" ")))}
                <input type="hidden" name="back" value=back/>
                <label for="reason">{t!(i18n, bulk.reason)}</label>
                <textarea id="reason" name="reason" required rows="2"></textarea>
                <label for="confirm">
                    {t!(i18n, bulk.type_to_confirm, count = count.clone(), <strong> = <strong/>)}
                </label>
                <input
                    id="confirm"
                    name="confirm"
                    required
                    inputmode="numeric"
                    autocomplete="off"
                    pattern=count.clone()
                    title=t_string!(i18n, bulk.confirm_title, count = count.clone()).to_string()
                />
                <button type="submit" class="button">{if count == "1" {
                    t_string!(i18n, bulk.redrive_count_one, count = count.clone()).to_string()
                } else {
                    t_string!(i18n, bulk.redrive_count, count = count.clone()).to_string()
                }}</button>
            </form>
        </div>
    }
    .into_any()
}

fn batch_list(batches: Vec<BatchSummary>) -> impl IntoView {
    let i18n = use_i18n();
    if batches.is_empty() {
        return view! { <p class="empty">{t!(i18n, bulk.no_batches)}</p> }.into_any();
    }
    view! {
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, bulk.recent_batches)>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, bulk.col_batch)}</th>
                        <th scope="col">{t!(i18n, bulk.col_state)}</th>
                        <th scope="col">{t!(i18n, bulk.col_done)}</th>
                        <th scope="col">{t!(i18n, bulk.col_failed)}</th>
                        <th scope="col">{t!(i18n, bulk.col_skipped)}</th>
                        <th scope="col">{t!(i18n, bulk.by)}</th>
                        <th scope="col">{t!(i18n, bulk.started)}</th>
                        <th scope="col">{t!(i18n, bulk.why)}</th>
                    </tr>
                </thead>
                <tbody>
                    {batches
                        .into_iter()
                        .map(|b| {
                            let href = crate::links::batch(&b.batch_id);
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
    let i18n = use_i18n();
    let class = format!("badge batch-{state}");
    view! { <span class=class>{batch_state_name(i18n, state)}</span> }
}

/// One batch's progress. Server-rendered with a refresh link; while it runs, its progress
/// follows the batch by itself once hydrated ([`LiveProgress`]).
#[component]
pub fn BulkBatchPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let batch = Resource::new(id, bulk_batch);
    let me = Resource::new(|| (), |_| get_me());
    view! {
        <Title text=t_string!(i18n, bulk.title).to_string()/>
        <section class="page narrow">
            <p><a href="/claims/redrive">{t!(i18n, bulk.back)}</a></p>
            <ActionNotices/>
            <LoadedWithMe resource=batch me view=move |batch, me| match batch {
                Some(batch) => view! { <BatchView batch me/> }.into_any(),
                None => {
                    view! { <ErrorNotice message=t_string!(i18n, bulk.no_batch).to_string()/> }
                        .into_any()
                }
            }/>
        </section>
    }
}

#[component]
fn BatchView(batch: BatchDetail, me: Option<Me>) -> impl IntoView {
    let i18n = use_i18n();
    let can_act = me.as_ref().is_some_and(Me::can_redrive);
    let href = crate::links::batch(&batch.batch_id);
    let progress = batch.progress;
    let state = progress.state;
    let by = batch.cancel_requested_by.clone().unwrap_or_default();
    let (done, total, remaining) = (progress.done, progress.total, batch.remaining);
    let summary = match state {
        BatchState::Running if batch.cancel_requested_by.is_some() => {
            t_string!(i18n, bulk.summary_stopping, by).to_string()
        }
        BatchState::Running => t_string!(i18n, bulk.summary_running).to_string(),
        BatchState::Finished => t_string!(i18n, bulk.summary_finished).to_string(),
        BatchState::Cancelled => {
            t_string!(i18n, bulk.summary_cancelled, by, done, total, remaining).to_string()
        }
        BatchState::Interrupted => {
            t_string!(i18n, bulk.summary_interrupted, done, total, remaining).to_string()
        }
    };
    let words = ProgressWords::new(i18n);
    let cancel_form = (can_act && state == BatchState::Running && batch.cancel_requested_by.is_none())
        .then(|| {
            view! {
                <form method="post" action="/dashboard/actions/bulk-redrive/cancel" class="stack">
                    <input type="hidden" name="batch_id" value=batch.batch_id.clone()/>
                    <label>
                        <input type="checkbox" name="confirm" value="yes" required/>
                        " "
                        {t!(i18n, bulk.cancel_confirm)}
                    </label>
                    <button type="submit" class="button button-danger">{t!(i18n, bulk.cancel_batch)}</button>
                </form>
            }
        });
    let resume_form = (can_act && state == BatchState::Interrupted).then(|| {
        view! {
            <form method="post" action="/dashboard/actions/bulk-redrive/resume" class="stack">
                <input type="hidden" name="batch_id" value=batch.batch_id.clone()/>
                <label for="reason">{t!(i18n, bulk.resume_reason)}</label>
                <textarea id="reason" name="reason" required rows="2"></textarea>
                <button type="submit" class="button">{t!(i18n, bulk.resume)}</button>
            </form>
        }
    });
    let items = |title: String, rows: Vec<crate::api::BatchItemRow>| {
        (!rows.is_empty()).then(|| {
            view! {
                <h2>{title}</h2>
                <ul class="plain">
                    {rows
                        .into_iter()
                        .map(|r| {
                            let href = crate::links::event(&r.event_id);
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
            <h1>{t!(i18n, bulk.batch_heading)} " " <span class="mono">{batch.batch_id.clone()}</span></h1>
            <span data-testid="batch-state"><BatchBadge state/></span>
        </div>
        <p role="status">{summary}</p>
        <LiveProgress batch_id=batch.batch_id.clone() progress words/>
        {(state == BatchState::Running)
            .then(|| view! { <p><a href=href data-testid="batch-refresh">{t!(i18n, bulk.refresh)}</a></p> })}
        <dl class="facts">
            <dt>{t!(i18n, bulk.claims)}</dt>
            <dd>{batch.described}</dd>
            <dt>{t!(i18n, bulk.by)}</dt>
            <dd>{batch.actor}</dd>
            <dt>{t!(i18n, bulk.why)}</dt>
            <dd>{batch.reason}</dd>
            <dt>{t!(i18n, bulk.started)}</dt>
            <dd>{batch.started_at}</dd>
            <dt>{t!(i18n, bulk.ended)}</dt>
            <dd>{batch.finished_at.unwrap_or_else(|| t_string!(i18n, common.none).to_string())}</dd>
        </dl>
        {cancel_form}
        {resume_form}
        {items(t_string!(i18n, bulk.failed_again).to_string(), batch.failures)}
        {items(t_string!(i18n, bulk.skipped_heading).to_string(), batch.skips)}
    }
}

/// The words of a batch's progress, from the server: the island runs in the browser, where
/// there are no translations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProgressWords {
    /// The bar's accessible name.
    pub bar: String,
    /// The counts line, with `{done}`, `{total}`, `{processed}`, `{failed}` and `{skipped}`
    /// where the numbers go.
    pub counts: String,
}

impl ProgressWords {
    /// The words in the reader's language.
    fn new(i18n: I18nContext<Locale>) -> ProgressWords {
        ProgressWords {
            bar: t_string!(i18n, bulk.bar_label).to_string(),
            counts: t_string!(
                i18n,
                bulk.progress,
                done = "{done}",
                total = "{total}",
                processed = "{processed}",
                failed = "{failed}",
                skipped = "{skipped}"
            )
            .to_string(),
        }
    }

    /// The counts line for `p`.
    fn counts(&self, p: BatchProgress) -> String {
        self.counts
            .replace("{done}", &p.done.to_string())
            .replace("{total}", &p.total.to_string())
            .replace("{processed}", &p.processed.to_string())
            .replace("{failed}", &p.failed.to_string())
            .replace("{skipped}", &p.skipped.to_string())
    }
}

/// A batch's bar and counts. While the batch runs, the island reads its progress every
/// second; when it has ended, the page is loaded again for the final account (and the forms
/// that go with it). Its words come from the server ([`ProgressWords`]).
#[island]
fn LiveProgress(batch_id: String, progress: BatchProgress, words: ProgressWords) -> impl IntoView {
    let (current, set_current) = signal(progress);
    if progress.state == BatchState::Running {
        poll_progress(batch_id, set_current);
    }
    let bar = words.bar.clone();
    // The share of the batch each outcome takes, as a width.
    let share = move |n: fn(BatchProgress) -> i64| {
        move || {
            let p = current.get();
            format!("width: {}%", n(p) * 100 / p.total.max(1))
        }
    };
    view! {
        // The bar screen readers read; the split bar shows the same and how it ended.
        <progress
            class="visually-hidden"
            max=move || current.get().total
            value=move || current.get().done
            aria-label=bar
            data-testid="batch-bar"
        ></progress>
        <div class="split-bar" aria-hidden="true" data-testid="batch-split">
            <span class="seg ok" data-outcome="processed" style=share(|p| p.processed)></span>
            <span class="seg bad" data-outcome="failed" style=share(|p| p.failed)></span>
            <span class="seg warn" data-outcome="skipped" style=share(|p| p.skipped)></span>
        </div>
        <p data-testid="batch-progress">{move || words.counts(current.get())}</p>
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
