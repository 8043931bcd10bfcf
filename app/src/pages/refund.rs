//! Refunding an order (admins): the amount in the order's currency, filled in by "Full" or
//! "Half", a preview of what it does to the credits by the engine's own rule, the reason,
//! and a confirmation that names the amount. A form sent back shows what to correct next to
//! each field, with what was typed still in it.

use std::sync::Arc;

use claimcheck_core::money::{RefundPreview, format_money_in, money_input, parse_money};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};
use serde::{Deserialize, Serialize};

use crate::api::{Me, RefundDraft, get_me, get_refund_draft};
use crate::components::{ActionNotices, ConfirmButton, Loaded, LoadedWithMe};
use crate::flash::KeptForm;
use crate::i18n::*;
use crate::pages::orders::order_status_name;

/// What a refund will do, then the amount, the reason and the confirmation (admins).
#[component]
pub fn RefundPage() -> impl IntoView {
    let i18n = use_i18n();
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let draft = Resource::new(id, get_refund_draft);
    let me = Resource::new(|| (), |_| get_me());
    // Read once, on the server: what the last post sent back to this page, else an amount
    // a "Full" or "Half" link asks for.
    let page = crate::links::refund(&params.read_untracked().get("id").unwrap_or_default());
    let kept = kept_form(&page);
    let asked = use_query_map().read_untracked().get("amount");
    view! {
        <Title text=t_string!(i18n, refund.title).to_string()/>
        <section class="page narrow">
            <h1>{t!(i18n, refund.heading)}</h1>
            <ActionNotices/>
            <Loaded resource=me view=|me: Me| {
                let i18n = use_i18n();
                (!me.is_admin())
                    .then(|| {
                        view! {
                            <p class="notice notice-error" role="alert">
                                {t!(i18n, refund.needs_admin, role = names::role(i18n.get_locale(), me.role))}
                            </p>
                        }
                    })
            }/>
            // The form is for admins only: another role reads why, and no form.
            <LoadedWithMe resource=draft me view=move |draft, me| {
                let (kept, asked) = (kept.clone(), asked.clone());
                me.is_some_and(|me| me.is_admin()).then(|| view! { <RefundForm draft kept asked/> })
            }/>
        </section>
    }
}

/// The form this request's flash sent back to `page`.
#[cfg(feature = "ssr")]
fn kept_form(page: &str) -> Option<KeptForm> {
    crate::flash::Flash::kept_form(page)
}

/// Pages render on the server only: the browser has no flash to read.
#[cfg(not(feature = "ssr"))]
fn kept_form(_page: &str) -> Option<KeptForm> {
    None
}

