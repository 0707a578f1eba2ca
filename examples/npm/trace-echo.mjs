// trace-echo: an MCP server on the official TypeScript SDK with one tool,
// "meta", that returns the _meta of the tools/call it received as JSON
// text. mcpflow's tests use it to check that the trace context (traceparent,
// tracestate, baggage) reaches a server written on another SDK.
//
//	node examples/npm/trace-echo.mjs   (after `cd examples/npm && npm ci`)
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new Server({ name: "trace-echo", version: "1.0.0" }, { capabilities: { tools: {} } });

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [{
    name: "meta",
    description: "Returns the _meta of this tools/call.",
    inputSchema: { type: "object" },
    annotations: { readOnlyHint: true, idempotentHint: true },
  }],
}));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  if (request.params.name !== "meta") {
    return { isError: true, content: [{ type: "text", text: `unknown tool ${request.params.name}` }] };
  }
  return { content: [{ type: "text", text: JSON.stringify(request.params._meta ?? {}) }] };
});

await server.connect(new StdioServerTransport());
