// A client of the official MCP TypeScript SDK, driven by TestMCPTypeScriptSDK.
// argv: URL TOKEN COMMAND. It prints one line per step on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, command] = process.argv.slice(2);
const client = new Client({ name: "corral-ts-test", version: "1" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
console.log(`connected ${transport.protocolVersion ?? ""} session=${transport.sessionId ? "yes" : "no"}`);

// A command silent for longer than the request timeout: only heartbeats
// (progress notifications) keep the call alive.
try {
  const r = await client.callTool({ name: "bash", arguments: { command: "sleep 2; echo quiet-done" } }, undefined, {
    timeout: 1000, resetTimeoutOnProgress: true, onprogress: () => {},
  });
  console.log(`heartbeat ${r.content[0].text.includes("quiet-done") ? "ok" : "bad"}`);
} catch (e) {
  console.log(`heartbeat failed ${e.message}`);
}

// Abort a running call with an AbortController once it printed "ready".
const ac = new AbortController();
try {
  await client.callTool({ name: "bash", arguments: { command } }, undefined, {
    signal: ac.signal,
    onprogress: (p) => { if (p.message === "ready\n") { console.log("ready"); ac.abort(); } },
  });
  console.log("returned");
} catch (e) {
  console.log(`aborted ${e.name}`);
}

// Keep the session open until the test is done checking.
process.stdin.resume();
process.stdin.on("end", async () => {
  await client.close();
  process.exit(0);
});
