// Subscriptions as support meets them: the list filtered to unpaid renewals, a subscription's
// page with each period's grants and the failed renewal, its invoice as an order.
import { test, expect } from "@playwright/test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { USERS, cli, deliver, signIn } from "./support";

const billing = join(__dirname, "..", "..", "fixtures", "stripe", "events", "billing");

test("support finds an unpaid renewal and reads what each period was granted", async ({ page }) => {
  // Created, paid, renewed, then the next renewal's card fails: Stripe's events, in an order
  // of their own (the renewal before the creation), fulfilled by support's re-drive.
  for (const [name, event] of [
    ["invoice.paid.subscription_cycle", "evt_1Qfix0006Billing"],
    ["customer.subscription.created", "evt_1Qfix0001Billing"],
    ["invoice.paid.subscription_create", "evt_1Qfix0003Billing"],
    ["invoice.payment_failed.subscription_cycle", "evt_1Qfix0009Billing"],
  ]) {
    await deliver(page.request, readFileSync(join(billing, `${name}.json`), "utf8"));
    cli(["claims", "redrive", event, "--reason", "subscriptions walk"]);
  }

  await signIn(page, USERS.support, "/subscriptions");
  await page.getByLabel("Only unpaid renewals").check();
  await page.getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(/past_due=1/);
  const row = page.getByTestId("subscriptions-list").locator('tr[data-subscription="sub_1Qfix0001Plan"]');
  await expect(row).toContainText("in_1Qfix0004Invoice");
  await expect(row).toContainText("abo1@example.ch");
  await expect(row.locator("td.num")).toHaveText("80");

  await row.getByRole("link", { name: "sub_1Qfix0001Plan" }).click();
  await expect(page).toHaveURL(/\/subscriptions\/sub_1Qfix0001Plan$/);
  await expect(page.getByTestId("subscription-status")).toHaveText("active");
  await expect(page.getByTestId("subscription-unpaid")).toContainText("in_1Qfix0004Invoice since");
  await expect(page.getByTestId("subscription-granted")).toHaveText("80");
  const grants = page.getByTestId("subscription-grants").locator("tbody tr");
  await expect(grants).toHaveCount(2);
  await expect(grants.first()).toHaveAttribute("data-invoice", "in_1Qfix0002Invoice");

  // The renewal's invoice is an order like any other.
  await grants.first().getByRole("link", { name: "in_1Qfix0002Invoice" }).click();
  await expect(page).toHaveURL(/\/orders\/in_1Qfix0002Invoice$/);
  await expect(page.getByTestId("credits-granted")).toHaveText("40 of 40");

  // The header search finds it by the shop's reference.
  const box = page.getByRole("searchbox", { name: "Search orders, customers and events" });
  await box.fill("subref_0001");
  await box.press("Enter");
  await expect(page).toHaveURL(/\/subscriptions\/sub_1Qfix0001Plan$/);

  // An unknown subscription is a page that says so, with 404.
  const missing = await page.goto("/subscriptions/sub_nope");
  expect(missing?.status()).toBe(404);
  await expect(page.getByText("No subscription sub_nope.")).toBeVisible();
});

