// Starts `lily serve` on a free loopback port for a test and stops it after.
import { spawn } from "node:child_process";

export const LILY = process.env.LILY_BINARY;
export const MODEL = process.env.LILY_MODEL_DIR;

export async function startServer(extraArgs = []) {
  if (!LILY || !MODEL) throw new Error("LILY_BINARY and LILY_MODEL_DIR must be set");
  const proc = spawn(LILY, ["serve", MODEL, "--port", "0", ...extraArgs], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("lily serve did not start:\n" + log)), 30000);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on("exit", (code) => reject(new Error(`lily serve exited with ${code}:\n${log}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    const r = await fetch(`${base}/health`).catch(() => null);
    if (r && r.status === 200) break;
    if (i > 300) throw new Error("the model did not load:\n" + log);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    port,
    log: () => log,
    async stop() {
      const exited = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGTERM");
      await exited;
    },
  };
}

export async function metric(base, name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = new RegExp(`^lily_${name} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : undefined;
}

// The number of tokens the chat template makes of `messages` (Chat
// Completions form, tool-call arguments as objects) with `tools`, rendered by
// `lily template` and counted by the server: what a request that means the
// same conversation must have as its prompt.
export async function templateTokens(base, messages, tools, extraArgs = []) {
  const { execFileSync } = await import("node:child_process");
  const { mkdtempSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const dir = mkdtempSync(join(tmpdir(), "lily-"));
  writeFileSync(join(dir, "m.json"), JSON.stringify(messages));
  const args = ["template", "--model", MODEL, "--messages", join(dir, "m.json"), ...extraArgs];
  if (tools) {
    writeFileSync(join(dir, "t.json"), JSON.stringify(tools));
    args.push("--tools", join(dir, "t.json"));
  }
  const prompt = execFileSync(LILY, args, { encoding: "utf8" });
  const r = await fetch(`${base}/tokenize`, { method: "POST", body: JSON.stringify({ content: prompt }) });
  return { prompt, tokens: (await r.json()).tokens.length };
}
