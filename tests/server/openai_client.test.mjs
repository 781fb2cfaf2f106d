// lily serve driven by the official OpenAI client for Node: chat and
// completions, whole and streamed, reasoning on and off, tool-call round
// trips, log-probabilities, JSON mode, cancellation, 16 concurrent streams,
// the prefix cache across the turns of a conversation, and the error paths.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { startServer, metric, LILY, MODEL } from "./lily_server.mjs";

let main, strict; // the default server; one with no cache, a key, a small context and a one-slot queue
let client;
const KEY = "test-key-123";

before(async () => {
  [main, strict] = await Promise.all([
    startServer(["--parallel", "16"]),
    startServer(["--no-prefix-cache", "--api-key", KEY, "--ctx-size", "512", "--max-body", "20000",
                 "--parallel", "1", "--queue", "1"]),
  ]);
  client = new OpenAI({ baseURL: `${main.base}/v1`, apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  await Promise.all([main?.stop(), strict?.stop()]);
});

const greedy = { temperature: 0, max_tokens: 24 };

async function streamed(c, params) {
  const stream = await c.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const out = { reasoning: "", content: "", tool_calls: [], finish_reason: null, usage: null, roles: 0, tokens: [] };
  for await (const chunk of stream) {
    if (chunk.usage) out.usage = chunk.usage;
    for (const ch of chunk.choices) {
      if (ch.delta?.role) out.roles++;
      out.reasoning += ch.delta?.reasoning_content ?? "";
      out.content += ch.delta?.content ?? "";
      out.tool_calls.push(...(ch.delta?.tool_calls ?? []));
      for (const t of ch.logprobs?.content ?? []) out.tokens.push(t.token);
      if (ch.finish_reason) out.finish_reason = ch.finish_reason;
    }
  }
  return out;
}

test("models and health", async () => {
  const models = await client.models.list();
  assert.equal(models.data[0].id, "lily-tiny");
  assert.equal((await fetch(`${main.base}/health`)).status, 200);
});

test("a chat answer, whole and streamed, is the same answer", async () => {
  const params = { model: "lily-tiny", messages: [{ role: "user", content: "Hello there" }], ...greedy };
  const whole = await client.chat.completions.create(params);
  const msg = whole.choices[0].message;
  assert.equal(whole.object, "chat.completion");
  assert.equal(msg.role, "assistant");
  assert.ok(msg.reasoning_content.length > 0, "thinking is on by default: the answer starts in reasoning");
  assert.equal(whole.choices[0].finish_reason, "length");
  assert.equal(whole.usage.completion_tokens, 24);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + 24);
  const s = await streamed(client, params);
  assert.equal(s.roles, 1);
  assert.equal(s.reasoning, msg.reasoning_content);
  assert.equal(s.content, msg.content ?? "");
  assert.equal(s.finish_reason, "length");
  assert.deepEqual(s.usage.completion_tokens, 24);
});

test("reasoning off puts everything in content", async () => {
  for (const extra of [{ chat_template_kwargs: { enable_thinking: false } }, { reasoning_effort: "none" }]) {
    const r = await client.chat.completions.create({
      model: "lily-tiny", messages: [{ role: "user", content: "No thinking" }], ...greedy, ...extra });
    assert.equal(r.choices[0].message.reasoning_content, undefined);
    assert.ok(r.choices[0].message.content.length > 0);
  }
});

test("a tool-call round trip is rendered as the template renders it", async () => {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } },
                  required: ["city"] } } }];
  const messages = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
      function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris", days: 2 }) } }] },
    { role: "tool", tool_call_id: "call_1", content: "sunny, 21 C" },
    { role: "tool", tool_call_id: "call_2", content: "and tomorrow rain" },
  ];
  const r = await client.chat.completions.create({ model: "lily-tiny", messages, tools, ...greedy });
  // the prompt the server built is the template's render of the same conversation
  const dir = mkdtempSync(join(tmpdir(), "lily-"));
  const asTemplate = messages.map((m) => m.tool_calls
    ? { ...m, content: "", tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function,
        arguments: JSON.parse(c.function.arguments) } })) } : m);
  writeFileSync(join(dir, "m.json"), JSON.stringify(asTemplate));
  writeFileSync(join(dir, "t.json"), JSON.stringify(tools));
  const prompt = execFileSync(LILY, ["template", "--model", MODEL, "--messages", join(dir, "m.json"),
                                     "--tools", join(dir, "t.json")], { encoding: "utf8" });
  assert.match(prompt, /<parameter=city>\nParis\n<\/parameter>/);
  const tok = await (await fetch(`${main.base}/tokenize`, { method: "POST", body: JSON.stringify({ content: prompt }) })).json();
  assert.equal(r.usage.prompt_tokens, tok.tokens.length);
  // the answer is never lost: as content, reasoning or parsed calls
  const m = r.choices[0].message;
  assert.ok((m.content ?? "").length + (m.reasoning_content ?? "").length + (m.tool_calls ?? []).length > 0);
});