#[component]
fn RefundForm(draft: RefundDraft, kept: Option<KeptForm>, asked: Option<String>) -> impl IntoView {
    let i18n = use_i18n();
    let money = |minor: i64| format_money_in(minor, &draft.currency, draft.language);
    let facts = view! {
        <dl class="facts">
            <dt>{t!(i18n, refund.order)}</dt>
            <dd class="mono">{draft.order_id.clone()}</dd>
            <dt>{t!(i18n, refund.customer)}</dt>
            <dd>{draft.customer_email.clone().unwrap_or_default()}</dd>
            <dt>{t!(i18n, refund.payment_intent)}</dt>
            <dd class="mono">{draft.payment_intent_id.clone().unwrap_or_default()}</dd>
            <dt>{t!(i18n, refund.paid)}</dt>
            <dd>{draft.paid.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, refund.refunded_so_far)}</dt>
            <dd>{draft.refunded.clone().unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, refund.refundable)}</dt>
            <dd data-testid="refundable">{draft.refundable.map(money).unwrap_or_else(|| "-".into())}</dd>
            <dt>{t!(i18n, refund.credits)}</dt>
            <dd>{t!(i18n, refund.credits_of, granted = draft.credits_granted, total = draft.credits)}</dd>
            <dt>{t!(i18n, refund.balance)}</dt>
            <dd data-testid="refund-balance">{crate::i18n::number(i18n.get_locale(), draft.balance)}</dd>
            <dt>{t!(i18n, refund.what_happens)}</dt>
            <dd>{t!(i18n, refund.effect)}</dd>
        </dl>
    };
    let form = match draft.refundable {
        Some(left) => {
            let input = RefundInput::new(&draft, kept, asked);
            let words = RefundWords::new(i18n, &draft, left);
            let (reason, reason_error) = (input.reason.clone(), input.reason_error.clone());
            let max = draft.reason_max;
            let amount = AmountInput {
                amount: input.amount,
                error: input.amount_error,
            };
            view! {
                <form method="post" action="/dashboard/actions/refund" class="stack" data-testid="refund-form">
                    <input type="hidden" name="order_id" value=draft.order_id.clone()/>
                    <RefundFields draft words input=amount>
                        // The reason needs no browser: it is rendered here, on the server.
                        <label for="reason">{t!(i18n, refund.reason)}</label>
                        <textarea
                            id="reason"
                            name="reason"
                            required
                            rows="3"
                            maxlength=max
                            aria-invalid=reason_error.is_some().then_some("true")
                            aria-describedby=described("reason", &reason_error)
                        >{textarea_text(&reason)}</textarea>
                        <p id="reason-hint" class="field-hint">{t!(i18n, refund.reason_hint, max)}</p>
                        {reason_error.map(|error| view! { <p id="reason-error" class="field-error">{error}</p> })}
                    </RefundFields>
                </form>
            }
            .into_any()
        }
        None => view! {
            <p class="notice">
                {t!(i18n, refund.nothing_to_refund, status = order_status_name(i18n, draft.status))}
            </p>
        }
        .into_any(),
    };
    view! { {facts} {form} }
}

/// The ids that describe a field: its hint, and its error when there is one.
fn described(field: &str, error: &Option<String>) -> String {
    match error {
        Some(_) => format!("{field}-hint {field}-error"),
        None => format!("{field}-hint"),
    }
}

/// Text as a `<textarea>` holds it: Leptos writes a textarea's children as they are (it
/// escapes the children of other elements), so `&`, `<` and `>` are written as entities here
/// and the browser reads them back as the characters; a reason cannot close the textarea.
fn textarea_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The amount field's start: what was typed, and what is wrong with it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmountInput {
    amount: String,
    error: Option<String>,
}

/// What the fields start with, and what is wrong with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RefundInput {
    amount: String,
    reason: String,
    amount_error: Option<String>,
    reason_error: Option<String>,
}

impl RefundInput {
    /// A form sent back keeps what was typed; otherwise an amount asked for by a link is
    /// filled in, if it reads as money (a link can ask for a number, not put words in).
    fn new(draft: &RefundDraft, kept: Option<KeptForm>, asked: Option<String>) -> RefundInput {
        if let Some(kept) = kept {
            let text = |field: &str| kept.value(field).unwrap_or_default().to_owned();
            let error = |field: &str| kept.error(field).map(str::to_owned);
            return RefundInput {
                amount: text("amount"),
                reason: text("reason"),
                amount_error: error("amount"),
                reason_error: error("reason"),
            };
        }
        let amount = asked
            .and_then(|text| parse_money(&text, &draft.currency).ok())
            .map(|minor| money_input(minor, &draft.currency))
            .unwrap_or_default();
        RefundInput {
            amount,
            ..RefundInput::default()
        }
    }
}

/// The form's words, from the server: the island runs in the browser too, where there are
/// no translations. `{n}`, `{before}`, `{after}` and `{amount}` mark where values go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundWords {
    amount_label: String,
    amount_hint: String,
    fill: String,
    full: String,
    half: String,
    preview_label: String,
    preview: String,
    preview_one: String,
    preview_none: String,
    preview_empty: String,
    preview_unreadable: String,
    zero: String,
    over: String,
    open_confirm: String,
    confirm_question: String,
    confirm_question_unknown: String,
    confirm: String,
    confirm_unknown: String,
}

