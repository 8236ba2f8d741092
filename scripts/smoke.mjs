#!/usr/bin/env node
// Smoke test with the official TypeScript MCP SDK as the client: starts
// bin/toolgate on the bundled example config over stdio, and again over
// streamable HTTP, and checks the two-tool contract from the outside, and
// what an agent sees (issue 13): a description that names the servers, a
// compact top 10, annotations and the readOnly filter, schemas on demand,
// errors that carry the schema, and progress through the hop; then the
// management tools, a profile's route and `toolgate import` (issue 14: a
// copy of the config with profile kg = memory without memory__delete_*).
//
//   node scripts/smoke.mjs [--bin bin/toolgate] [--config examples/toolgate.json]
//
// Exit status 0 when every check passed; each failure is printed.
// Used by `make smoke` (part of `make test`).
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const bin = resolve(arg("--bin", join(root, "bin", "toolgate")));
const config = resolve(arg("--config", join(root, "examples", "toolgate.json")));
const sdk = join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "client");
const { Client } = await import(pathToFileURL(join(sdk, "index.js")));
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "stdio.js")));
const { StreamableHTTPClientTransport } = await import(pathToFileURL(join(sdk, "streamableHttp.js")));
const { SSEClientTransport } = await import(pathToFileURL(join(sdk, "sse.js")));

// Temporary folders, removed at the end when every check passed and kept
// (and named) for inspection when one failed.
const temps = [];
const tempDir = (prefix) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};

// A data folder of its own, but the installed model (as the user has it).
const home = process.env.HOME || tmpdir();
const dataHome = process.env.XDG_DATA_HOME || join(home, ".local", "share");
const env = {
  ...process.env,
  TOOLGATE_DATA_DIR: tempDir("toolgate-smoke-"),
  TOOLGATE_MODELS_DIR: process.env.TOOLGATE_MODELS_DIR || join(process.env.TOOLGATE_DATA_DIR || join(dataHome, "toolgate"), "models"),
};

let failures = 0;
const check = (ok, what, detail = "") => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${ok || !detail ? "" : ": " + detail}`);
  if (!ok) failures++;
};
const text = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");

async function exercise(client, label) {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(names.join(",") === "execute_tool,search_tools", `${label}: tools/list is exactly search_tools, execute_tool`, names.join(","));

  const search = await client.callTool({ name: "search_tools", arguments: { query: "list the files in a directory", limit: 3 } });
  const found = (search.structuredContent?.tools || []).map((t) => t.name);
  check(!search.isError && found.includes("filesystem__list_directory"), `${label}: search_tools finds filesystem__list_directory in the top 3`, JSON.stringify(found));
  const first = search.structuredContent?.tools?.[0] || {};
  check(["score", "keyword", "vector", "inputSchema", "server", "description"].every((k) => k in first), `${label}: hits carry the score breakdown and schema`, Object.keys(first).join(","));

  const echo = await client.callTool({ name: "execute_tool", arguments: { name: "everything__echo", arguments: { message: "smoke" } } });
  check(!echo.isError && text(echo).includes("smoke"), `${label}: execute_tool everything__echo returns the backend's result`, text(echo));

  const unknown = await client.callTool({ name: "execute_tool", arguments: { name: "everything__ech" } });
  check(unknown.isError && text(unknown).includes("everything__echo"), `${label}: an unknown tool is an isError result naming the closest tool`, text(unknown));

  const empty = await client.callTool({ name: "search_tools", arguments: { query: " " } });
  check(empty.isError === true, `${label}: an empty query is an isError result`, text(empty));

  // What an agent sees (issue 13).
  const description = tools.find((t) => t.name === "search_tools")?.description || "";
  check(["memory (", "filesystem (", "everything ("].every((s) => description.includes(s)), `${label}: search_tools' description names memory, filesystem and everything`, description);

  const top10 = await client.callTool({ name: "search_tools", arguments: { query: "read a file", limit: 10 } });
  const top10Text = text(top10);
  check(!top10.isError && (top10.structuredContent?.tools || []).length === 10 && Buffer.byteLength(top10Text) / 4 <= 1000,
    `${label}: the top-10 text is within 1,000 tokens (${Buffer.byteLength(top10Text)} bytes, ${Math.ceil(Buffer.byteLength(top10Text) / 4)} by bytes/4)`);

  const fsHits = await client.callTool({ name: "search_tools", arguments: { query: "read the contents of a text file", server: "filesystem", limit: 5 } });
  const readText = (fsHits.structuredContent?.tools || []).find((t) => t.name === "filesystem__read_text_file");
  check(readText?.annotations?.readOnlyHint === true, `${label}: filesystem__read_text_file carries annotations.readOnlyHint: true`, JSON.stringify(readText?.annotations));

  const ro = await client.callTool({ name: "search_tools", arguments: { query: "write or delete files", readOnly: true, limit: 10 } });
  const roNames = (ro.structuredContent?.tools || []).map((t) => t.name);
  check(!ro.isError && roNames.length > 0 && !roNames.some((n) => /write|edit|move|create/.test(n)), `${label}: readOnly: true for "write or delete files" returns no write/edit/move/create tool`, JSON.stringify(roNames));

  const full = await client.callTool({ name: "search_tools", arguments: { query: "list the files in a directory", detail: "full" } });
  check(!full.isError && text(full).includes('"properties"'), `${label}: detail: "full" shows "properties" in the text`, text(full).slice(0, 200));

  const unknownArg = await client.callTool({ name: "search_tools", arguments: { query: "x", readonly: true } });
  check(unknownArg.isError === true && text(unknownArg).includes('"readOnly"'), `${label}: an unknown search_tools argument is an isError listing the accepted ones`, text(unknownArg));

  const invalid = await client.callTool({ name: "execute_tool", arguments: { name: "memory__create_entities", arguments: { entities: "not-a-list" } } });
  check(invalid.isError === true && text(invalid).includes("entityType"), `${label}: invalid memory__create_entities arguments come back with the schema (entityType)`, text(invalid));

  const none = await client.callTool({ name: "search_tools", arguments: { query: "book a flight to Paris" } });
  check(!none.isError && none.structuredContent?.noMatch === true, `${label}: a task no tool fits ("book a flight to Paris") comes back with noMatch: true`, JSON.stringify(none.structuredContent).slice(0, 200));

  const progress = [];
  const long = await client.callTool(
    { name: "execute_tool", arguments: { name: "everything__trigger-long-running-operation", arguments: { duration: 2, steps: 4 } } },
    undefined,
    { onprogress: (p) => progress.push(p), timeout: 60000 },
  );
  check(!long.isError && progress.length >= 2, `${label}: trigger-long-running-operation (duration 2, steps 4) delivers >= 2 progress notifications (${progress.length})`, text(long));
}

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on("error", rej);
  });
}

