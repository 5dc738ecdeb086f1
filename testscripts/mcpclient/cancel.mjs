// Cancels a session_run with the official TypeScript client (an
// AbortSignal on callTool, which sends notifications/cancelled) and checks
// that the cell is interrupted, the session keeps its state, and no answer
// comes for the cancelled request; testscripts/testdata/mcp/cancel.txtar
// runs it.
//
//   node cancel.mjs MARKER CMD ARGS...   spawn CMD (rlm mcp ...) over stdio
//
// MARKER is a file the looping cell creates once it has printed. Prints one
// "ok ..." line per check; the first failed check prints "FAIL ..." and
// exits 1.
import { existsSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [marker, cmd, ...args] = process.argv.slice(2);

function fail(what, detail) {
  console.log(`FAIL ${what}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  process.exit(1);
}

function check(what, cond, detail) {
  if (!cond) fail(what, detail);
  console.log(`ok ${what}`);
}

async function main() {
  const transport = new StdioClientTransport({ command: cmd, args, env: { ...process.env }, stderr: "inherit" });
  const client = new Client({ name: "rlm-test", version: "1.0.0" });
  // The SDK reports an answer to a request it no longer waits for (the
  // cancelled one) here.
  const errors = [];
  client.onerror = (e) => errors.push(String(e?.message || e));
  await client.connect(transport);
  const call = (name, a, opts = {}) => client.callTool({ name, arguments: a }, undefined, { timeout: 120000, ...opts });

  let r = await call("session_open", {});
  const id = r.structuredContent?.session_id;
  check("session_open", !r.isError && typeof id === "string", r);
  r = await call("session_run", { session_id: id, code: "x = 41" });
  check("x = 41", !r.isError, r);

  const abort = new AbortController();
  const loop = call("session_run", {
    session_id: id, timeout_seconds: 600,
    code: `import time\ni = 0\nwhile True:\n    print("tick", i, flush=True)\n    i += 1\n    open(${JSON.stringify(marker)}, "w").close()\n    time.sleep(0.01)`,
  }, { signal: abort.signal });
  const deadline = Date.now() + 120000;
  while (!existsSync(marker)) {
    if (Date.now() > deadline) fail("the looping cell never started", marker);
    await new Promise((res) => setTimeout(res, 20));
  }
  abort.abort("the test cancels it");
  let err;
  try {
    await loop;
  } catch (e) {
    err = e;
  }
  check("the cancelled call is abandoned", err !== undefined, "it resolved");

  // Cells run one at a time: this answer comes after any the cancelled
  // request would have had.
  r = await call("session_run", { session_id: id, code: "x + 1, i > 0" });
  check("the session keeps its state", !r.isError && r.structuredContent.result === "(42, True)", r);
  r = await call("session_run", { session_id: id, code: "x" });
  check("and runs on", !r.isError && r.structuredContent.result === "41", r);
  check("no answer to the cancelled request", errors.length === 0, errors);

  await client.close();
  console.log("done");
}

main().catch((e) => fail("exception", e?.stack || String(e)));
