// The official TypeScript SDK's client against `mcpflow mcp` over stdio.
//
//   node stdio-client.mjs SDK_DIR MCPFLOW WORKSPACE
//
// SDK_DIR is the SDK's dist/esm directory (examples/npm installs it).
// It lists the tools, calls a workflow with a progress token and checks
// the progress and the outputs, then calls a workflow with an approve:
// gate and checks the blocked tool error. It prints what it saw as one
// JSON line on stdout for the Go test, and exits non-zero on the first
// check that fails.
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, mcpflow, workspace] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");

const transport = new StdioClientTransport({
  command: mcpflow,
  args: ["mcp", "--workspace", workspace],
  env: { ...process.env },
  stderr: "inherit",
});
const client = new Client({ name: "mcpflow-test", version: "1.0.0" });
await client.connect(transport);

const seen = {};
try {
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  seen.tools = tools.map((t) => t.name).sort();
  assert.deepEqual(seen.tools, ["Greet_Shout", "gated-record", "list_runs", "lookup", "show_run"]);

  const greet = byName["Greet_Shout"];
  assert.equal(greet.title, "Greet & Shout!");
  assert.deepEqual(greet.inputSchema.required, ["name"]);
  assert.equal(greet.inputSchema.properties.password.writeOnly, true);
  assert.equal(greet.inputSchema.properties.times.default, 1);
  assert.equal(greet.annotations.readOnlyHint, false);
  assert.equal(greet.annotations.idempotentHint, true);
  assert.equal(greet.annotations.destructiveHint, true);
  const lookup = byName["lookup"].annotations;
  assert.deepEqual([lookup.readOnlyHint, lookup.idempotentHint, lookup.destructiveHint], [true, true, false]);
  const gate = byName["gated-record"].annotations;
  assert.deepEqual([gate.readOnlyHint, gate.idempotentHint, gate.destructiveHint], [false, false, true]);

  const progress = [];
  const ok = await client.callTool(
    { name: "Greet_Shout", arguments: { name: "Ada", password: "pw-not-shown" } },
    undefined,
    { onprogress: (p) => progress.push(p) },
  );
  assert.equal(ok.isError ?? false, false, JSON.stringify(ok));
  assert.deepEqual(ok.structuredContent, { greeting: "Hello, Ada!", shout: "HELLO, ADA!" });
  assert.deepEqual(JSON.parse(ok.content[0].text), ok.structuredContent);
  seen.progress = progress.map((p) => p.message);
  assert.deepEqual(seen.progress, [
    "step greet started",
    "step greet finished: completed",
    "step shout started",
    "step shout finished: completed",
    "run succeeded",
  ]);
  for (let i = 1; i < progress.length; i++) {
    assert.ok(progress[i].progress > progress[i - 1].progress, "progress rises");
  }
  assert.ok(progress.every((p) => p.total === 2), "total is the number of steps");
  assert.equal(progress.at(-1).progress, 2);
  seen.succeeded = ok._meta["mcpflow/run"];

  const blocked = await client.callTool({ name: "gated-record", arguments: { name: "Bo" } });
  assert.equal(blocked.isError, true);
  const run = blocked.structuredContent.run;
  const short = run.slice(0, 18);
  const text = blocked.content[0].text;
  assert.match(text, new RegExp(`run ${short} is blocked`));
  assert.ok(text.includes(`approve:  mcpflow approve ${short} record [--reason TEXT]`), text);
  assert.equal(blocked.structuredContent.status, "blocked");
  assert.deepEqual(blocked.structuredContent.waiting, [
    { step: "record", reason: "approval", message: "record the greeting in the ledger?" },
  ]);
  seen.blocked = run;
  seen.blockedText = text;

  const shown = await client.callTool({ name: "show_run", arguments: { run } });
  assert.equal(shown.isError ?? false, false);
  assert.equal(shown.structuredContent.run.status, "blocked");
  const listed = await client.callTool({ name: "list_runs", arguments: { status: "blocked" } });
  assert.deepEqual(listed.structuredContent.runs.map((r) => r.id), [run]);
} finally {
  await client.close();
}
console.log(JSON.stringify(seen));
