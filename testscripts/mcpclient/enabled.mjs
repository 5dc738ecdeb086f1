// Reports what an MCP server says it has enabled, with the official
// TypeScript client: the instructions, the language argument of run_code
// and session_open, list_runtimes, and a run_code in each runtime named;
// testscripts/testdata/mcp/enabled.txtar checks the lines.
//
//   node enabled.mjs RUNTIMES CMD ARGS...   spawn CMD (rlm mcp ...) over stdio
//
// RUNTIMES is a comma-separated list; each gets run_code with a program
// printing "hello from NAME" (an "echo" that sh, and the test's plugins,
// run). Prints one line per fact; a failed call prints "FAIL ..." and
// exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [runtimes, cmd, ...args] = process.argv.slice(2);

function fail(what, detail) {
  console.log(`FAIL ${what}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  process.exit(1);
}

async function main() {
  const transport = new StdioClientTransport({ command: cmd, args, env: { ...process.env }, stderr: "inherit" });
  const client = new Client({ name: "rlm-test", version: "1.0.0" });
  await client.connect(transport);
  console.log(`instructions: ${client.getInstructions()}`);
  const { tools } = await client.listTools();
  for (const name of ["run_code", "session_open"]) {
    const t = tools.find((x) => x.name === name);
    console.log(`${name} language: ${t?.inputSchema?.properties?.language?.description}`);
  }
  const call = (name, a) => client.callTool({ name, arguments: a }, undefined, { timeout: 120000 });
  const r = await call("list_runtimes", {});
  const rts = r.structuredContent?.runtimes || [];
  console.log(`list_runtimes: ${rts.map((x) => `${x.name}${x.default ? "*" : ""}/${x.isolation}`).join(" ")}`);
  for (const rt of runtimes.split(",").filter(Boolean)) {
    const res = await call("run_code", { language: rt, code: `echo hello from ${rt}` });
    if (res.isError) fail(`run_code ${rt}`, res);
    console.log(`run_code ${rt}: ${res.structuredContent.stdout.trim()}`);
  }
  await client.close();
  console.log("done");
}

main().catch((e) => fail("exception", e?.stack || String(e)));
