// Drives rlm_run with the official TypeScript client over stdio and checks
// that progress notifications arrive while the run goes on (the run's first
// code block waits for a file this client creates only once it has had a
// notification), that the answer comes back, and that cancelling a run
// (AbortSignal: notifications/cancelled) stops its code: the block's child
// process (sleep 987654) goes away; testscripts/testdata/mcp/runs.txtar
// runs it.
//
//   node runs.mjs DIR CMD ARGS...   spawn CMD (rlm mcp ...) over stdio
//
// DIR is where the files the runs wait for are made. Prints one "ok ..."
// line per check; the first failed check prints "FAIL ..." and exits 1.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [dir, cmd, ...args] = process.argv.slice(2);

function fail(what, detail) {
  console.log(`FAIL ${what}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  process.exit(1);
}

function check(what, cond, detail) {
  if (!cond) fail(what, detail);
  console.log(`ok ${what}`);
}

// sleepers lists the processes whose command line is "sleep 987654".
function sleepers() {
  const out = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim() === "sleep 987654") out.push(pid);
    } catch {}
  }
  return out;
}

async function waitFor(what, cond) {
  const deadline = Date.now() + 120000;
  while (!cond()) {
    if (Date.now() > deadline) fail(what, "not after 120 s");
    await new Promise((res) => setTimeout(res, 20));
  }
}

async function main() {
  const transport = new StdioClientTransport({ command: cmd, args, env: { ...process.env }, stderr: "inherit" });
  const client = new Client({ name: "rlm-test", version: "1.0.0" });
  await client.connect(transport);

  check("the instructions name rlm_run", client.getInstructions()?.includes("rlm_run has the server's model answer it"), client.getInstructions());
  const { tools } = await client.listTools();
  const rt = tools.find((t) => t.name === "rlm_run");
  check("rlm_run is listed", rt && ["task", "context", "model", "max_iterations", "max_time_seconds"].every((a) => rt.inputSchema.properties[a]?.description), tools.map((t) => t.name));

  const proceed = `${dir}/proceed`;
  const progress = [];
  let r = await client.callTool({ name: "rlm_run", arguments: { task: "what does the sub-model say?", context: { proceed, hang: false } } }, undefined, {
    timeout: 300000,
    onprogress: (p) => {
      progress.push(p.message);
      // The run waits for this file: it ends only after a notification.
      if (progress.length === 1) writeFileSync(proceed, "");
    },
  });
  check("rlm_run answers", !r.isError && r.structuredContent?.status === "succeeded" && r.structuredContent.answer === `M-ROOT SAYS: SUMMARISE ${proceed.toUpperCase()}`, r);
  check("the text is the answer and the usage", r.content[0].text.startsWith(r.structuredContent.answer) && r.content[0].text.includes("answer_source final_var"), r.content);
  console.log("progress: " + progress.join(" | "));
  check("progress came step by step", progress[0].startsWith("run run_") && progress.includes("iteration 1") && progress.includes("llm_query called from code") &&
    progress.some((m) => m.startsWith("code block 1 of iteration 1 ran (exit)")) && progress.includes("answer found (final_var)"), progress);

  // Cancel: the block starts a child that would sleep for days.
  const abort = new AbortController();
  const hung = client.callTool({ name: "rlm_run", arguments: { task: "hang", context: { proceed: `${dir}/never`, hang: true } } }, undefined, { timeout: 300000, signal: abort.signal });
  await waitFor("the hanging block started its child", () => sleepers().length > 0);
  abort.abort("the test cancels it");
  let err;
  try {
    await hung;
  } catch (e) {
    err = e;
  }
  check("the cancelled call is abandoned", err !== undefined, "it answered");
  await waitFor("the cancelled run's child is gone", () => sleepers().length === 0);
  console.log("ok the cancelled run's code was stopped");

  r = await client.callTool({ name: "rlm_run", arguments: { task: " ", context: "x" } });
  check("a run without a task is refused", r.isError === true && r.content[0].text.includes("field task: is required"), r);
  r = await client.callTool({ name: "rlm_run", arguments: { task: "t", model: "gpt-5" } });
  check("a model the server does not allow is refused", r.isError === true && r.content[0].text.includes("is not among the models this server allows"), r);

  await client.close();
  console.log("done");
}

main().catch((e) => fail("unexpected error", String(e?.stack || e)));
