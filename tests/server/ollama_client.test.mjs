// lily serve's Ollama API driven by the official ollama client for Node:
// chat and generate, whole and streamed (NDJSON), thinking on and off,
// options mapped to the sampler, a tool round trip, generate's context,
// the model listing endpoints, and the 501 for what this engine does not do.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Ollama } from "ollama";
import { startServer, templateTokens } from "./lily_server.mjs";

let main, cold;
let ollama, ollamaCold;

before(async () => {
  [main, cold] = await Promise.all([startServer(["--parallel", "4"]), startServer(["--no-prefix-cache"])]);
  ollama = new Ollama({ host: main.base });
  ollamaCold = new Ollama({ host: cold.base });
});
after(async () => {
  await Promise.all([main?.stop(), cold?.stop()]);
});

const options = { temperature: 0, num_predict: 16 };

test("list, show, ps and version describe the loaded model", async () => {
  const list = await ollama.list();
  assert.equal(list.models.length, 1);
  assert.equal(list.models[0].name, "lily-tiny");
  assert.equal(list.models[0].details.family, "qwen3_5_moe");
  assert.ok(list.models[0].size > 0);
  const show = await ollama.show({ model: "lily-tiny:latest" });
  assert.ok(show.capabilities.includes("tools"));
  assert.match(show.template, /<tool_call>/);
  assert.equal(show.model_info["general.architecture"], "qwen3_5_moe");
  await assert.rejects(ollama.show({ model: "llama3" }), (e) => e.status_code === 404 && /not found/.test(e.error));
  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, "lily-tiny");
  assert.match((await ollama.version()).version, /^\d+\.\d+\.\d+$/);
});

test("a chat answer, whole and streamed, is the same answer", async () => {
  const req = { model: "lily-tiny", messages: [{ role: "user", content: "Hello there" }], options };
  const whole = await ollama.chat({ ...req, stream: false });
  assert.equal(whole.done, true);
  assert.equal(whole.done_reason, "length");
  assert.equal(whole.eval_count, 16);
  assert.ok(whole.message.thinking.length > 0, "thinking is on by default");
  let thinking = "", content = "", last;
  for await (const part of await ollama.chat({ ...req, stream: true })) {
    thinking += part.message.thinking ?? "";
    content += part.message.content;
    last = part;
  }
  assert.equal(thinking, whole.message.thinking);
  assert.equal(content, whole.message.content);
  assert.equal(last.done, true);
  assert.equal(last.eval_count, 16);
  const off = await ollama.chat({ ...req, think: false });
  assert.equal(off.message.thinking, undefined);
  assert.ok(off.message.content.length > 0);
});

test("a tool round trip is the template's conversation", async () => {
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
  const messages = [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris" } } }] },
    { role: "tool", content: "sunny, 21 C", tool_name: "get_weather" },
  ];
  const r = await ollamaCold.chat({ model: "lily-tiny", messages, tools, options, stream: false });
  const expected = await templateTokens(cold.base, messages.map(({ tool_name, ...m }) => m), tools);
  assert.match(expected.prompt, /<parameter=city>\nParis\n<\/parameter>/);
  assert.equal(r.prompt_eval_count, expected.tokens);
});

test("generate, whole and streamed, and its context continues the conversation", async () => {
  const req = { model: "lily-tiny", prompt: "Once upon a time", system: "Tell stories.", think: false, options };
  const whole = await ollama.generate({ ...req, stream: false });
  let text = "";
  let last;
  for await (const part of await ollama.generate({ ...req, stream: true })) {
    text += part.response;
    last = part;
  }
  assert.equal(text, whole.response);
  assert.deepEqual(last.context, whole.context);
  assert.equal(whole.context.length, whole.prompt_eval_count + whole.eval_count);
  const next = await ollamaCold.generate({ ...req, prompt: "And then?", context: whole.context, stream: false });
  assert.deepEqual(next.context.slice(0, whole.context.length), whole.context);
  assert.ok(next.prompt_eval_count > whole.context.length);
  // raw: the prompt as it is, no template
  const raw = await ollamaCold.generate({ model: "lily-tiny", prompt: "abc", raw: true, options, stream: false });
  assert.ok(raw.prompt_eval_count <= 2);
  // an empty prompt only loads the model
  const load = await ollama.generate({ model: "lily-tiny", prompt: "", stream: false });
  assert.equal(load.done_reason, "load");
});

test("options reach the sampler: a stop string and a seed", async () => {
  const req = { model: "lily-tiny", messages: [{ role: "user", content: "Say something" }], think: false, stream: false };
  const free = await ollama.chat({ ...req, options });
  const text = free.message.content;
  const stop = [...text.slice(3)].slice(0, 2).join("");
  const stopped = await ollama.chat({ ...req, options: { ...options, stop: [stop] } });
  assert.equal(stopped.message.content, text.slice(0, text.indexOf(stop)));
  assert.equal(stopped.done_reason, "stop");
  const a = await ollama.chat({ ...req, options: { temperature: 1, seed: 42, num_predict: 12 } });
  const b = await ollama.chat({ ...req, options: { temperature: 1, seed: 42, num_predict: 12 } });
  assert.equal(a.message.content, b.message.content);
});

test("errors come in Ollama's shape; what is not served is a 501", async () => {
  await assert.rejects(ollama.embed({ model: "lily-tiny", input: "x" }), (e) => e.status_code === 501 && /not implemented/.test(e.error));
  await assert.rejects(ollama.pull({ model: "llama3" }), (e) => e.status_code === 501);
  const cases = [
    [{ model: "m", messages: [{ role: "user", content: "x" }], options: { num_predict: 0 } }, /'options\.num_predict'/],
    [{ model: "m", messages: [{ role: "user", content: "x" }], options: { temperature: "hot" } }, /'temperature'/],
    [{ model: "m", messages: [{ role: "user", content: "x" }], format: { type: "object" } }, /JSON schema is not supported/],
    [{ model: "m", messages: [{ role: "user", content: "x", images: ["aGk="] }] }, /text only/],
    [{ model: "m", messages: [{ role: "user", content: "x" }], think: "maybe" }, /'think'/],
  ];
  for (const [body, pattern] of cases) {
    const r = await fetch(`${main.base}/api/chat`, { method: "POST", body: JSON.stringify(body) });
    assert.equal(r.status, 400, JSON.stringify(body));
    const e = await r.json();
    assert.equal(typeof e.error, "string");
    assert.match(e.error, pattern, JSON.stringify(body));
  }
  await assert.rejects(ollama.generate({ model: "m", prompt: "x", context: [-1] }), (e) => e.status_code === 400);
});
