// mcp_server.mjs — an MCP server over stdio built on the official @modelcontextprotocol/sdk, for
// the tests of `tern chat --mcp` (mcp_chat.mjs). It offers two tools:
//   get_weather {city}  -> text "Weather in CITY: sunny, 21 °C" (and structuredContent)
//   always_fails {}     -> a result with isError: true
// tools/list answers one tool per page (nextCursor), so the client's pagination is exercised.
// Every tools/call is appended as one JSON line {name, arguments} to the file named by $MCP_LOG.
// $MCP_MODE makes it misbehave on purpose, for the client's error paths:
//   exit      exits at once with status 3, after a line on stderr
//   garbage   answers initialize with a line that is not JSON
//   silent    reads requests and never answers
//   rpcerror  answers tools/call with a JSON-RPC error (code -32603)
//   crashcall exits (status 4) when a tool is called
//   stubborn  never answers, ignores the end of its stdin and SIGTERM (only SIGKILL ends it)
// $MCP_PIDFILE (optional): the server appends its pid there, so a test can check it is gone.
// $MCP_PREFIX (optional) is put before the tool names (two servers with distinct tool names).
import { appendFileSync } from "node:fs";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError, ErrorCode } from "@modelcontextprotocol/sdk/types.js";

const mode = process.env.MCP_MODE || "";
const prefix = process.env.MCP_PREFIX || "";

if (process.env.MCP_PIDFILE) appendFileSync(process.env.MCP_PIDFILE, `${process.pid}\n`);
if (mode === "exit") {
  process.stderr.write("mcp_server: exiting at once (MCP_MODE=exit)\n");
  process.exit(3);
}
if (mode === "stubborn") {
  process.on("SIGTERM", () => process.stderr.write("mcp_server: SIGTERM ignored (MCP_MODE=stubborn)\n"));
  process.stdin.resume();
  setInterval(() => {}, 1000);
} else if (mode === "garbage" || mode === "silent") {
  // not the SDK: a server that breaks the protocol is what these modes test
  process.stdin.on("data", () => {
    if (mode === "garbage") process.stdout.write("this is not JSON-RPC\n");
  });
  process.stdin.on("end", () => process.exit(0));
} else {
  const tools = [
    {
      name: prefix + "get_weather",
      description: "Get the current weather for a city",
      inputSchema: {
        type: "object",
        properties: { city: { type: "string", description: "the city's name" } },
        required: ["city"],
      },
    },
    {
      name: prefix + "always_fails",
      description: "A tool that always reports an error",
      inputSchema: { type: "object", properties: {} },
    },
  ];
  const server = new Server({ name: "tern-test-mcp", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async (req) => {
    const at = req.params?.cursor ? Number(req.params.cursor) : 0;
    if (!(at >= 0 && at < tools.length)) throw new McpError(ErrorCode.InvalidParams, `bad cursor ${req.params.cursor}`);
    return at + 1 < tools.length ? { tools: [tools[at]], nextCursor: String(at + 1) } : { tools: [tools[at]] };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const { name, arguments: args } = req.params;
    if (process.env.MCP_LOG) appendFileSync(process.env.MCP_LOG, JSON.stringify({ name, arguments: args ?? {} }) + "\n");
    if (mode === "crashcall") {
      process.stderr.write("mcp_server: crashing in tools/call (MCP_MODE=crashcall)\n");
      process.exit(4);
    }
    if (mode === "rpcerror") throw new McpError(ErrorCode.InternalError, "the weather service is down");
    if (name === prefix + "get_weather") {
      const city = String(args?.city ?? "");
      return {
        content: [{ type: "text", text: `Weather in ${city}: sunny, 21 °C` }],
        structuredContent: { city, sky: "sunny", celsius: 21 },
      };
    }
    if (name === prefix + "always_fails") return { content: [{ type: "text", text: "the tool failed on purpose" }], isError: true };
    throw new McpError(ErrorCode.InvalidParams, `unknown tool ${name}`);
  });
  await server.connect(new StdioServerTransport());
  process.stdin.on("end", () => process.exit(0));
}
