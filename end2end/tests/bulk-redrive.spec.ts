// Support re-drives failed claims in bulk: filters them, reads the preview, types the count
// and watches the batch run to its end. The claims are made here: sessions naming a package
// but no credits, delivered through the signed webhook and attempted once by a command that
// does not know the package table (so each fails for good); the server knows it, so the bulk
// re-drive fulfils them. Nothing seeded for the other specs is touched.
import { expect, test } from "@playwright/test";
import { USERS, checkoutCompleted, claimStatus, cli, deliver, signIn } from "./support";

const COUNT = 6;

/** A session naming the package but no credits. */
function packagedSession(i: number) {
  const event = checkoutCompleted(`ord_e2e_bulk_${i}`, `cs_e2e_bulk_${i}`, `bulk${i}@example.ch`, { credits: null });
  event.id = `evt_e2e_bulk_${i}`;
  return event;
}

test("support filters failed claims, previews, types the count and sees the batch finish", async ({
  page,
  request,
}) => {
  for (let i = 0; i < COUNT; i++) {
    await deliver(request, JSON.stringify(packagedSession(i)));
    // One attempt, without the package table: it fails for good.
    expect(() =>
      cli(["claims", "redrive", `evt_e2e_bulk_${i}`, "--reason", "first try"], {
        env: { CLAIMCHECK_MAX_ATTEMPTS: "1", CLAIMCHECK_PACKAGES: "" },
      }),
    ).toThrow();
    expect(claimStatus(`evt_e2e_bulk_${i}`)).toBe("failed");
  }

  await signIn(page, USERS.support, "/claims?status=failed");
  await page.getByRole("link", { name: "Re-drive in bulk…" }).click();
  await expect(page).toHaveURL(/\/claims\/redrive\?status=failed&preview=1/);
  await page.getByLabel("Last error contains").fill("no credit amount");
  await page.getByRole("button", { name: "Preview" }).click();
  await expect(page.getByTestId("bulk-claims")).toContainText(`${COUNT} claims`);
  await expect(page.getByTestId("bulk-orders")).toHaveText(`${COUNT} distinct orders`);
  await expect(page.getByTestId("bulk-credited")).toContainText("0 of them have their credits");
  await expect(page.getByRole("table", { name: "The first claims" }).locator("tbody tr")).toHaveCount(COUNT);

  await page.getByLabel("Why (kept in the audit log)").fill("package table fixed");
  await page.getByLabel(`Type ${COUNT} to confirm`).fill(String(COUNT));
  await page.getByRole("button", { name: `Re-drive ${COUNT} claims` }).click();

  await expect(page).toHaveURL(/\/claims\/redrive\/bulk_[0-9a-f]+/);
  await expect(page.getByRole("status").first()).toContainText(`Started: ${COUNT} claims`);
  await expect(page.locator("main")).toHaveAttribute("data-hydrated", "true");
  // Hydrated, the page follows the batch by itself; without WASM, "Refresh" does.
  await expect(page.getByTestId("batch-state")).toHaveText("finished");
  await expect(page.getByTestId("batch-progress")).toHaveText(
    `${COUNT} / ${COUNT} done: ${COUNT} processed, 0 failed, 0 skipped`,
  );
  await expect(page.getByTestId("batch-bar")).toHaveAttribute("value", String(COUNT));
  // The bar shows how it ended: all processed, nothing failed or skipped.
  const split = page.getByTestId("batch-split");
  await expect(split.locator('[data-outcome="processed"]')).toHaveAttribute("style", /width: 100%/);
  await expect(split.locator('[data-outcome="failed"]')).toHaveAttribute("style", /width: 0%/);
  for (let i = 0; i < COUNT; i++) {
    expect(claimStatus(`evt_e2e_bulk_${i}`)).toBe("processed");
    const order = JSON.parse(cli(["orders", "show", `ord_e2e_bulk_${i}`, "--json"]));
    expect(order.credits_granted).toBe(40);
  }

  // The batch is listed, and the audit log names it.
  await page.goto("/claims/redrive");
  await expect(page.getByRole("table", { name: "Recent batches" })).toContainText("package table fixed");
  await page.goto("/audit");
  await expect(page.locator("main")).toContainText("bulk_redrive");
});

test("a viewer sees no bulk re-drive to start, and a forged one is refused", async ({ page }) => {
  await signIn(page, USERS.viewer, "/claims?status=failed");
  await expect(page.getByRole("link", { name: "Re-drive in bulk…" })).toHaveCount(0);
  await page.goto("/claims/redrive?status=failed&preview=1");
  await expect(page.getByRole("alert")).toContainText("needs the support or admin role");
  await expect(page.getByRole("button", { name: "Preview" })).toHaveCount(0);
  const forged = await page.request.post("/dashboard/actions/bulk-redrive", {
    form: { status: "failed", reason: "forged", confirm: "1" },
    maxRedirects: 0,
  });
  expect(forged.status()).toBe(403);
});