async function waitHealthy(url, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      const r = await fetch(url);
      if (r.ok) return true;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

// stdio
{
  const transport = new StdioClientTransport({ command: bin, args: ["serve", "--config", config], env, stderr: "ignore" });
  const client = new Client({ name: "toolgate-smoke", version: "1" });
  await client.connect(transport);
  await exercise(client, "stdio");
  await client.close();
}

// serveHTTP runs `toolgate serve --http` on cfg while body(base URL) runs.
async function serveHTTP(cfg, label, body) {
  const port = await freePort();
  const child = spawn(bin, ["serve", "--config", cfg, "--http", `127.0.0.1:${port}`], { env, stdio: ["ignore", "ignore", "ignore"] });
  try {
    const up = await waitHealthy(`http://127.0.0.1:${port}/healthz`, 120000);
    check(up, `${label}: /healthz answers`);
    if (up) await body(`http://127.0.0.1:${port}`);
  } finally {
    await stop(child);
  }
}

// stop ends a served toolgate and waits for it to exit, so that its data
// folder can be removed; SIGKILL after 10 s.
async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10000);
  await exited;
  clearTimeout(timer);
}

async function connect(url) {
  const client = new Client({ name: "toolgate-smoke", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

// streamable HTTP
await serveHTTP(config, "http", async (base) => {
  const client = await connect(`${base}/mcp`);
  await exercise(client, "http");
  await client.close();
  const forbidden = await fetch(`${base}/mcp`, { method: "POST", headers: { Origin: "https://evil.example", "Content-Type": "application/json" }, body: "{}" });
  check(forbidden.status === 403, "http: a foreign Origin gets 403", String(forbidden.status));
  // A client of the older HTTP+SSE transport is told what to configure
  // (it showed "SSE error: Non-200 status code (404)" alone).
  const old = new Client({ name: "smoke-sse", version: "0.0.0" });
  const refused = await old.connect(new SSEClientTransport(new URL(`${base}/sse`))).then(() => "connected", (e) => String(e));
  await old.close().catch(() => {});
  check(refused.includes('toolgate does not serve the older HTTP+SSE transport') && refused.includes('transport "http"'),
    "http: an SSEClientTransport at /sse is told to use streamable HTTP at /mcp", refused);
});

// Management tools, profiles and import (issue 14), over streamable HTTP.
{
  const dir = tempDir("toolgate-smoke-mgmt-");
  const cfg = JSON.parse(readFileSync(config, "utf8"));
  for (const s of Object.values(cfg.mcpServers)) {
    if (s.cwd && !s.cwd.startsWith("/")) s.cwd = resolve(dirname(config), s.cwd);
    if (s.env?.MEMORY_FILE_PATH) s.env.MEMORY_FILE_PATH = join(dir, "memory.jsonl");
  }
  cfg.toolgate = { ...cfg.toolgate, profiles: { kg: { servers: ["memory"], tools: { deny: ["memory__delete_*"] } } } };
  const cfgPath = join(dir, "toolgate.json");
  writeFileSync(cfgPath, JSON.stringify(cfg, null, 2));
  const call = (client, name, args = {}) => client.callTool({ name: "execute_tool", arguments: { name, arguments: args } });
  const find = async (client, query, limit = 10) =>
    ((await client.callTool({ name: "search_tools", arguments: { query, limit } })).structuredContent?.tools || []).map((t) => t.name);

  await serveHTTP(cfgPath, "mgmt", async (base) => {
    const client = await connect(`${base}/mcp`);
    const { tools } = await client.listTools();
    check(tools.map((t) => t.name).sort().join(",") === "execute_tool,search_tools", "mgmt: tools/list is still the two tools");

    const found = await find(client, "which MCP servers are connected and are they healthy", 3);
    check(found[0] === "toolgate__list_servers", "mgmt: search finds toolgate__list_servers for the servers' health", JSON.stringify(found));
    const list = await call(client, "toolgate__list_servers");
    check(!list.isError && ["everything", "memory", "filesystem"].every((s) => text(list).includes(s)), "mgmt: list_servers names the three servers", text(list));

    const echo = "echo back the message it is given";
    check((await find(client, echo)).some((n) => n.startsWith("everything__")), "mgmt: everything's tools are found before disabling it");
    const off = await call(client, "toolgate__disable_server", { name: "everything" });
    const hidden = await find(client, echo, 50);
    check(!off.isError && !hidden.some((n) => n.startsWith("everything__")), "mgmt: disabling everything removes its tools from search at once", JSON.stringify(hidden));
    const on = await call(client, "toolgate__enable_server", { name: "everything" });
    const back = await find(client, echo);
    check(!on.isError && back.some((n) => n.startsWith("everything__")), "mgmt: enabling it brings them back", JSON.stringify(back));

    const marker = join(dir, "ran");
    const add = await call(client, "toolgate__add_server", { name: "evil", command: "sh", args: ["-c", `touch ${marker}`] });
    const status = await (await fetch(`${base}/status`)).json();
    check(add.isError && text(add).includes("allowConfigChanges") && !existsSync(marker) && status.backends.length === 3,
      "mgmt: add_server with a sh -c command is refused, and no process is started", text(add));
    await client.close();

    const kg = await connect(`${base}/profiles/kg/mcp`);
    const inKg = await find(kg, "delete or create entities and relations; read files and directories", 50);
    check(inKg.length > 0 && inKg.every((n) => n.startsWith("memory__") && !n.startsWith("memory__delete_")),
      "mgmt: /profiles/kg/mcp shows only memory tools, none of memory__delete_*", JSON.stringify(inKg));
    const fs = await call(kg, "filesystem__list_allowed_directories");
    check(fs.isError && text(fs).includes('"kg"'), "mgmt: a filesystem tool at /profiles/kg/mcp is an isError naming kg", text(fs));
    await kg.close();
    const missing = await fetch(`${base}/profiles/nope/mcp`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    check(missing.status === 404, "mgmt: an unknown profile's route is 404", String(missing.status));
  });

  const samples = join(root, "gateway", "config", "importer", "testdata");
  const imported = JSON.parse(execFileSync(bin, ["import", join(samples, "claude_desktop_config.json"), join(samples, "proj", ".mcp.json"), join(samples, "proj", ".vscode", "mcp.json")], { env, stdio: ["ignore", "pipe", "ignore"] }).toString());
  const names = Object.keys(imported.mcpServers).sort();
  check(["github", "memory", "sentry", "local", "Perplexity", "fs", "gh", "remote-api"].every((n) => names.includes(n)) && imported.mcpServers.sentry?.url === "https://mcp.sentry.dev/mcp",
    "import: a Claude Desktop file, a .mcp.json and a .vscode/mcp.json make one config with all their servers, the HTTP server's url kept", names.join(","));
}

if (failures === 0) {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  console.log("smoke: all checks passed");
} else {
  console.log(`smoke: ${failures} check(s) failed; data folders kept: ${temps.join(" ")}`);
}
process.exit(failures === 0 ? 0 : 1);