test("a forced tool choice starts the answer inside the call", async () => {
  const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }];
  const r = await client.chat.completions.create({ model: "lily-tiny", tools, ...greedy, max_tokens: 8,
    messages: [{ role: "user", content: "look it up" }], tool_choice: { type: "function", function: { name: "lookup" } } });
  const m = r.choices[0].message;
  // a random model cannot finish the call: the unfinished call comes back as text, not dropped
  const text = (m.content ?? "") + JSON.stringify(m.tool_calls ?? []);
  assert.match(text, /lookup/);
  const bad = await fetch(`${main.base}/v1/chat/completions`, { method: "POST", body: JSON.stringify({
    messages: [{ role: "user", content: "x" }], tools, tool_choice: { type: "function", function: { name: "nope" } } }) });
  assert.equal(bad.status, 400);
});

test("log-probabilities and JSON mode", async () => {
  const r = await client.chat.completions.create({ model: "lily-tiny", messages: [{ role: "user", content: "JSON please" }],
    ...greedy, max_tokens: 30, logprobs: true, top_logprobs: 2, response_format: { type: "json_object" },
    chat_template_kwargs: { enable_thinking: false } });
  const c = r.choices[0];
  assert.equal(c.logprobs.content.length, r.usage.completion_tokens);
  for (const t of c.logprobs.content) {
    assert.equal(t.top_logprobs.length, 2);
    assert.ok(t.logprob <= 0);
  }
  assert.match(c.message.content, /^\s*\{/);
  if (c.finish_reason === "stop") JSON.parse(c.message.content);
  const schema = await fetch(`${main.base}/v1/chat/completions`, { method: "POST", body: JSON.stringify({
    messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema", json_schema: { name: "a" } } }) });
  assert.equal(schema.status, 400);
  assert.match((await schema.json()).error.message, /json_schema is not supported yet/);
});

test("completions, whole and streamed", async () => {
  const whole = await client.completions.create({ model: "lily-tiny", prompt: "Once upon a time", ...greedy, logprobs: 1 });
  assert.equal(whole.object, "text_completion");
  assert.equal(whole.choices[0].logprobs.tokens.length, 24);
  const stream = await client.completions.create({ model: "lily-tiny", prompt: "Once upon a time", ...greedy, stream: true });
  let text = "";
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
  assert.equal(text, whole.choices[0].text);
  const ids = await client.completions.create({ model: "lily-tiny", prompt: [9707, 1879], ...greedy, max_tokens: 3 });
  assert.equal(ids.usage.prompt_tokens, 2);
});

test("tokenize and detokenize round-trip", async () => {
  const post = (p, b) => fetch(`${main.base}${p}`, { method: "POST", body: JSON.stringify(b) }).then((r) => r.json());
  const { tokens } = await post("/tokenize", { content: "Héllo, 世界 👋" });
  assert.ok(tokens.length > 3);
  assert.equal((await post("/detokenize", { tokens })).content, "Héllo, 世界 👋");
});

test("16 concurrent streams each equal their sequential run", async () => {
  const reqs = Array.from({ length: 16 }, (_, i) => ({
    model: "lily-tiny", messages: [{ role: "user", content: `Stream ${i}: ` + "tell me more ".repeat(i) }],
    temperature: i % 2 ? 0.8 : 0, seed: 100 + i, max_tokens: 16 + i, logprobs: true }));
  const alone = [];
  for (const r of reqs) alone.push(await client.chat.completions.create(r));
  const together = await Promise.all(reqs.map((r) => streamed(client, r)));
  together.forEach((s, i) => {
    const m = alone[i].choices[0].message;
    assert.deepEqual(s.tokens, alone[i].choices[0].logprobs.content.map((t) => t.token), `stream ${i}: tokens`);
    assert.equal(s.reasoning, m.reasoning_content ?? "", `stream ${i}`);
    assert.equal(s.content, m.content ?? "", `stream ${i}`);
    assert.equal(s.usage.completion_tokens, alone[i].usage.completion_tokens);
  });
});

test("a cancelled stream stops its generation", async () => {
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model: "lily-tiny", messages: [{ role: "user", content: "go on forever" }],
    max_tokens: 20000, stream: true }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const _ of stream) if (++n === 3) ac.abort();
  } catch (e) {
    assert.ok(ac.signal.aborted, String(e));
  }
  let running = 1;
  for (let i = 0; i < 100 && running > 0; ++i) {
    await new Promise((r) => setTimeout(r, 50));
    running = await metric(main.base, "requests_running");
  }
  assert.equal(running, 0);
  assert.ok((await metric(main.base, "generated_tokens_total")) < 20000);
});

test("the second turn of a conversation resumes from the cache with the same answer", async () => {
  const system = "You are a careful assistant. " + Array.from({ length: 30 }, (_, i) => `Rule ${i}: be exact.`).join(" ");
  const turn1 = [{ role: "system", content: system }, { role: "user", content: "First question?" }];
  const keyed = new OpenAI({ baseURL: `${strict.base}/v1`, apiKey: KEY, maxRetries: 0 });
  const a1 = await client.chat.completions.create({ model: "m", messages: turn1, ...greedy });
  const turn2 = [...turn1, { role: "assistant", content: a1.choices[0].message.content ?? "" },
                 { role: "user", content: "And a second one?" }];
  const cached = await client.chat.completions.create({ model: "m", messages: turn2, ...greedy });
  assert.ok(cached.usage.prompt_tokens_details.cached_tokens >= 64, JSON.stringify(cached.usage));
  const hits = await metric(main.base, "prefix_cache_hits_total");
  assert.ok(hits >= 1);
  const uncached = await keyed.chat.completions.create({ model: "m", messages: turn2, ...greedy });
  assert.equal(uncached.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(uncached.usage.prompt_tokens, cached.usage.prompt_tokens);
  assert.equal(cached.choices[0].message.reasoning_content, uncached.choices[0].message.reasoning_content);
  assert.equal(cached.choices[0].message.content, uncached.choices[0].message.content);
});

test("a system message in the middle is merged, not refused", async () => {
  const r = await client.chat.completions.create({ model: "m", ...greedy, messages: [
    { role: "user", content: "hi" }, { role: "system", content: "late rule" }, { role: "user", content: "again" }] });
  assert.equal(r.choices[0].finish_reason, "length");
});

test("bad requests get OpenAI-style errors", async () => {
  const post = (base, body, headers = {}) => fetch(`${base}/v1/chat/completions`, { method: "POST", body, headers });
  const cases = [
    ["{not json", /not valid JSON/],
    [JSON.stringify([1, 2]), /JSON object/],
    [JSON.stringify({ messages: "hi" }), /'messages'/],
    [JSON.stringify({ messages: [{ role: "wizard", content: "x" }] }), /unknown role 'wizard'/],
    [JSON.stringify({ messages: [{ role: "user", content: "x" }], temperature: "hot" }), /'temperature': must be a number/],
    [JSON.stringify({ messages: [{ role: "user", content: "x" }], temperature: 9 }), /between 0 and 2/],
    [JSON.stringify({ messages: [{ role: "user", content: "x" }], n: 2 }), /only n = 1/],
    [JSON.stringify({ messages: [{ role: "user", content: "x" }], max_tokens: 0 }), /'max_tokens'/],
    [JSON.stringify({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }), /text only/],
    [JSON.stringify({ messages: [{ role: "user", content: "x" }], logit_bias: { "-5": 1 } }), /not a token id/],
    [JSON.stringify({ messages: [{ role: "user", content: "x" }], top_logprobs: 2 }), /needs logprobs/],
  ];
  for (const [body, pattern] of cases) {
    const r = await post(main.base, body);
    assert.equal(r.status, 400, body);
    const e = await r.json();
    assert.match(e.error.message, pattern, body);
    assert.equal(e.error.type, "invalid_request_error");
  }
  assert.equal((await fetch(`${main.base}/v1/nothing`)).status, 404);
  // the strict server: a key, a small context, a small body limit
  const ok = { messages: [{ role: "user", content: "x" }], max_tokens: 2 };
  assert.equal((await post(strict.base, JSON.stringify(ok))).status, 401);
  assert.equal((await post(strict.base, JSON.stringify(ok), { Authorization: "Bearer wrong" })).status, 401);
  const auth = { Authorization: `Bearer ${KEY}` };
  assert.equal((await post(strict.base, JSON.stringify(ok), auth)).status, 200);
  const long = await post(strict.base, JSON.stringify({ messages: [{ role: "user", content: "word ".repeat(600) }] }), auth);
  assert.equal(long.status, 400);
  assert.match((await long.json()).error.message, /the prompt has \d+ tokens, but the context is 512 tokens/);
  const tooMany = await post(strict.base, JSON.stringify({ ...ok, max_tokens: 600 }), auth);
  assert.match((await tooMany.json()).error.message, /more than the context of 512/);
  const huge = await post(strict.base, JSON.stringify({ messages: [{ role: "user", content: "y".repeat(30000) }] }), auth);
  assert.equal(huge.status, 413);
  assert.equal((await fetch(`${strict.base}/health`)).status, 200);
});

test("a full queue answers 503 and the server goes on", async () => {
  const auth = { Authorization: `Bearer ${KEY}` };
  const body = JSON.stringify({ messages: [{ role: "user", content: "busy" }], max_tokens: 400 });
  const statuses = await Promise.all(Array.from({ length: 4 }, () =>
    fetch(`${strict.base}/v1/chat/completions`, { method: "POST", body, headers: auth }).then(async (r) => {
      const j = await r.json();
      if (r.status === 503) assert.match(j.error.message, /busy/);
      return r.status;
    })));
  assert.ok(statuses.includes(503), String(statuses));
  assert.ok(statuses.includes(200), String(statuses));
});
