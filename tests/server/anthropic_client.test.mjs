// lily serve's Messages API driven by the official Anthropic client for
// Node: whole and streamed (the client's MessageStream must accept the
// events), thinking on and off, a tool_use / tool_result round trip,
// count_tokens, stop sequences, the prefix cache in usage, x-api-key and
// errors in Anthropic's shape.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, templateTokens } from "./lily_server.mjs";

let main, keyed;
let client;
const KEY = "sk-ant-test";

before(async () => {
  [main, keyed] = await Promise.all([startServer(["--parallel", "4"]), startServer(["--api-key", KEY, "--max-body", "20000"])]);
  client = new Anthropic({ baseURL: main.base, apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  await Promise.all([main?.stop(), keyed?.stop()]);
});

const greedy = { model: "lily-tiny", temperature: 0, max_tokens: 20 };

const weather = { name: "get_weather", description: "Weather of a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };

test("a message, whole and streamed, is the same message", async () => {
  const system = "Be brief. " + Array.from({ length: 30 }, (_, i) => `Rule ${i}: be exact.`).join(" ");
  const params = { ...greedy, system, messages: [{ role: "user", content: "Hello there" }] };
  const whole = await client.messages.create(params);
  assert.equal(whole.type, "message");
  assert.equal(whole.role, "assistant");
  assert.deepEqual(whole.content.map((b) => b.type), ["text"], "this API thinks only when asked");
  assert.equal(whole.stop_reason, "max_tokens");
  assert.equal(whole.usage.output_tokens, 20);

  const stream = client.messages.stream(params);
  let text = "";
  stream.on("text", (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(final.usage.output_tokens, 20);
  // the second identical request reads its prompt from the cache
  assert.ok(final.usage.cache_read_input_tokens >= 64, JSON.stringify(final.usage));
  assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens,
               whole.usage.input_tokens + whole.usage.cache_read_input_tokens);
});

test("thinking, when enabled, comes first as a thinking block", async () => {
  const params = { ...greedy, thinking: { type: "enabled", budget_tokens: 1024 },
                   messages: [{ role: "user", content: "Think first" }] };
  const whole = await client.messages.create(params);
  assert.equal(whole.content[0].type, "thinking");
  assert.ok(whole.content[0].thinking.length > 0);
  const final = await client.messages.stream(params).finalMessage();
  assert.equal(final.content[0].thinking, whole.content[0].thinking);
});

test("a tool_use / tool_result round trip is the template's conversation, and count_tokens agrees", async () => {
  const messages = [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: [{ type: "text", text: "Let me look." },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "sunny, 21 C" },
      { type: "text", text: "Thanks!" }] },
  ];
  const r = await client.messages.create({ ...greedy, system: "You are terse.", messages, tools: [weather],
    tool_choice: { type: "auto" } });
  const expected = await templateTokens(main.base, [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: "Let me look.", tool_calls: [{ id: "toolu_1", type: "function",
      function: { name: "get_weather", arguments: { city: "Paris" } } }] },
    { role: "tool", tool_call_id: "toolu_1", content: "sunny, 21 C" },
    { role: "user", content: "Thanks!" },
  ], [{ type: "function", function: { name: weather.name, description: weather.description,
                                      parameters: weather.input_schema } }], ["--kwarg", "enable_thinking=false"]);
  assert.match(expected.prompt, /<tool_response>\nsunny, 21 C\n<\/tool_response>/);
  assert.equal(r.usage.input_tokens + r.usage.cache_read_input_tokens, expected.tokens);
  const counted = await client.messages.countTokens({ model: "lily-tiny", system: "You are terse.", messages,
                                                     tools: [weather] });
  assert.equal(counted.input_tokens, expected.tokens);
  // a forced tool starts the answer inside the call
  const forced = await client.messages.create({ ...greedy, max_tokens: 6, messages: [{ role: "user", content: "x" }],
    tools: [weather], tool_choice: { type: "tool", name: "get_weather" } });
  assert.ok(!forced.content.some((b) => b.type === "thinking"));
});

test("a stop sequence ends the message and is named", async () => {
  const params = { ...greedy, messages: [{ role: "user", content: "Say something" }] };
  const free = await client.messages.create(params);
  const text = free.content[0].text;
  const stop = [...text.slice(4)].slice(0, 2).join("");  // two characters from inside the answer
  const stopped = await client.messages.create({ ...params, stop_sequences: [stop] });
  assert.equal(stopped.stop_reason, "stop_sequence");
  assert.equal(stopped.stop_sequence, stop);
  assert.equal(stopped.content[0].text, text.slice(0, text.indexOf(stop)));
});

test("x-api-key is the key, and errors come in Anthropic's shape", async () => {
  const ok = new Anthropic({ baseURL: keyed.base, apiKey: KEY, maxRetries: 0 });
  assert.equal((await ok.messages.create({ ...greedy, max_tokens: 2, messages: [{ role: "user", content: "x" }] }))
    .usage.output_tokens, 2);
  const bad = new Anthropic({ baseURL: keyed.base, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.messages.create({ ...greedy, messages: [{ role: "user", content: "x" }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === "authentication_error");
  const cases = [
    [{ model: "m", messages: [{ role: "user", content: "x" }] }, /'max_tokens': is required/],
    [{ ...greedy, messages: [] }, /'messages'/],
    [{ ...greedy, messages: [{ role: "system", content: "x" }] }, /'messages\[0\]\.role'/],
    [{ ...greedy, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }, /'messages\[0\]\.content\[0\]\.type'/],
    [{ ...greedy, messages: [{ role: "user", content: "x" }, { role: "assistant", content: "prefill" }] }, /prefilled/],
    [{ ...greedy, messages: [{ role: "user", content: "x" }], tools: [{ type: "web_search_20250305", name: "w" }] }, /server tools/],
    [{ ...greedy, messages: [{ role: "user", content: "x" }], thinking: { type: "maybe" } }, /'thinking'/],
  ];
  for (const [body, pattern] of cases) {
    const r = await fetch(`${main.base}/v1/messages`, { method: "POST", body: JSON.stringify(body) });
    assert.equal(r.status, 400, JSON.stringify(body));
    const e = await r.json();
    assert.equal(e.type, "error");
    assert.equal(e.error.type, "invalid_request_error");
    assert.match(e.error.message, pattern, JSON.stringify(body));
  }
  await assert.rejects(client.messages.create({ ...greedy, messages: [] }), (e) => e instanceof Anthropic.BadRequestError);
  const huge = await fetch(`${keyed.base}/v1/messages`, { method: "POST", headers: { "x-api-key": KEY },
    body: JSON.stringify({ ...greedy, messages: [{ role: "user", content: "y".repeat(30000) }] }) });
  assert.equal(huge.status, 413);
  assert.equal((await huge.json()).error.type, "request_too_large");
  const missing = await fetch(`${main.base}/v1/messages/nothing`, { method: "POST", body: "{}" });
  assert.equal(missing.status, 404);
  assert.equal((await missing.json()).error.type, "not_found_error");
});