test("support follows a subscription asked for but not paid yet from the requests list", async ({ page }) => {
  const ref = `abo-walk-${Date.now()}`;
  const token = JSON.parse(cli(["tokens", "create", "--name", `subscriptions ${ref}`, "--json"])).token;
  const asked = await page.request.post("/api/subscriptions", {
    headers: { authorization: `Bearer ${token}` },
    data: { plan: "thesis-monthly", customer_email: "walker@example.ch", subscription_ref: ref },
  });
  expect(asked.status()).toBe(201);
  const { checkout_session_id: session, checkout_url: url } = await asked.json();

  await signIn(page, USERS.support, "/requests?status=succeeded");
  const request = page.locator(`tr[data-key="subscription-checkout:${ref}"]`);
  await expect(request).toContainText(session);
  await request.getByRole("link", { name: ref }).click();
  await expect(page).toHaveURL(new RegExp(`/subscriptions/${ref}$`));
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(ref);
  await expect(page.getByTestId("subscription-awaiting")).toContainText("Checkout Session is not paid");
  const facts = page.getByTestId("subscription-asked");
  await expect(facts).toContainText("walker@example.ch");
  await expect(facts).toContainText("thesis-monthly · CHF 39.00 per month, 40 credits");
  await expect(page.getByTestId("subscription-session")).toHaveText(session);
  await expect(facts.getByRole("link", { name: url })).toHaveAttribute("href", url);
  const keys = page.getByRole("table", { name: "Stripe requests" });
  await expect(keys.locator(`tr[data-key="subscription-checkout:${ref}"]`)).toBeVisible();

  // The customer link leads to whom it was asked for: the ask is listed, awaiting payment.
  await facts.getByRole("link", { name: "walker@example.ch" }).click();
  await expect(page).toHaveURL(/\/customers\/walker@example\.ch$/);
  const listed = page.getByTestId("customer-subscriptions").locator(`tr[data-subscription="${ref}"]`);
  await expect(listed).toContainText("thesis-monthly");
  await expect(listed).toContainText("awaiting payment");
  await listed.getByRole("link", { name: ref }).first().click();
  await expect(page).toHaveURL(new RegExp(`/subscriptions/${ref}$`));

  // The header search finds it by its reference, and the customer by the e-mail alone.
  const box = page.getByRole("searchbox", { name: "Search orders, customers and events" });
  await box.fill("Walker@Example.ch");
  await box.press("Enter");
  await expect(page).toHaveURL(/\/customers\/walker@example\.ch$/);
  await box.fill(ref);
  await box.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/subscriptions/${ref}$`));
  await expect(page.getByTestId("subscription-asked")).toBeVisible();
});

test("support sees a plan change waiting for the period's end", async ({ page }) => {
  // The first period paid at thesis-monthly, then the item moved to thesis-pro without
  // proration: Stripe bills it from the next renewal.
  const own = (name: string) =>
    readFileSync(join(billing, `${name}.json`), "utf8").replaceAll("Qfix", "Qsch");
  const moved = JSON.parse(own("customer.subscription.created"));
  moved.id = "evt_1Qsch00Moved";
  moved.type = "customer.subscription.updated";
  moved.created += 600_000;
  moved.data.object.items.data[0].price.unit_amount = 8900;
  moved.data.object.items.data[0].price.unit_amount_decimal = "8900";
  for (const [body, event] of [
    [own("customer.subscription.created"), "evt_1Qsch0001Billing"],
    [JSON.stringify(moved), "evt_1Qsch00Moved"],
    [own("invoice.paid.subscription_create"), "evt_1Qsch0003Billing"],
  ]) {
    await deliver(page.request, body);
    cli(["claims", "redrive", event, "--reason", "scheduled change walk"]);
  }

  await signIn(page, USERS.support, "/subscriptions");
  const row = page.getByTestId("subscriptions-list").locator('tr[data-subscription="sub_1Qsch0001Plan"]');
  await expect(row).toContainText("thesis-monthly");
  await expect(row.getByTestId("scheduled-change")).toContainText("→ thesis-pro from");
  await row.getByRole("link", { name: "sub_1Qsch0001Plan" }).click();
  await expect(page).toHaveURL(/\/subscriptions\/sub_1Qsch0001Plan$/);
  await expect(page.getByTestId("subscription-plan")).toHaveText("thesis-monthly");
  await expect(page.getByTestId("subscription-scheduled")).toContainText(
    "thesis-pro from",
  );
  await expect(page.getByTestId("subscription-scheduled")).toContainText("billed at the next renewal");
  await expect(page.getByTestId("subscription-granted")).toHaveText("40");
});
