// Support staff and admins walking the dashboard: signing in and out, finding a customer,
// re-driving a stale claim, refunding an order; and a viewer who may only look.
import { expect, test } from "@playwright/test";
import { PASSWORD, SEEDED, USERS, signIn } from "./support";

const shots = process.env.SCREENSHOTS_DIR;
async function shot(page: import("@playwright/test").Page, name: string) {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

test("sign in, see who is signed in, sign out", async ({ page }) => {
  await page.goto("/orders");
  await expect(page).toHaveURL(/\/login\?next=%2Forders/);
  await shot(page, "login");
  await page.getByLabel("Username").fill(USERS.support);
  await page.getByLabel("Password").fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(/\/orders$/);
  await expect(page.getByTestId("signed-in-as")).toHaveText(`${USERS.support} (support)`);

  await page.getByRole("button", { name: "Sign out", exact: true }).click();
  await expect(page).toHaveURL(/\/login/);
  await expect(page.getByRole("status")).toHaveText("Signed out.");
  await page.goto("/");
  await expect(page).toHaveURL(/\/login\?next=/);
});

test("a wrong password is refused with a clear message", async ({ page }) => {
  await page.goto("/login");
  await page.getByLabel("Username").fill(USERS.admin);
  await page.getByLabel("Password").fill("not the password at all");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toHaveText("Wrong username or password.");
  await expect(page.getByTestId("signed-in-as")).toHaveCount(0);
});

test("a viewer sees no re-drive, and a forged re-drive is refused", async ({ page }) => {
  await signIn(page, USERS.viewer, `/events/${SEEDED.staleEvent}`);
  await expect(page.getByTestId("claim-state")).toHaveText("stale");
  await expect(page.getByRole("link", { name: "Re-drive…" })).toHaveCount(0);
  await page.goto(`/events/${SEEDED.staleEvent}/redrive`);
  await expect(page.getByRole("alert")).toContainText("needs the support or admin role");

  const forged = await page.request.post("/dashboard/actions/redrive", {
    form: { event_id: SEEDED.staleEvent, reason: "forged" },
    maxRedirects: 0,
  });
  expect(forged.status()).toBe(403);
  await page.goto(`/events/${SEEDED.staleEvent}`);
  await expect(page.getByTestId("claim-state")).toHaveText("stale");
});

test("support finds a customer by email and sees credits and keys", async ({ page }) => {
  await signIn(page, USERS.support, "/orders");
  await page.getByLabel("Find").fill(SEEDED.keyedEmail);
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByTestId("customer-balance")).toHaveText("40");
  await shot(page, "orders");
  await page.getByRole("link", { name: SEEDED.keyedOrder }).click();
  await expect(page.getByTestId("credits-granted")).toHaveText("40 of 40");
  const keys = page.getByRole("table", { name: "Stripe requests" });
  await expect(keys).toContainText(`checkout-session:${SEEDED.keyedOrder}`);
  await expect(keys).toContainText("succeeded");
  const ledger = page.getByRole("table", { name: "Credit ledger" });
  await expect(ledger).toContainText("unlock");
  await expect(ledger).toContainText(`evt_e2e_${SEEDED.keyedOrder}`);
  await shot(page, "order");
});

test("support re-drives a stale claim and it is processed with exactly one unlock", async ({ page }) => {
  await signIn(page, USERS.support, "/claims?status=stale");
  await shot(page, "claims");
  await page.getByRole("link", { name: SEEDED.staleEvent }).click();
  await expect(page.getByTestId("claim-state")).toHaveText("stale");
  await shot(page, "event");
  await page.getByRole("link", { name: "Re-drive…" }).click();
  await expect(page.getByTestId("credits-granted")).toHaveText("0");
  await expect(page.getByText("None: fulfilment writes the ledger only.")).toBeVisible();
  await page.getByLabel("Why (kept in the audit log)").fill("worker crashed during the seed");
  await shot(page, "redrive");
  await page.locator("summary", { hasText: "Re-drive now" }).click();
  await page.getByRole("button", { name: `Re-drive ${SEEDED.staleEvent} — confirm` }).click();
  await expect(page.getByRole("status")).toHaveText("Re-driven: processed.");
  await expect(page.getByTestId("claim-state")).toHaveText("processed");

  await page.goto(`/orders/${SEEDED.staleOrder}`);
  await expect(page.getByTestId("credits-granted")).toHaveText("40 of 40");
  await expect(page.getByRole("table", { name: "Credit ledger" }).getByRole("row")).toHaveCount(2);

  await page.goto("/audit");
  await expect(page.getByRole("table")).toContainText("worker crashed during the seed");
  await expect(page.getByRole("table")).toContainText(`dashboard:${USERS.support}`);
});

