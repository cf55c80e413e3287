// A client of the official MCP TypeScript SDK that calls the openhands
// profile the way OpenHands' CodeAct agent calls execute_bash; driven by
// TestProfileOpenHandsTypeScriptSDK. argv: URL TOKEN DIR. It prints one JSON
// line per step on stdout, then exits.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, dir] = process.argv.slice(2);
const client = new Client({ name: "corral-ts-openhands", version: "1" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const say = (step, v) => console.log(JSON.stringify({ step, ...v }));
const call = async (args) => {
  const r = await client.callTool({ name: "execute_bash", arguments: { security_risk: "LOW", ...args } });
  return { text: r.content.map((c) => c.text).join(""), isError: !!r.isError };
};

const { tools } = await client.listTools();
say("tools", { names: tools.map((t) => t.name).sort() });
say("cd", await call({ command: `cd ${dir} && echo hello` }));
say("pwd", await call({ command: "pwd", is_input: "false" }));
say("prompt", await call({ command: "read -p 'name? ' x; echo hi $x" }));
say("answer", await call({ command: "ada", is_input: "true" }));
say("slow", await call({ command: "sleep 60", timeout: 2 }));
say("ctrl-c", await call({ command: "C-c", is_input: "true" }));
await client.close();
process.exit(0);
