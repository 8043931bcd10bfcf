//! Operators (admins): who may sign in, with which role.

use claimcheck_core::auth::Role;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{OperatorRow, list_operators};
use crate::components::{ActionNotices, Loaded};
use crate::i18n::*;

/// What a role may do, in the reader's words.
fn role_scope(i18n: I18nContext<Locale>, role: Role) -> String {
    match role {
        Role::Viewer => t_string!(i18n, operators.scope_viewer).to_string(),
        Role::Support => t_string!(i18n, operators.scope_support).to_string(),
        Role::Admin => t_string!(i18n, operators.scope_admin).to_string(),
    }
}

#[component]
pub fn OperatorsPage() -> impl IntoView {
    let i18n = use_i18n();
    let operators = Resource::new(|| (), |_| list_operators());
    view! {
        <Title text=t_string!(i18n, operators.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, operators.title)}</h1>
            <ActionNotices/>
            // The list and the form load for admins only: another role reads why not,
            // and no form it could not send.
            <Loaded resource=operators view=|rows| view! { {operator_table(rows)} <AddOperator/> }/>
        </section>
    }
}

#[component]
fn AddOperator() -> impl IntoView {
    let i18n = use_i18n();
    view! {
            <h2>{t!(i18n, operators.add_heading)}</h2>
            <form method="post" action="/dashboard/actions/operators" class="stack narrow" data-testid="add-operator">
                <label for="new-username">{t!(i18n, operators.username)}</label>
                <input id="new-username" name="username" required autocomplete="off"/>
                <label for="new-role">{t!(i18n, operators.role)}</label>
                <select id="new-role" name="role">
                    {Role::ALL
                        .map(|role| {
                            let option = t_string!(
                                i18n,
                                operators.role_option,
                                role = crate::role_name(i18n, role),
                                scope = role_scope(i18n, role)
                            )
                            .to_string();
                            view! { <option value=role.as_str()>{option}</option> }
                        })
                        .collect_view()}
                </select>
                <label for="new-password">{t!(i18n, operators.password)}</label>
                <input id="new-password" name="password" type="password" required autocomplete="new-password"/>
                <button type="submit" class="button">{t!(i18n, operators.add)}</button>
            </form>
    }
}

fn operator_table(rows: Vec<OperatorRow>) -> impl IntoView {
    let i18n = use_i18n();
    view! {
        <div class="table-wrap">
            <table aria-label=move || t_string!(i18n, operators.title)>
                <thead>
                    <tr>
                        <th scope="col">{t!(i18n, operators.username)}</th>
                        <th scope="col">{t!(i18n, operators.role)}</th>
                        <th scope="col">{t!(i18n, operators.since)}</th>
                        <th scope="col">{t!(i18n, operators.state)}</th>
                        <th scope="col">{t!(i18n, operators.change)}</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|o| {
                            // The action's name is the form's field; its button says it in words.
                            let (toggle, toggle_text) = if o.disabled {
                                ("enable", t_string!(i18n, operators.enable).to_string())
                            } else {
                                ("disable", t_string!(i18n, operators.disable).to_string())
                            };
                            let state = if o.disabled {
                                t_string!(i18n, operators.disabled).to_string()
                            } else {
                                t_string!(i18n, operators.active).to_string()
                            };
                            view! {
                                <tr>
                                    <td>{o.username.clone()}</td>
                                    <td>{crate::role_name(i18n, o.role)}</td>
                                    <td>{o.created_at}</td>
                                    <td>{state}</td>
                                    <td class="actions">
                                        <form method="post" action="/dashboard/actions/operators/access" class="inline">
                                            <input type="hidden" name="username" value=o.username.clone()/>
                                            <input type="hidden" name="action" value=toggle/>
                                            <button type="submit" class="link-button">{toggle_text}</button>
                                        </form>
                                        // Removing cannot be undone: the button only opens the
                                        // question, which names who is removed.
                                        <details class="confirm">
                                            <summary class="link-button danger">{t!(i18n, operators.remove)}</summary>
                                            <form method="post" action="/dashboard/actions/operators/access" class="stack">
                                                <input type="hidden" name="username" value=o.username.clone()/>
                                                <input type="hidden" name="action" value="remove"/>
                                                <p>{t!(i18n, operators.remove_question, name = o.username.clone())}</p>
                                                <button type="submit" class="button danger">
                                                    {t!(i18n, operators.remove_confirm, name = o.username)}
                                                </button>
                                            </form>
                                        </details>
                                    </td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}
