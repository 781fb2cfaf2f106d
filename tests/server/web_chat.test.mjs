// The web chat page at / of `lily serve`, driven in headless Chromium by
// Playwright: streaming answers, reasoning, stop, regenerate, conversations
// kept across reloads, speed and route per answer, tool calls and their
// results (through the hybrid router's cloud tier, a fake OpenAI endpoint
// here that answers with a tool call), nothing loaded from elsewhere, and
// model or user text never turned into HTML.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { startServer } from "./lily_server.mjs";

const CHROMIUM = process.env.LILY_CHROMIUM || "/usr/bin/chromium";
const WEB_SEARCH = [{ type: "function", function: { name: "web_search", description: "Search the web.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } } }];

// An OpenAI-compatible cloud tier: a tool call first, then an answer that uses the result.
const cloudRequests = [];
function sse(res, chunks) {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  for (const c of chunks) res.write(`data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", model: "big", ...c })}\n\n`);
  res.end("data: [DONE]\n\n");
}
const cloud = http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => (body += d));
  req.on("end", () => {
    const j = JSON.parse(body);
    cloudRequests.push(j);
    const last = j.messages[j.messages.length - 1];
    if (last.role === "tool") {
      sse(res, [{ choices: [{ index: 0, delta: { role: "assistant", content: "Paris is " } }] },
                { choices: [{ index: 0, delta: { content: "sunny <b>and</b> 21 °C." }, finish_reason: "stop" }] },
                { choices: [], usage: { prompt_tokens: 30, completion_tokens: 9, total_tokens: 39 } }]);
    } else {
      sse(res, [{ choices: [{ index: 0, delta: { role: "assistant", reasoning_content: "The user wants the weather; search." } }] },
                { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "web_search", arguments: "" } }] } }] },
                { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: "{\"q\": \"weather Paris\"}" } }] }, finish_reason: "tool_calls" }] },
                { choices: [], usage: { prompt_tokens: 20, completion_tokens: 12, total_tokens: 32 } }]);
    }
  });
});

let server, browser, page;
const pageRequests = [];

before(async () => {
  await new Promise((r) => cloud.listen(0, "127.0.0.1", r));
  const dir = mkdtempSync(join(tmpdir(), "lily-web-"));
  const config = join(dir, "deployment.json");
  writeFileSync(config, JSON.stringify({ hybridRouting: {
    routeLocal: ["file_system", "user_credentials", "source_code"], routeCloud: ["web_search", "citation_index"],
    cloud: { baseUrl: `http://127.0.0.1:${cloud.address().port}/v1`, model: "big-model", apiKeyEnv: "LILY_TEST_CLOUD_KEY" },
    onCloudFailure: "error", cloudTimeoutSeconds: 20 } }));
  process.env.LILY_TEST_CLOUD_KEY = "test-key";
  server = await startServer(["--deployment-config", config]);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
  page.on("request", (r) => pageRequests.push(r.url()));
  page.on("dialog", (d) => { throw new Error("the page opened a dialog: " + d.message()); });
});

after(async () => {
  await browser?.close();
  await server?.stop();
  cloud.close();
});

const assistants = () => page.locator("#messages .message.assistant");
async function send(text) {
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
}
async function waitIdle() {
  await page.waitForSelector("#stop", { state: "hidden" });
  await page.waitForFunction(() => !document.querySelector("#send").disabled);
}
async function setSetting(id, value) {
  await page.evaluate(() => { document.querySelector("#settings").open = true; });
  if (typeof value === "boolean") await page.setChecked("#" + id, value);
  else await page.fill("#" + id, value);
  await page.dispatchEvent("#" + id, "change");
}

