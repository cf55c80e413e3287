// A client of the official MCP TypeScript SDK that calls the claude-code
// profile the way Claude Code calls its shell tools; driven by
// TestProfileClaudeTypeScriptSDK. argv: URL TOKEN. It prints one JSON line
// per step on stdout, then exits.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const client = new Client({ name: "corral-ts-claude", version: "1" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const say = (step, v) => console.log(JSON.stringify({ step, ...v }));
const text = (r) => ({ text: r.content.map((c) => c.text).join(""), isError: !!r.isError });

const { tools } = await client.listTools();
say("tools", { names: tools.map((t) => t.name).sort() });
say("bash", text(await client.callTool({ name: "Bash", arguments: {
  command: "echo hello; echo oops >&2", timeout: 10000, description: "Print a greeting" } })));
const bg = text(await client.callTool({ name: "Bash", arguments: {
  command: "echo started; sleep 30", run_in_background: true, description: "Start a long job" } }));
say("background", bg);
const id = bg.text.replace("Command running in background with ID: ", "");
let out;
for (let i = 0; i < 50; i++) {
  out = text(await client.callTool({ name: "BashOutput", arguments: { bash_id: id } }));
  if (out.text.includes("started")) break;
  await new Promise((r) => setTimeout(r, 100));
}
say("output", out);
say("kill", text(await client.callTool({ name: "KillShell", arguments: { shell_id: id } })));
await client.close();
process.exit(0);
