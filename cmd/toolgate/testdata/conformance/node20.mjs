// Loaded with `node --import` before @modelcontextprotocol/conformance 0.1.16
// (cmd/toolgate/conformance_test.go). The suite imports fs.globSync, which
// Node.js has from version 22 on, at load time, for its tier-check command
// alone; on Node.js 20 (this project's) the import fails before any command
// runs ("The requested module 'fs' does not provide an export named
// 'globSync'"). On a Node.js without it, the hooks below hand the suite an
// fs that has one, which says so if it is ever called; the server and client
// commands never call it. On Node.js 22 and later this does nothing.
import fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  register("./node20-hooks.mjs", import.meta.url);
}