test("the page is served whole, with a policy that keeps it offline", async () => {
  const r = await fetch(server.base + "/");
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /^text\/html/);
  assert.match(r.headers.get("content-security-policy"), /default-src 'none'.*connect-src 'self'/);
  const html = await r.text();
  assert.doesNotMatch(html, /<(script|link|img)[^>]+(src|href)=["']?(https?:)?\/\//i, "no asset from elsewhere");
  await page.goto(server.base + "/");
  await page.waitForFunction(() => document.querySelector("#model-name").textContent.length > 0);
  assert.equal(await page.title(), "Lily");
});

test("a local answer streams, with its reasoning folded, its speed and where it ran", async () => {
  await send("hello");
  await page.waitForSelector("#stop", { state: "visible" });
  await waitIdle();
  const a = assistants().last();
  assert.equal(await a.locator(".route").textContent(), "ran locally");
  assert.match(await a.locator(".speed").textContent(), /^\d+ tokens · [\d.]+ tok\/s · [\d.]+ s to first token$/);
  // Thinking is on by default: the answer opens with a reasoning block, folded once done.
  const reasoning = a.locator("details.reasoning");
  assert.equal(await reasoning.count(), 1);
  assert.equal(await reasoning.evaluate((d) => d.open), false);
  assert.ok((await reasoning.locator(".reasoning-text").textContent()).length > 0);
  // Without thinking, the answer is content alone.
  await setSetting("thinking", false);
  await send("hello again");
  await waitIdle();
  assert.equal(await assistants().last().locator("details.reasoning").count(), 0);
  assert.ok((await assistants().last().locator(".content").textContent()).length > 0);
});

test("stop ends an answer where it is, and regenerate replaces the last one", async () => {
  await setSetting("max-tokens", "4000");
  await send("Tell me a very long story.");
  await page.waitForFunction(() => {
    const m = [...document.querySelectorAll("#messages .message.assistant")].pop();
    return m && m.querySelector(".content").textContent.length > 20;
  });
  await page.click("#stop");
  await waitIdle();
  const last = assistants().last();
  assert.equal(await last.locator(".stopped").textContent(), "stopped");
  const kept = await last.locator(".content").textContent();
  await page.waitForTimeout(300);
  assert.equal(await assistants().last().locator(".content").textContent(), kept, "nothing arrives after stop");

  await setSetting("max-tokens", "16");
  const before = assistants();
  const count = await before.count();
  const posts = pageRequests.filter((u) => u.endsWith("/v1/chat/completions")).length;
  await page.click("#messages .message.assistant:last-child .regenerate");
  await waitIdle();
  assert.equal(await assistants().count(), count, "the last answer is replaced, not added to");
  assert.equal(pageRequests.filter((u) => u.endsWith("/v1/chat/completions")).length, posts + 1);
  assert.equal(await assistants().last().locator(".stopped").count(), 0);
});

test("tool calls and their results are shown as such, through the cloud tier", async () => {
  await page.click("#new-chat");
  await setSetting("tools", JSON.stringify(WEB_SEARCH));
  await send("What's the weather in Paris?");
  await waitIdle();
  const a = assistants().last();
  assert.equal(await a.locator(".route").textContent(), "ran in the cloud tier");
  assert.equal(await a.locator(".tool-call .name").textContent(), "web_search");
  assert.equal(await a.locator(".tool-call .args").textContent(), '({"q": "weather Paris"})');
  assert.equal(await a.locator("details.reasoning .reasoning-text").textContent(), "The user wants the weather; search.");
  await a.locator("input.tool-result").fill("Sunny, 21 C");
  await a.locator(".tool-result-form button").click();
  await page.waitForSelector("#messages .message.tool");
  await waitIdle();
  assert.equal(await page.locator("#messages .message.tool .content").textContent(), "Sunny, 21 C");
  assert.match(await page.locator("#messages .message.tool .role").textContent(), /tool result · web_search/);
  // The model's text is text: the <b> it sent is shown, not rendered.
  assert.equal(await assistants().last().locator(".content").textContent(), "Paris is sunny <b>and</b> 21 °C.");
  assert.equal(await page.locator("#messages b").count(), 0);
  const sent = cloudRequests[cloudRequests.length - 1].messages;
  assert.deepEqual(sent.slice(-2).map((m) => m.role), ["assistant", "tool"]);
  assert.equal(sent[sent.length - 1].tool_call_id, "call_1");
  assert.equal(sent[sent.length - 1].content, "Sunny, 21 C");
  assert.equal(sent[sent.length - 2].tool_calls[0].function.arguments, '{"q": "weather Paris"}');
});

test("conversations are kept in the browser across a reload", async () => {
  await setSetting("tools", "");
  await page.click("#new-chat");
  await send("<img src=x onerror=alert(1)>");
  await waitIdle();
  assert.equal(await page.locator("#messages img").count(), 0);
  await page.reload();
  await page.waitForSelector("#conversations li");
  const titles = await page.locator("#conversations li .name").allTextContents();
  assert.deepEqual(titles, ["<img src=x onerror=alert(1)>", "What's the weather in Paris?", "hello"]);
  await page.locator("#conversations li", { hasText: "Paris" }).click();
  assert.equal(await page.locator("#messages .message.tool").count(), 1);
  assert.equal(await page.locator("#messages .message.assistant .route").first().textContent(), "ran in the cloud tier");
  if (process.env.LILY_SCREENSHOT) await page.screenshot({ path: process.env.LILY_SCREENSHOT });
  await page.locator("#conversations li", { hasText: "hello" }).click();
  assert.equal(await page.locator("#messages .message.user").count(), 3);
});

test("the page asked nothing of anywhere but this server", () => {
  assert.ok(pageRequests.length > 0);
  for (const u of pageRequests) assert.ok(u.startsWith(server.base + "/"), u);
});
