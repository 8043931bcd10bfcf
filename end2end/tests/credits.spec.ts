// A customer's credits as support meets them: a spend found by its reference in the header
// search, the customer's available credits, lots and spends, and a goodwill adjustment that
// lands once, within support's limit.
import { test, expect } from "@playwright/test";
import { USERS, checkoutCompleted, cli, deliver, signIn } from "./support";

const EMAIL = "credits@example.ch";

function balance(): number {
  return JSON.parse(cli(["customers", "show", EMAIL, "--json"])).balance;
}

test("support finds a spend, reads the credits and adjusts them once", async ({ page }) => {
  const paid = checkoutCompleted("ord_e2e_credits", "cs_e2e_credits", EMAIL);
  await deliver(page.request, JSON.stringify(paid));
  // The e2e server runs no workers: support's re-drive fulfils the payment.
  cli(["claims", "redrive", paid.id, "--reason", "credits walk: fulfil the order"]);
  expect(balance()).toBe(40);
  const spent = JSON.parse(
    cli(["customers", "spend", EMAIL, "--credits", "7", "--reference", "run-e2e-1", "--key", "e2e-spend-1", "--json"]),
  );
  expect(spent.balance_after).toBe(33);

  await signIn(page, USERS.support, "/");
  const box = page.getByRole("searchbox", { name: "Search orders, customers and events" });
  await box.fill("run-e2e-1");
  await box.press("Enter");
  await expect(page).toHaveURL(/\/customers\/credits@example\.ch$/);
  await expect(page.getByTestId("credits-available")).toHaveText("33");
  await expect(page.getByTestId("credits-owed")).toHaveText("0");
  const lot = page.getByTestId("customer-lots").locator('tr[data-lot="order:ord_e2e_credits"]');
  await expect(lot).toContainText("ord_e2e_credits");
  await expect(lot).toContainText("never");
  const spend = page.locator(`tr[data-movement="${spent.spend_id}"]`);
  await expect(spend).toContainText("spend");
  await expect(spend).toContainText("-7");
  await expect(spend).toContainText("run-e2e-1");

  // More than support may give: the form says so and is not sent (the server refuses it
  // too, which the API tests show).
  const form = page.getByTestId("adjust");
  await form.getByText("Adjust the balance").click();
  await expect(form).toContainText("at most 50 credits");
  const credits = form.getByLabel("Credits (negative to take back)");
  await credits.fill("51");
  await form.getByLabel("Reason (kept with the change)").fill("goodwill");
  await form.getByLabel("I have checked the credits and the reason.").check();
  await form.getByRole("button", { name: "Adjust balance" }).click();
  expect(await credits.evaluate((input) => (input as HTMLInputElement).validity.rangeOverflow)).toBe(true);
  await expect(page).toHaveURL(/\/customers\/credits@example\.ch$/);
  expect(balance()).toBe(33);

  await form.getByLabel("Credits (negative to take back)").fill("5");
  await form.getByLabel("Reason (kept with the change)").fill("the check failed twice");
  await form.getByLabel("I have checked the credits and the reason.").check();
  await form.getByRole("button", { name: "Adjust balance" }).click();
  await expect(page.getByRole("status")).toHaveText("Balance changed by +5 credits: now 38.");
  await expect(page.getByTestId("credits-available")).toHaveText("38");
  const adjustment = page.locator('tr[data-testid="movement"]', { hasText: "the check failed twice" });
  await expect(adjustment).toContainText("dashboard:sam");
  await expect(adjustment).toContainText("+5");
  expect(balance()).toBe(38);
});
