// Drives rlm's MCP server with the official TypeScript client and checks
// every answer; testscripts/testdata/mcp/*.txtar runs it.
//
//   node client.mjs stdio CMD ARGS...   spawn CMD (rlm mcp ...) and talk over stdio
//   node client.mjs http URL TOKEN      streamable HTTP with a bearer token
//   node client.mjs unauth URL          expect 401 without the token
//
// Prints one "ok ..." line per check; the first failed check prints
// "FAIL ..." and exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, ...rest] = process.argv.slice(2);

function fail(what, detail) {
  console.log(`FAIL ${what}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  process.exit(1);
}

function check(what, cond, detail) {
  if (!cond) fail(what, detail);
  console.log(`ok ${what}`);
}

const text = (res) => (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");

async function unauth(url) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  check("raw POST without token is 401", r.status === 401, `status ${r.status}`);
  const client = new Client({ name: "rlm-test", version: "1.0.0" });
  let err;
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  } catch (e) {
    err = e;
  }
  check("client without token is refused", err !== undefined, "connected without a token");
  console.log(`refused: ${err.message}`);
  const bad = new Client({ name: "rlm-test", version: "1.0.0" });
  err = undefined;
  try {
    await bad.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: "Bearer wrong" } } }));
  } catch (e) {
    err = e;
  }
  check("client with a wrong token is refused", err !== undefined, "connected with a wrong token");
}

async function main() {
  if (mode === "unauth") return unauth(rest[0]);
  let transport;
  if (mode === "stdio") {
    // The whole environment, not the SDK's short default list: the test's
    // HOME, PATH, caches and RLM_* settings must reach rlm.
    transport = new StdioClientTransport({ command: rest[0], args: rest.slice(1), env: { ...process.env }, stderr: "inherit" });
  } else if (mode === "http") {
    transport = new StreamableHTTPClientTransport(new URL(rest[0]), {
      requestInit: { headers: { Authorization: `Bearer ${rest[1]}` } },
    });
  } else {
    fail("usage", "node client.mjs stdio CMD ARGS... | http URL TOKEN | unauth URL");
  }
  const client = new Client({ name: "rlm-test", version: "1.0.0" });
  await client.connect(transport);
  const sv = client.getServerVersion();
  check(`initialize (server ${sv?.name})`, sv?.name === "rlm", sv);

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(`list tools: ${names.join(" ")}`,
    JSON.stringify(names) === JSON.stringify(["list_runtimes", "run_code", "session_close", "session_command", "session_get_variable", "session_open", "session_run"]), names);
  const rc = tools.find((t) => t.name === "run_code");
  check("run_code schema", ["language", "code", "stdin", "timeout_seconds", "files"].every((a) => rc.inputSchema.properties[a]?.description), rc.inputSchema);

  const call = (name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });

  let r = await call("list_runtimes", {});
  const rts = r.structuredContent?.runtimes || [];
  // name=version/programs' level/sessions' level ("-" for none): the
  // scripts check the levels are the ones enforced, never "auto".
  check(`list_runtimes: ${rts.map((x) => `${x.name}=${x.runtime_version}/${x.isolation}/${x.session_isolation || "-"}`).join(" ")}`,
    !r.isError && rts[0]?.name === "python" && rts[0]?.default === true && rts.some((x) => x.name === "shell"), r);

  r = await call("run_code", { language: "python", code: "import sys\nprint('py', sys.version_info[0] * 14)" });
  check("run_code python output", !r.isError && r.structuredContent.stdout === "py 42\n" && text(r).includes("py 42"), r);

  r = await call("run_code", { language: "shell", code: "echo from bash $BASH_VERSION | cut -c1-9\necho oops >&2\nexit 7" });
  check("run_code shell non-zero exit",
    r.isError === true && r.structuredContent.exit_code === 7 && r.structuredContent.stdout === "from bash\n" &&
    text(r).includes("exit code 7") && text(r).includes("oops"), r);

  r = await call("run_code", { code: "import sys\nprint(sys.stdin.read()[::-1])", stdin: "olleh" });
  check("run_code stdin", !r.isError && r.structuredContent.stdout === "hello\n", r);

  const t0 = Date.now();
  r = await call("run_code", { code: "import time\ntime.sleep(600)", timeout_seconds: 1 });
  const took = (Date.now() - t0) / 1000;
  // 600 s asked, 1 s allowed: anything under a minute proves it was cut
  // short (the machine may be loaded; no tighter timing is asserted).
  check(`run_code timeout reported (${took.toFixed(1)} s)`,
    r.isError === true && r.structuredContent.status === "timeout" && r.structuredContent.timed_out === true &&
    text(r).includes("timed out") && took < 60, r);

  r = await call("session_open", { context: "alpha beta gamma" });
  const id = r.structuredContent?.session_id;
  check("session_open", !r.isError && typeof id === "string" && id.length > 0, r);
  r = await call("session_run", { session_id: id, code: "words = context.split()\ncount = len(words)" });
  check("session_run first cell", !r.isError, r);
  r = await call("session_run", { session_id: id, code: "print(count, words[-1].upper())" });
  check("session_run keeps state", !r.isError && r.structuredContent.stdout === "3 GAMMA\n", r);
  r = await call("session_get_variable", { session_id: id, name: "words" });
  check("session_get_variable", !r.isError && JSON.stringify(r.structuredContent.value) === JSON.stringify(["alpha", "beta", "gamma"]), r);
  r = await call("session_close", { session_id: id });
  check("session_close", !r.isError && r.structuredContent.closed === true, r);
  r = await call("session_run", { session_id: id, code: "print(count)" });
  check("closed session rejected", r.isError === true && text(r).includes(`session "${id}" has ended: it was deleted`), r);

  await client.close();
  console.log("done");
}

main().catch((e) => fail("exception", e?.stack || String(e)));
