// The bundled trained model through `lily serve` and the official OpenAI
// client for Node, on held-out examples of every task (tests/data/trained,
// written by tools/train_tiny.py from a seed the training never used): a
// weather question comes back as `tool_calls` with the city as its argument,
// the tool's result as an answer that uses it, thinking as
// `reasoning_content`, and arithmetic and text tasks as their answers;
// streamed answers are the whole ones.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { startServer } from "./lily_server.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const PER_KIND = 4;

let server, client;
before(async () => {
  server = await startServer(["--parallel", "4"]);
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  await server?.stop();
});

function kindOf(e) {
  if (e.family !== "tool") return e.family;
  if (e.expect.call) return "call";
  return e.messages.length > 1 ? "answer" : "none";
}

// The first PER_KIND held-out examples of each kind, thinking on and off.
function examples() {
  const lines = readFileSync(join(HERE, "..", "data", "trained", "heldout.jsonl"), "utf8").split("\n").filter(Boolean);
  const taken = new Map();
  const out = [];
  for (const e of lines.map((l) => JSON.parse(l))) {
    const key = `${kindOf(e)}/${e.thinking}`;
    if ((taken.get(key) ?? 0) >= PER_KIND) continue;
    taken.set(key, (taken.get(key) ?? 0) + 1);
    out.push(e);
  }
  return out;
}

// The example's conversation in Chat Completions form: tool-call arguments as JSON text.
function request(e) {
  const messages = e.messages.map((m) => m.tool_calls
    ? { ...m, content: null, tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function,
        arguments: JSON.stringify(c.function.arguments) } })) }
    : m);
  return { model: "lily-tiny", messages, ...(e.tools ? { tools: e.tools } : {}), temperature: 0, max_tokens: 96,
           chat_template_kwargs: { enable_thinking: e.thinking } };
}

// Whether a message is the answer the example asks for; the reason when not.
function check(e, msg, finish) {
  if (e.thinking !== Boolean(msg.reasoning_content)) return `reasoning_content ${JSON.stringify(msg.reasoning_content)}`;
  const kind = kindOf(e);
  if (kind === "call") {
    if (finish !== "tool_calls" || msg.tool_calls?.length !== 1) return `no single call: ${JSON.stringify(msg)}`;
    const fn = msg.tool_calls[0].function;
    if (fn.name !== e.expect.call) return `called ${fn.name}`;
    try {
      assert.deepEqual(JSON.parse(fn.arguments), e.expect.arguments);
    } catch {
      return `arguments ${fn.arguments}`;
    }
    return null;
  }
  if (msg.tool_calls?.length) return `an unwanted call: ${JSON.stringify(msg.tool_calls)}`;
  if (finish !== "stop") return `finish_reason ${finish}`;
  // what to find: the number, the text, "sky and temp" from the tool's result
  const want = typeof e.expect === "string" ? e.expect : e.expect.call === null ? null : String(e.expect);
  const text = msg.content ?? "";
  if (kind === "arithmetic" && !text.endsWith(`= ${want}.`)) return `content ${JSON.stringify(text)}`;
  if (want !== null && !text.includes(want)) return `content ${JSON.stringify(text)}`;
  return null;
}

test("held-out questions of every kind get their answers and calls", async () => {
  const all = examples();
  assert.ok(all.length >= 20, `only ${all.length} examples`);
  const misses = [];
  await Promise.all(all.map(async (e) => {
    const r = await client.chat.completions.create(request(e));
    const why = check(e, r.choices[0].message, r.choices[0].finish_reason);
    if (why) misses.push(`${kindOf(e)} ${JSON.stringify(e.messages.at(-1).content)}: ${why}`);
  }));
  // the model is right on at least 95% of held-out examples (tests/runtime's
  // TrainedModel test counts over hundreds); here a miss is one in twenty
  assert.ok(misses.length <= Math.floor(all.length / 20), `${misses.length} of ${all.length} missed:\n${misses.join("\n")}`);
});

test("a streamed tool call and a streamed thought are the whole answer's", async () => {
  const all = examples();
  for (const kind of ["call", "arithmetic"]) {
    const e = all.find((x) => kindOf(x) === kind && x.thinking);
    assert.ok(e, `no held-out ${kind} example with thinking`);
    const whole = (await client.chat.completions.create(request(e))).choices[0];
    const stream = await client.chat.completions.create({ ...request(e), stream: true });
    let reasoning = "", content = "", finish = null;
    const calls = [];
    for await (const chunk of stream)
      for (const ch of chunk.choices) {
        reasoning += ch.delta?.reasoning_content ?? "";
        content += ch.delta?.content ?? "";
        for (const c of ch.delta?.tool_calls ?? []) {
          calls[c.index] ??= { name: "", arguments: "" };
          calls[c.index].name += c.function?.name ?? "";
          calls[c.index].arguments += c.function?.arguments ?? "";
        }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    assert.equal(reasoning, whole.message.reasoning_content ?? "");
    assert.equal(content, whole.message.content ?? "");
    assert.equal(finish, whole.finish_reason);
    assert.deepEqual(calls, (whole.message.tool_calls ?? []).map((c) => ({ name: c.function.name,
                                                                         arguments: c.function.arguments })));
  }
});
