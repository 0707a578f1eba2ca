// mcp-client: the official TypeScript SDK as a real MCP client, for mcpflow's
// tests of mcpflow proxy. It starts a server over stdio, then runs the steps
// it is given, printing one JSON line per step: {"op", "ok"} or {"op",
// "error": {"code", "message"}}.
//
//	node examples/npm/mcp-client.mjs '{"command": "mcpflow", "args": ["proxy", "demo"],
//	  "steps": [{"op": "list"}, {"op": "call", "tool": "greet", "args": {"name": "Ada"}}]}'
//
// Steps: list (tools), call (tool, args, progress: true asks for progress
// and collects the notifications/progress the client read during the call,
// timeout in ms: the client cancels the call then), resources, read (uri), prompts, prompt (name, args), and
// wait, which prints {"op": "wait"} and reads one line of stdin before going
// on (the test does something meanwhile, such as killing the server).
// Notifications of list changes and log messages are printed as they come:
// {"notification": METHOD, "params"}.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const spec = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({
  command: spec.command,
  args: spec.args ?? [],
  env: { ...process.env, ...(spec.env ?? {}) },
  cwd: spec.cwd,
  stderr: "inherit",
});
const client = new Client({ name: spec.name ?? "mcp-client-test", version: spec.version ?? "1.2.3" }, { capabilities: {} });
const print = (v) => process.stdout.write(JSON.stringify(v) + "\n");
for (const schema of [ToolListChangedNotificationSchema, ResourceListChangedNotificationSchema, PromptListChangedNotificationSchema]) {
  client.setNotificationHandler(schema, (n) => print({ notification: n.method, params: n.params ?? {} }));
}
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => print({ notification: n.method, params: n.params }));
await client.connect(transport);
// Progress is collected as read from the transport, in arrival order: the
// SDK dispatches a notification a microtask later than a response, so one
// read in the same chunk as its call's answer never reaches onprogress
// (typescript-sdk#2580). What mcpflow sent is what is checked.
let heard = null;
const dispatch = transport.onmessage;
transport.onmessage = (msg, extra) => {
  if (heard && msg.method === "notifications/progress") heard.push(msg.params);
  dispatch(msg, extra);
};
print({ op: "connected", server: client.getServerVersion(), capabilities: client.getServerCapabilities() });

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
for (const step of spec.steps) {
  try {
    let out;
    switch (step.op) {
      case "list":
        out = await client.listTools();
        break;
      case "call": {
        const opts = { timeout: step.timeout ?? 60000 };
        if (step.progress) {
          heard = [];
          opts.onprogress = () => {};
        }
        try {
          out = await client.callTool({ name: step.tool, arguments: step.args ?? {} }, undefined, opts);
        } finally {
          if (step.progress) out = out && { ...out, progress: heard };
          heard = null;
        }
        break;
      }
      case "resources":
        out = await client.listResources();
        break;
      case "read":
        out = await client.readResource({ uri: step.uri });
        break;
      case "prompts":
        out = await client.listPrompts();
        break;
      case "prompt":
        out = await client.getPrompt({ name: step.name, arguments: step.args ?? {} });
        break;
      case "wait":
        print({ op: "wait" });
        await lines.next();
        continue;
      default:
        throw new Error(`unknown step ${step.op}`);
    }
    print({ op: step.op, ok: out });
  } catch (e) {
    print({ op: step.op, error: { code: e.code ?? null, message: String(e.message ?? e) } });
  }
}
await client.close();
process.exit(0);
