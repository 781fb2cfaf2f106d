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
