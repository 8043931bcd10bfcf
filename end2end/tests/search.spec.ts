// The search box in the header of every page: support pastes what a customer wrote them and
// lands on it; `/` puts the cursor in the box.
import { test, expect } from "@playwright/test";
import { SEEDED, USERS, signIn } from "./support";

test("support types an e-mail in the header search and lands on the customer", async ({ page }) => {
  await signIn(page, USERS.support, "/events");
  await expect(page.locator('main[data-hydrated="true"]')).toBeAttached();
  const box = page.getByRole("searchbox", { name: "Search orders, customers and events" });
  // `/` from anywhere on the page (not while typing elsewhere) focuses the box.
  await page.locator("h1").click();
  await page.keyboard.press("/");
  await expect(box).toBeFocused();
  await page.keyboard.type(SEEDED.keyedEmail);
  await page.keyboard.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/customers/${SEEDED.keyedEmail.replace(".", "\\.")}$`));
  await expect(page.getByTestId("customer-balance")).toHaveText("40");
  await expect(page.locator(`[data-order="${SEEDED.keyedOrder}"]`)).toBeVisible();
});

test("an order id, an event id and a miss each land where they belong", async ({ page }) => {
  await signIn(page, USERS.viewer, "/");
  const box = page.getByRole("searchbox", { name: "Search orders, customers and events" });
  await box.fill(SEEDED.paidOrder);
  await box.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/orders/${SEEDED.paidOrder}$`));
  await expect(page.getByTestId("order-status")).toBeVisible();

  await box.fill(SEEDED.staleEvent);
  await box.press("Enter");
  await expect(page).toHaveURL(new RegExp(`/events/${SEEDED.staleEvent}$`));

  await box.fill("ord_that_never_was");
  await box.press("Enter");
  await expect(page).toHaveURL(/\/search\?q=ord_that_never_was$/);
  await expect(page.getByText("Nothing matches")).toBeVisible();
  // The box keeps the term on the results page.
  await expect(box).toHaveValue("ord_that_never_was");
});
