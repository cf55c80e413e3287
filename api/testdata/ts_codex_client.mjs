// A client of the official MCP TypeScript SDK that calls the codex profile
// the way Codex calls its unified exec tools; driven by
// TestProfileCodexTypeScriptSDK. argv: URL TOKEN WORKDIR. It prints one
// JSON line per step on stdout, then exits.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, workdir] = process.argv.slice(2);
const client = new Client({ name: "corral-ts-codex", version: "1" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
const say = (step, v) => console.log(JSON.stringify({ step, ...v }));
const text = (r) => ({ text: r.content.map((c) => c.text).join(""), isError: !!r.isError });
const call = async (name, args) => text(await client.callTool({ name, arguments: args }));
const session = (t) => Number(/Process running with session ID (\d+)/.exec(t)[1]);

const { tools } = await client.listTools();
say("tools", { names: tools.map((t) => t.name).sort() });
say("exec", await call("exec_command", { cmd: "echo hello; echo oops >&2", workdir,
  yield_time_ms: 10000, max_output_tokens: 10000, sandbox_permissions: "use_default" }));
const prompt = await call("exec_command", { cmd: "read -p 'name? ' x; echo hi $x", tty: true, yield_time_ms: 30000 });
say("prompt", prompt);
say("answer", await call("write_stdin", { session_id: session(prompt.text), chars: "ada\r", yield_time_ms: 5000 }));
const running = await call("exec_command", { cmd: "echo start; sleep 30", yield_time_ms: 2000,
  sandbox_permissions: "require_escalated", justification: "Do you want to wait?", prefix_rule: ["sleep"] });
say("running", running);
say("poll", await call("write_stdin", { session_id: session(running.text), chars: "", yield_time_ms: 5000 }));
const cat = await call("exec_command", { cmd: "cat", tty: true, yield_time_ms: 10000 });
say("ctrl-c", await call("write_stdin", { session_id: session(cat.text), chars: "\u0003", yield_time_ms: 5000 }));
await client.close();
process.exit(0);
