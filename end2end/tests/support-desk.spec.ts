// The support desk as staff use it: a missing page is a 404 every time, each role is shown
// only what it may do, and removing an operator asks first.
import { test, expect } from "@playwright/test";
import { SEEDED, USERS, cli, signIn } from "./support";

test("a missing order, event or customer answers 404 on every load", async ({ page }) => {
  await signIn(page, USERS.viewer, "/");
  for (let i = 0; i < 50; i++) {
    for (const path of ["/orders/ord_nope", "/events/evt_doesnotexist", "/customers/nobody@example.ch"]) {
      const response = await page.request.get(path);
      expect(response.status(), `${path}, load ${i + 1}`).toBe(404);
    }
  }
  // The page a person sees says so.
  const response = await page.goto("/orders/ord_nope");
  expect(response?.status()).toBe(404);
  await expect(page.getByRole("alert")).toContainText("No order ord_nope");
});

test("a support operator is shown no form only an admin may send", async ({ page }) => {
  await signIn(page, USERS.support, `/orders/${SEEDED.keyedOrder}`);
  await expect(page.getByTestId("order-status")).toBeVisible();
  await expect(page.locator(`a[href$="/refund"]`)).toHaveCount(0);
  await page.goto(`/orders/${SEEDED.keyedOrder}/refund`);
  await expect(page.getByRole("alert")).toBeVisible();
  await expect(page.locator('form[action="/dashboard/actions/refund"]')).toHaveCount(0);
  await page.goto("/operators");
  await expect(page.getByRole("alert")).toBeVisible();
  await expect(page.getByTestId("add-operator")).toHaveCount(0);
});

test("removing an operator asks first and names who is removed", async ({ page }) => {
  cli(["operator", "add", "--username", "leaving-soon", "--role", "viewer"], { input: "a long enough password\n" });
  await signIn(page, USERS.admin, "/operators");
  const row = page.locator("tr", { hasText: "leaving-soon" });
  const confirm = row.getByRole("button", { name: "Yes, remove leaving-soon" });
  await expect(confirm).toBeHidden();
  await row.getByText("remove", { exact: true }).click();
  await expect(row.getByText("Remove leaving-soon?")).toBeVisible();
  await confirm.click();
  await expect(page.getByRole("status")).toHaveText("leaving-soon: removed.");
  await expect(page.locator("tr", { hasText: "leaving-soon" })).toHaveCount(0);
});

test("the orders page lists recent orders, filters them and exports what it shows", async ({ page }) => {
  await signIn(page, USERS.viewer, "/orders");
  const list = page.getByTestId("orders-list");
  await expect(list.locator(`tr[data-order="${SEEDED.paidOrder}"]`)).toBeVisible();
  await page.getByLabel("Status").selectOption("paid");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/status=paid/);
  await expect(list.locator('td[data-status]:not([data-status="paid"])')).toHaveCount(0);
  await expect(list.locator(`tr[data-order="${SEEDED.paidOrder}"]`)).toBeVisible();
  const csv = await page.request.get((await page.getByTestId("orders-csv").getAttribute("href"))!);
  expect(csv.status()).toBe(200);
  const lines = (await csv.text()).trim().split("\n");
  expect(lines[0]).toMatch(/^order_id,status,/);
  expect(lines.slice(1).every((line) => line.split(",")[1] === "paid")).toBe(true);
  expect(lines.some((line) => line.startsWith(`${SEEDED.paidOrder},`))).toBe(true);
});
