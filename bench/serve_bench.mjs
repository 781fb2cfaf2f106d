// End-to-end server measurements against a running `lily serve`:
//   node bench/serve_bench.mjs URL [--history TOKENS] [--streams 1,4,16] [--decode-tokens N]
// 1. time to first token of a conversation's second turn after a first turn
//    with a long history (run it against a server with and one without the
//    prefix cache to compare);
// 2. aggregate decode tokens/s with 1, 4 and 16 concurrent streams.
// Greedy throughout; only Node's own fetch is used.
const args = process.argv.slice(2);
const base = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const historyTokens = Number(opt("--history", 4096));
const streams = opt("--streams", "1,4,16").split(",").map(Number).filter(Boolean);
const decodeTokens = Number(opt("--decode-tokens", 64));
if (!base) {
  console.error("usage: node bench/serve_bench.mjs URL [--history TOKENS] [--streams 1,4,16] [--decode-tokens N]");
  process.exit(2);
}

// Streams one chat request; returns the time to the first token, the times
// of every chunk with text, and the usage.
async function stream(messages, maxTokens, extra = {}) {
  const t0 = performance.now();
  const r = await fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages, max_tokens: maxTokens, temperature: 0, stream: true,
                           stream_options: { include_usage: true }, ...extra }),
  });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  const decoder = new TextDecoder();
  let buf = "", first = null, last = null, usage = null, text = "";
  for await (const part of r.body) {
    buf += decoder.decode(part, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const j = JSON.parse(line.slice(6));
      if (j.usage) usage = j.usage;
      const d = j.choices?.[0]?.delta;
      if (d && (d.content || d.reasoning_content)) {
        const now = performance.now();
        first ??= now;
        last = now;
        text += (d.reasoning_content ?? "") + (d.content ?? "");
      }
    }
  }
  return { ttft: (first - t0) / 1000, first, last, usage, text };
}

async function tokenCount(text) {
  const r = await fetch(`${base}/tokenize`, { method: "POST", body: JSON.stringify({ content: text }) });
  return (await r.json()).tokens.length;
}

// A history of about `historyTokens` tokens: varied sentences, as an agent's context would be.
let history = "";
for (let i = 0; (await tokenCount(history)) < historyTokens; i += 40) {
  for (let k = i; k < i + 40; ++k)
    history += `Note ${k}: the build step ${k % 17} wrote ${(k * 7919) % 10007} bytes to file_${k % 23}.txt. `;
}
const system = { role: "system", content: "You are a coding agent. Context:\n" + history };
const turn1 = [system, { role: "user", content: "Summarise the notes." }];
const a1 = await stream(turn1, 8);
const turn2 = [...turn1, { role: "assistant", content: a1.text }, { role: "user", content: "Which file is largest?" }];
const a2 = await stream(turn2, 8);
console.log(`history: ${a1.usage.prompt_tokens} prompt tokens in turn 1, ${a2.usage.prompt_tokens} in turn 2`);
console.log(`turn 1 time to first token: ${a1.ttft.toFixed(2)} s (cached ${a1.usage.prompt_tokens_details.cached_tokens})`);
console.log(`turn 2 time to first token: ${a2.ttft.toFixed(2)} s (cached ${a2.usage.prompt_tokens_details.cached_tokens})`);

for (const n of streams) {
  const runs = await Promise.all(Array.from({ length: n }, (_, i) =>
    stream([{ role: "user", content: `Stream ${i}: count to ten.` }], decodeTokens,
           { chat_template_kwargs: { enable_thinking: false } })));
  // decode throughput: tokens after each stream's first, over the span from the
  // first stream's first token to the last stream's last token
  const tokens = runs.reduce((s, r) => s + r.usage.completion_tokens - 1, 0);
  const span = (Math.max(...runs.map((r) => r.last)) - Math.min(...runs.map((r) => r.first))) / 1000;
  console.log(`${n} stream(s): ${tokens + n} tokens, aggregate decode ${(tokens / span).toFixed(1)} tok/s ` +
              `(per stream ${(tokens / span / n).toFixed(1)} tok/s)`);
}