impl RefundWords {
    fn new(i18n: I18nContext<Locale>, draft: &RefundDraft, left: i64) -> RefundWords {
        let money = |minor: i64| format_money_in(minor, &draft.currency, draft.language);
        let (n, before, after, amount) = ("{n}", "{before}", "{after}", "{amount}");
        RefundWords {
            amount_label: t_string!(
                i18n,
                refund.amount_label,
                currency = draft.currency.to_uppercase()
            )
            .to_string(),
            amount_hint: t_string!(i18n, refund.amount_hint, left = money(left)).to_string(),
            fill: t_string!(i18n, refund.fill).to_string(),
            full: t_string!(i18n, refund.full).to_string(),
            half: t_string!(i18n, refund.half).to_string(),
            preview_label: t_string!(i18n, refund.preview_label).to_string(),
            preview: t_string!(i18n, refund.preview, n, before, after).to_string(),
            preview_one: t_string!(i18n, refund.preview_one, before, after).to_string(),
            preview_none: t_string!(i18n, refund.preview_none, before).to_string(),
            preview_empty: t_string!(i18n, refund.preview_empty).to_string(),
            preview_unreadable: t_string!(i18n, refund.preview_unreadable).to_string(),
            zero: t_string!(i18n, messages.refund_amount_zero, zero = money(0)).to_string(),
            over: t_string!(
                i18n,
                messages.refund_amount_over,
                amount,
                left = money(left)
            )
            .to_string(),
            open_confirm: t_string!(i18n, refund.open_confirm).to_string(),
            confirm_question: t_string!(i18n, refund.confirm_question, amount).to_string(),
            confirm_question_unknown: t_string!(i18n, refund.confirm_question_unknown).to_string(),
            confirm: t_string!(i18n, refund.confirm, amount).to_string(),
            confirm_unknown: t_string!(i18n, refund.confirm_unknown).to_string(),
        }
    }

    /// The preview line: `−20 credits, balance 80 → 60`.
    fn preview(&self, preview: RefundPreview) -> String {
        let template = match preview.revoked {
            0 => &self.preview_none,
            1 => &self.preview_one,
            _ => &self.preview,
        };
        template
            .replace("{n}", &preview.revoked.to_string())
            .replace("{before}", &preview.balance_before.to_string())
            .replace("{after}", &preview.balance_after.to_string())
    }
}

/// The amount as typed, read against what is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Typed {
    Empty,
    Unreadable,
    Zero,
    Over(i64),
    Amount(i64),
}

fn read_amount(text: &str, currency: &str, left: i64) -> Typed {
    if text.trim().is_empty() {
        return Typed::Empty;
    }
    match parse_money(text, currency) {
        Err(_) => Typed::Unreadable,
        Ok(minor) if minor < 1 => Typed::Zero,
        Ok(minor) if minor > left => Typed::Over(minor),
        Ok(minor) => Typed::Amount(minor),
    }
}

