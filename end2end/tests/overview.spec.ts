import { expect, test } from "@playwright/test";
import { USERS, signIn } from "./support";

test("the server is ready before the browser arrives", async ({ request }) => {
  const ready = await request.get("/readyz");
  expect(ready.status()).toBe(200);
  expect(await ready.json()).toMatchObject({ status: "ready", database: "sqlite" });
});

test("the overview renders, hydrates and refreshes its figures", async ({ page }) => {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });

  await signIn(page, USERS.viewer);
  await expect(page.getByRole("heading", { name: "Overview" })).toBeVisible();
  await expect(page.getByRole("list", { name: "Claims by state" }).getByRole("listitem")).toHaveCount(6);

  // The page is the server's; its islands hydrate, and Refresh reads the figures again.
  await expect(page.locator('main[data-hydrated="true"]')).toBeAttached();
  const refresh = page.getByRole("button", { name: "Refresh" });

  const checkedAt = page.getByTestId("checked-at");
  const before = (await checkedAt.textContent()) ?? "";
  // In the reader's time zone (Europe/Zurich unless they chose another), named.
  expect(before).toMatch(/\d{2}:\d{2}:\d{2}(\.\d{3})? \S+$/);
  await refresh.click();
  await expect(checkedAt).not.toHaveText(before);

  expect(errors).toEqual([]);
});

test("the last 30 days in pictures, each with its axes and its figures as a table", async ({ page }) => {
  await signIn(page, USERS.viewer);
  for (const [id, caption] of [
    ["chart-credits", "Credits per day"],
    ["chart-money", "Money per day"],
    ["chart-backlog", "Failed and stale claims"],
  ]) {
    const chart = page.getByTestId(id);
    await expect(chart.locator("figcaption")).toContainText(caption);
    await expect(chart.locator("ol.days > li")).toHaveCount(30);
    await expect(chart.locator(".y-axis span")).toHaveCount(2);
    await expect(chart.locator(".x-axis span")).toHaveCount(2);
    // The text equivalent: one row per day, today first.
    await chart.locator("summary").click();
    const rows = chart.getByRole("table").locator("tbody tr");
    await expect(rows).toHaveCount(30);
  }
  // The seeded payments were unlocked today (UTC): the credits chart's first row says so.
  const today = page.getByTestId("chart-credits").getByRole("table").locator("tbody tr").first();
  await expect(today.locator("td").first()).not.toHaveText("0");
});

test("an unknown address shows a page that leads back", async ({ page }) => {
  await signIn(page, USERS.viewer);
  const response = await page.goto("/no/such/page");
  expect(response?.status()).toBe(404);
  await page.getByRole("link", { name: "Go to the overview" }).click();
  await expect(page.getByRole("heading", { name: "Overview" })).toBeVisible();
});

test("every page carries the security headers and still hydrates under its policy", async ({ page }) => {
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  await signIn(page, USERS.viewer);
  for (const path of ["/", "/claims", "/events", "/orders", "/audit", "/account/2fa"]) {
    const response = await page.goto(path);
    const headers = response?.headers() ?? {};
    const policy = headers["content-security-policy"] ?? "";
    expect(policy, path).toContain("script-src 'self' 'nonce-");
    expect(policy, path).toContain("frame-ancestors 'none'");
    expect(headers["x-frame-options"], path).toBe("DENY");
    expect(headers["x-content-type-options"], path).toBe("nosniff");
    expect(headers["referrer-policy"], path).toBeTruthy();
    await expect(page.locator('main[data-hydrated="true"]'), path).toBeAttached();
  }
  expect(errors).toEqual([]);
});
