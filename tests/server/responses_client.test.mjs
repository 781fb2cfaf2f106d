// lily serve's Responses API driven by the official OpenAI client for Node:
// whole and streamed (the client's own event accumulator must accept the
// stream), reasoning on and off, a function-call round trip, stored
// responses and previous_response_id resuming from the prefix cache, errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, templateTokens } from "./lily_server.mjs";

let main, keyed;
let client;
const KEY = "resp-key-1";

before(async () => {
  [main, keyed] = await Promise.all([startServer(["--parallel", "4"]), startServer(["--api-key", KEY])]);
  client = new OpenAI({ baseURL: `${main.base}/v1`, apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  await Promise.all([main?.stop(), keyed?.stop()]);
});

const greedy = { model: "lily-tiny", temperature: 0, max_output_tokens: 20 };

const weather = { type: "function", name: "get_weather", description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

test("an answer, whole and streamed, is the same answer", async () => {
  const whole = await client.responses.create({ ...greedy, input: "Hello there" });
  assert.equal(whole.object, "response");
  assert.equal(whole.status, "incomplete");
  assert.equal(whole.incomplete_details.reason, "max_output_tokens");
  assert.equal(whole.output[0].type, "reasoning", "thinking is on by default");
  assert.ok(whole.output[0].content[0].text.length > 0);
  assert.equal(whole.usage.output_tokens, 20);
  assert.equal(whole.usage.total_tokens, whole.usage.input_tokens + 20);
  assert.ok(whole.usage.output_tokens_details.reasoning_tokens > 0);

  // the client's helper accumulates the typed events into a response
  const stream = client.responses.stream({ ...greedy, input: "Hello there" });
  const seen = new Set();
  let deltas = "";
  for await (const ev of stream) {
    seen.add(ev.type);
    if (ev.type === "response.reasoning_text.delta") deltas += ev.delta;
  }
  const final = await stream.finalResponse();
  for (const t of ["response.created", "response.in_progress", "response.output_item.added",
                   "response.content_part.added", "response.reasoning_text.delta", "response.output_item.done",
                   "response.incomplete"])
    assert.ok(seen.has(t), `${t} in ${[...seen]}`);
  assert.deepEqual(final.output.map((o) => o.type), whole.output.map((o) => o.type));
  assert.equal(final.output[0].content[0].text, whole.output[0].content[0].text);
  assert.equal(deltas, whole.output[0].content[0].text);
  assert.equal(final.output_text, whole.output_text);
});

test("reasoning effort none answers in a message alone", async () => {
  const r = await client.responses.create({ ...greedy, input: [{ role: "user", content: "No thinking" }],
    reasoning: { effort: "none" }, instructions: "Be brief." });
  assert.deepEqual(r.output.map((o) => o.type), ["message"]);
  assert.equal(r.output[0].role, "assistant");
  assert.ok(r.output_text.length > 0);
  assert.equal(r.instructions, "Be brief.");
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
  let text = "";
  const s = await client.responses.create({ ...greedy, input: [{ role: "user", content: "No thinking" }],
    reasoning: { effort: "none" }, instructions: "Be brief.", stream: true });
  for await (const ev of s) if (ev.type === "response.output_text.delta") text += ev.delta;
  assert.equal(text, r.output_text);
});

test("a function-call round trip is the template's conversation", async () => {
  const input = [
    { role: "user", content: "Weather in Paris?" },
    { type: "function_call", call_id: "call_7", name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) },
    { type: "function_call_output", call_id: "call_7", output: "sunny, 21 C" },
  ];
  const r = await client.responses.create({ ...greedy, input, tools: [weather], instructions: "You are terse." });
  const expected = await templateTokens(main.base, [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: "", tool_calls: [{ id: "call_7", type: "function",
      function: { name: "get_weather", arguments: { city: "Paris" } } }] },
    { role: "tool", tool_call_id: "call_7", content: "sunny, 21 C" },
  ], [{ type: "function", function: { name: weather.name, description: weather.description, parameters: weather.parameters } }]);
  assert.match(expected.prompt, /<parameter=city>\nParis\n<\/parameter>/);
  assert.match(expected.prompt, /sunny, 21 C/);
  assert.equal(r.usage.input_tokens, expected.tokens);
  assert.deepEqual(r.tools, [weather]);
  // a forced call starts the answer inside the call (no reasoning first)
  const forced = await client.responses.create({ ...greedy, max_output_tokens: 6, input: "look it up",
    tools: [weather], tool_choice: { type: "function", name: "get_weather" } });
  assert.ok(!forced.output.some((o) => o.type === "reasoning"));
  await assert.rejects(client.responses.create({ ...greedy, input: "x", tools: [weather],
    tool_choice: { type: "function", name: "nope" } }), (e) => e.status === 400 && /no tool is named 'nope'/.test(e.message));
});

test("previous_response_id continues a stored conversation from the prefix cache", async () => {
  const system = "You are careful. " + Array.from({ length: 30 }, (_, i) => `Rule ${i}: be exact.`).join(" ");
  const first = await client.responses.create({ ...greedy, instructions: system, input: "First question?" });
  const next = await client.responses.create({ ...greedy, instructions: system, input: "And a second one?",
    previous_response_id: first.id });
  assert.equal(next.previous_response_id, first.id);
  assert.ok(next.usage.input_tokens > first.usage.input_tokens + 5);
  assert.ok(next.usage.input_tokens_details.cached_tokens >= 64, JSON.stringify(next.usage));
  // the stored response reads back, then is deleted
  const got = await client.responses.retrieve(first.id);
  assert.equal(got.id, first.id);
  assert.equal(got.output_text, first.output_text);
  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id), (e) => e.status === 404);
  await assert.rejects(client.responses.create({ ...greedy, input: "x", previous_response_id: first.id }),
    (e) => e.status === 404 && /previous_response_id|no stored response/.test(e.message));
  // store: false keeps nothing
  const unstored = await client.responses.create({ ...greedy, input: "x", store: false });
  await assert.rejects(client.responses.retrieve(unstored.id), (e) => e.status === 404);
});

test("bad requests get OpenAI-style errors naming the field", async () => {
  const cases = [
    [{ ...greedy }, /'input': is required/],
    [{ ...greedy, input: 5 }, /'input'/],
    [{ ...greedy, input: [{ type: "item_reference", id: "x" }] }, /'input\[0\]\.type'/],
    [{ ...greedy, input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }, /text only/],
    [{ ...greedy, input: "x", tools: [{ type: "web_search" }] }, /function tools/],
    [{ ...greedy, input: "x", max_output_tokens: 0 }, /'max_output_tokens'/],
    [{ ...greedy, input: "x", reasoning: { effort: "huge" } }, /'reasoning\.effort'/],
    [{ ...greedy, input: "x", temperature: 7 }, /'temperature'/],
  ];
  for (const [body, pattern] of cases) {
    const r = await fetch(`${main.base}/v1/responses`, { method: "POST", body: JSON.stringify(body) });
    assert.equal(r.status, 400, JSON.stringify(body));
    const e = await r.json();
    assert.match(e.error.message, pattern, JSON.stringify(body));
    assert.equal(e.error.type, "invalid_request_error");
  }
  const noKey = new OpenAI({ baseURL: `${keyed.base}/v1`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(noKey.responses.create({ ...greedy, input: "x" }), (e) => e.status === 401);
  const withKey = new OpenAI({ baseURL: `${keyed.base}/v1`, apiKey: KEY, maxRetries: 0 });
  assert.equal((await withKey.responses.create({ ...greedy, max_output_tokens: 2, input: "x" })).usage.output_tokens, 2);
});
