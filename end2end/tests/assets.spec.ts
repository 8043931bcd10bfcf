// What a browser downloads: the release binary serves the dashboard it carries, compressed,
// under names that change with the content, so a returning browser need not ask again.
import { expect, test } from "@playwright/test";

const KB = 1024;

test("the sign-in page's first visit is small, compressed and cacheable for good", async ({ browser }) => {
  test.skip(!process.env.CLAIMCHECK_BIN, "needs a binary that carries its dashboard (./scripts/test)");
  const context = await browser.newContext();
  const page = await context.newPage();
  const pending: Promise<{ url: string; wire: number; headers: Record<string, string> }>[] = [];
  page.on("response", (response) =>
    pending.push(
      (async () => {
        const sizes = await response.request().sizes();
        return {
          url: new URL(response.url()).pathname,
          wire: sizes.responseHeadersSize + sizes.responseBodySize,
          headers: await response.allHeaders(),
        };
      })(),
    ),
  );
  await page.goto("/login");
  await expect(page.locator('main[data-hydrated="true"]')).toBeAttached();
  await page.waitForLoadState("networkidle");
  const responses = await Promise.all(pending);

  const total = responses.reduce((sum, r) => sum + r.wire, 0);
  console.log(
    `sign-in page, first visit: ${(total / KB).toFixed(1)} KB on the wire\n` +
      responses.map((r) => `  ${r.url} ${(r.wire / KB).toFixed(1)} KB ${r.headers["content-encoding"] ?? ""}`).join("\n"),
  );
  expect(total).toBeLessThanOrEqual(250 * KB);

  const html = responses.find((r) => r.url === "/login");
  expect(html?.headers["content-encoding"]).toBe("br");
  for (const ext of ["js", "wasm", "css"]) {
    const file = responses.find((r) => new RegExp(`^/pkg/claimcheck\\.[0-9a-f]{16}\\.${ext}$`).test(r.url));
    expect(file, ext).toBeDefined();
    expect(file!.headers["content-encoding"], ext).toBe("br");
    expect(file!.headers["cache-control"], ext).toBe("public, max-age=31536000, immutable");
  }

  // The bundle as it is, uncompressed: the size wasm-opt left.
  const wasm = responses.find((r) => r.url.endsWith(".wasm"))!.url;
  const raw = await page.request.get(wasm, { headers: { "accept-encoding": "identity" } });
  expect(raw.headers()["content-encoding"]).toBeUndefined();
  const bytes = (await raw.body()).length;
  console.log(`wasm: ${(bytes / KB).toFixed(1)} KB raw`);
  expect(bytes).toBeLessThanOrEqual(600 * KB);
  await context.close();
});

test("a gzip-only client gets gzip, and an unchanged file is not sent again", async ({ request }) => {
  test.skip(!process.env.CLAIMCHECK_BIN, "needs a binary that carries its dashboard (./scripts/test)");
  const page = await request.get("/login");
  const css = (await page.text()).match(/\/pkg\/claimcheck\.[0-9a-f]{16}\.css/)![0];
  const gz = await request.get(css, { headers: { "accept-encoding": "gzip" } });
  expect(gz.headers()["content-encoding"]).toBe("gzip");
  const again = await request.get(css, {
    headers: { "accept-encoding": "gzip", "if-none-match": gz.headers()["etag"] },
  });
  expect(again.status()).toBe(304);
});