test("an admin refunds half an order, then the rest: credits follow the money, each key shown", async ({ page }) => {
  await signIn(page, USERS.admin, `/orders/${SEEDED.refundOrder}`);
  await expect(page.getByTestId("order-status")).toHaveText("paid");
  await expect(page.getByTestId("order-paid")).toHaveText("CHF 49.00");
  await page.getByRole("link", { name: "Refund…" }).click();
  await page.getByLabel(/^Amount/).fill("24.50");
  await page.getByLabel("Why (kept in the audit log)").fill("half the runs were unused");
  await page.locator("summary", { hasText: "Refund…" }).click();
  await page.getByRole("button", { name: /^Refund .* — confirm$/ }).click();
  await expect(page.getByRole("status")).toContainText("Refunded CHF 24.50 (re_");
  await expect(page.getByTestId("order-status")).toHaveText("partially refunded");
  await expect(page.getByTestId("credits-granted")).toHaveText("20 of 40");
  await expect(page.getByTestId("order-refunded")).toHaveText("CHF 24.50");
  const ledger = page.getByRole("table", { name: "Credit ledger" });
  await expect(ledger).toContainText("refund of CHF 24.50");
  const keys = page.getByRole("table", { name: "Stripe requests" });
  await expect(keys).toContainText(`refund:${SEEDED.refundOrder}:2450`);
  await shot(page, "order-partial-refund");

  // The rest: "Full" fills in what is left.
  await page.getByRole("link", { name: "Refund…" }).click();
  await page.getByRole("link", { name: "Full", exact: true }).click();
  await expect(page.getByLabel(/^Amount/)).toHaveValue("24.50");
  await page.getByLabel("Why (kept in the audit log)").fill("customer asked by email");
  await page.locator("summary", { hasText: "Refund…" }).click();
  await page.getByRole("button", { name: "Refund CHF 24.50 — confirm" }).click();
  await expect(page.getByRole("status")).toContainText("Refunded CHF 24.50 (re_");
  await expect(page.getByTestId("order-status")).toHaveText("refunded");
  await expect(page.getByTestId("credits-granted")).toHaveText("0 of 40");
  await expect(keys).toContainText(`refund:${SEEDED.refundOrder}:4900`);
  await expect(keys).toContainText("200");
  await expect(page.getByRole("link", { name: "Refund…" })).toHaveCount(0);

  const log = await (await page.request.get(`${process.env.E2E_SIM_URL}/_sim/log`)).json();
  const refunds = log.filter((e: { path: string; outcome: string }) => e.path === "/v1/refunds" && e.outcome === "performed");
  expect(refunds).toHaveLength(2);
});

test("the events list filters, searches and links to details", async ({ page }) => {
  await signIn(page, USERS.viewer, "/");
  await expect(page.getByRole("list", { name: "Deliveries per hour" }).getByRole("listitem")).toHaveCount(24);
  await expect(page.getByTestId("credits-today")).not.toHaveText("0");
  await shot(page, "overview");
  await page.goto("/events");
  await expect(page.getByRole("row")).not.toHaveCount(1);
  await shot(page, "events");
  await page.getByLabel("Search", { exact: true }).fill(SEEDED.paidOrder);
  await page.getByRole("button", { name: "Filter" }).click();
  const rows = page.locator("tbody tr");
  await expect(rows).toHaveCount(1);
  await rows.getByRole("link", { name: SEEDED.paidEvent }).click();
  await expect(page.getByRole("heading", { name: SEEDED.paidEvent })).toBeVisible();
  await expect(page.locator("pre.payload")).toContainText('"checkout.session.completed"');
});