/// The amount with "Full" and "Half", the preview, the reason (`children`, rendered on the
/// server) and the confirmation, which names the amount. Without WASM, "Full" and "Half" are
/// links that come back with the amount filled in and its preview rendered; hydrated, they
/// fill the field in place and the preview follows every keystroke. The server checks
/// everything again: this only shows what it will say.
#[island]
fn RefundFields(
    draft: RefundDraft,
    words: RefundWords,
    input: AmountInput,
    children: Children,
) -> impl IntoView {
    let words = Arc::new(words);
    let draft = Arc::new(draft);
    let left = draft.refundable.unwrap_or(0);
    let (amount, set_amount) = signal(input.amount.clone());
    let typed = {
        let draft = Arc::clone(&draft);
        Memo::new(move |_| read_amount(&amount.get(), &draft.currency, left))
    };
    let money = {
        let draft = Arc::clone(&draft);
        move |minor: i64| format_money_in(minor, &draft.currency, draft.language)
    };
    let preview = {
        let (words, draft, money) = (Arc::clone(&words), Arc::clone(&draft), money.clone());
        move || match typed.get() {
            Typed::Empty => words.preview_empty.clone(),
            Typed::Unreadable => words.preview_unreadable.clone(),
            Typed::Zero => words.zero.clone(),
            Typed::Over(minor) => words.over.replace("{amount}", &money(minor)),
            Typed::Amount(minor) => match draft.facts.preview_refund(minor, draft.balance) {
                Ok(preview) => words.preview(preview),
                Err(_) => words.preview_unreadable.clone(),
            },
        }
    };
    let named = |known: &str, unknown: &str| {
        let (known, unknown, money) = (known.to_owned(), unknown.to_owned(), money.clone());
        Signal::derive(move || match typed.get() {
            Typed::Amount(minor) => known.replace("{amount}", &money(minor)),
            _ => unknown.clone(),
        })
    };
    let question = named(&words.confirm_question, &words.confirm_question_unknown);
    let confirm = named(&words.confirm, &words.confirm_unknown);

    let field = NodeRef::<leptos::html::Input>::new();
    // What was typed before the page came alive counts too (effects run in the browser only).
    Effect::new(move |_| {
        if let Some(input) = field.get() {
            set_amount.set(input.value());
        }
    });
    let page = crate::links::refund(&draft.order_id);
    let currency = draft.currency.clone();
    let fill = move |minor: i64, label: String| {
        let text = money_input(minor, &currency);
        let href = format!("{page}?amount={}", crate::links::encode(&text));
        let on_click = move |ev: leptos::ev::MouseEvent| {
            ev.prevent_default();
            if let Some(input) = field.get() {
                input.set_value(&text);
            }
            set_amount.set(text.clone());
        };
        view! { <a href=href on:click=on_click>{label}</a> }
    };
    let amount_described = described("amount", &input.error);
    view! {
        <label for="amount">{words.amount_label.clone()}</label>
        <p id="amount-hint" class="field-hint">{words.amount_hint.clone()}</p>
        <div class="fill">
            <input
                id="amount"
                name="amount"
                node_ref=field
                required
                inputmode="decimal"
                autocomplete="off"
                value=input.amount.clone()
                aria-invalid=input.error.is_some().then_some("true")
                aria-describedby=amount_described
                on:input=move |ev| set_amount.set(event_target_value(&ev))
            />
            <span class="muted">{words.fill.clone()}</span>
            {fill(left, words.full.clone())}
            {fill(left / 2, words.half.clone())}
        </div>
        {input.error.clone().map(|error| view! { <p id="amount-error" class="field-error">{error}</p> })}
        <p class="preview">
            <span class="muted">{words.preview_label.clone()} ": "</span>
            <span data-testid="refund-preview" aria-live="polite">{preview}</span>
        </p>
        {children()}
        <ConfirmButton open=words.open_confirm.clone() question confirm/>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_cannot_close_its_textarea() {
        assert_eq!(
            textarea_text("a & b </textarea><b>"),
            "a &amp; b &lt;/textarea&gt;&lt;b&gt;"
        );
    }

    #[test]
    fn the_typed_amount_is_read_against_what_is_left() {
        assert_eq!(read_amount("  ", "chf", 4900), Typed::Empty);
        assert_eq!(read_amount("zwanzig", "chf", 4900), Typed::Unreadable);
        assert_eq!(read_amount("0.00", "chf", 4900), Typed::Zero);
        assert_eq!(read_amount("CHF 60", "chf", 4900), Typed::Over(6000));
        assert_eq!(read_amount("24.–", "chf", 4900), Typed::Amount(2400));
        assert_eq!(read_amount("49", "chf", 4900), Typed::Amount(4900));
    }
}
