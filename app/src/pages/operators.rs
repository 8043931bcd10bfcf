//! Operators (admins): who may sign in, with which role.

use claimcheck_core::auth::Role;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{OperatorRow, list_operators};
use crate::components::{ActionNotices, Loaded};

#[component]
pub fn OperatorsPage() -> impl IntoView {
    let operators = Resource::new(|| (), |_| list_operators());
    view! {
        <Title text="Operators"/>
        <section class="page">
            <h1>"Operators"</h1>
            <ActionNotices/>
            <Loaded resource=operators view=operator_table/>
            <h2>"Add an operator"</h2>
            <form method="post" action="/dashboard/actions/operators" class="stack narrow">
                <label for="new-username">"Username"</label>
                <input id="new-username" name="username" required autocomplete="off"/>
                <label for="new-role">"Role"</label>
                <select id="new-role" name="role">
                    {Role::ALL
                        .map(|role| {
                            let what = match role {
                                Role::Viewer => "reads everything",
                                Role::Support => "also re-drives claims",
                                Role::Admin => "also refunds and manages operators",
                            };
                            view! {
                                <option value=role.as_str()>{format!("{role}: {what}")}</option>
                            }
                        })
                        .collect_view()}
                </select>
                <label for="new-password">"Password (at least 12 characters)"</label>
                <input id="new-password" name="password" type="password" required autocomplete="new-password"/>
                <button type="submit" class="button">"Add"</button>
            </form>
        </section>
    }
}

fn operator_table(rows: Vec<OperatorRow>) -> impl IntoView {
    view! {
        <div class="table-wrap">
            <table aria-label="Operators">
                <thead>
                    <tr>
                        <th scope="col">"Username"</th>
                        <th scope="col">"Role"</th>
                        <th scope="col">"Since"</th>
                        <th scope="col">"State"</th>
                        <th scope="col">"Change"</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|o| {
                            let toggle = if o.disabled { "enable" } else { "disable" };
                            view! {
                                <tr>
                                    <td>{o.username.clone()}</td>
                                    <td>{o.role.as_str()}</td>
                                    <td>{o.created_at}</td>
                                    <td>{if o.disabled { "disabled" } else { "active" }}</td>
                                    <td class="actions">
                                        <form method="post" action="/dashboard/actions/operators/access" class="inline">
                                            <input type="hidden" name="username" value=o.username.clone()/>
                                            <input type="hidden" name="action" value=toggle/>
                                            <button type="submit" class="link-button">{toggle}</button>
                                        </form>
                                        <form method="post" action="/dashboard/actions/operators/access" class="inline">
                                            <input type="hidden" name="username" value=o.username/>
                                            <input type="hidden" name="action" value="remove"/>
                                            <button type="submit" class="link-button danger">"remove"</button>
                                        </form>
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
