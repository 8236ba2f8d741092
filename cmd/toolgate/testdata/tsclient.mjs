// A client on the official TypeScript MCP SDK (examples/servers/node_modules)
// that gives up on calls through toolgate, for cmd/toolgate/tsclient_test.go.
//
//   node tsclient.mjs UNTIL stdio COMMAND [ARG...]   # launches COMMAND, environment inherited
//   node tsclient.mjs UNTIL http URL
//
// Against a config whose server "fake" runs backendtest's mode "hang": it
// pings, sets a log level the protocol does not have, then runs
// execute_tool fake__hang twice and gives up on each, once with the SDK's
// `timeout` and once with an AbortSignal ("user pressed Esc"), checks that
// the gateway still answers, and reads fake__hangs (repeated for up to 30 s
// until it says UNTIL: waiting on state, not time). Prints one JSON object.
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const sdk = join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm");
const { Client } = await import(pathToFileURL(join(sdk, "client", "index.js")));
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "client", "stdio.js")));
const { StreamableHTTPClientTransport } = await import(pathToFileURL(join(sdk, "client", "streamableHttp.js")));
const { EmptyResultSchema } = await import(pathToFileURL(join(sdk, "types.js")));

const [until, kind, target, ...args] = process.argv.slice(2);
const transport = kind === "http"
  ? new StreamableHTTPClientTransport(new URL(target))
  : new StdioClientTransport({ command: target, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "tsclient", version: "1" });
await client.connect(transport);

const out = {};
const text = (r) => (r.content || []).map((c) => c.text).join("");
const failed = (e) => `${e.code} ${e.message}`;
const execute = (name, opts) => client.callTool({ name: "execute_tool", arguments: { name, arguments: {} } }, undefined, opts);
const hangs = async () => text(await execute("fake__hangs"));

const sleep = () => new Promise((r) => setTimeout(r, 50));
for (let deadline = Date.now() + 60000; !(await hangs()).startsWith("waiting") && Date.now() < deadline; ) await sleep(); // the backend up

out.ping = await client.ping().then(JSON.stringify, failed);
out.badLevel = await client.request({ method: "logging/setLevel", params: { level: "warn" } }, EmptyResultSchema).then(JSON.stringify, failed);
out.level = await client.setLoggingLevel("debug").then(JSON.stringify, failed);
out.timeout = await execute("fake__hang", { timeout: 1500 }).then(text, failed);
// Aborted once the call waits at the backend (one more waiting there).
const waiting = async () => Number((await hangs()).match(/^waiting (\d+)/)?.[1]);
const before = await waiting();
const esc = new AbortController();
const aborted = execute("fake__hang", { signal: esc.signal }).then(text, failed);
for (let deadline = Date.now() + 30000; (await waiting()) <= before && Date.now() < deadline; ) await sleep();
esc.abort("user pressed Esc");
out.abort = await aborted;
out.pingAfter = await client.ping().then(JSON.stringify, failed);
for (let deadline = Date.now() + 30000; ; ) {
  out.hangs = await hangs();
  if (out.hangs === until || Date.now() > deadline) break;
  await sleep();
}
await client.close();
console.log(JSON.stringify(out));
