#!/usr/bin/env bash
# Installs the MCP servers of the bundled example config (examples/toolgate.json),
# axe-core, which the console's accessibility test runs in Chromium, and
# @modelcontextprotocol/conformance, the MCP conformance suite that
# cmd/toolgate/conformance_test.go runs against the gateway, into
# examples/servers/node_modules from the committed package-lock.json, with
# exact pinned versions and integrity hashes, so that starting the gateway never
# depends on npx fetching packages at run time. Also creates examples/sandbox/,
# the folder the filesystem and memory servers work in.
#
# Idempotent: skips npm when the lockfile's sha256 matches the stamp written by
# the last successful install. Install scripts are not run (--ignore-scripts):
# the three servers ship built JavaScript and need none.
#
# Usage: scripts/install-servers.sh [--force]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
servers="$root/examples/servers"
sandbox="$root/examples/sandbox"
stamp="$servers/node_modules/.toolgate-lock.sha256"

force=0
usage="usage: scripts/install-servers.sh [--force]
  installs the bundled example servers from package-lock.json (npm ci) and creates examples/sandbox/"
case "${1:-}" in
  --force) force=1 ;;
  -h | --help) echo "$usage"; exit 0 ;;
  "") ;;
  *) echo "$usage" >&2; exit 2 ;;
esac

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-servers: $tool not found: install Node.js 20 or newer (https://nodejs.org/ or your package manager)" >&2
    exit 1
  fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "install-servers: Node.js $(node --version) is too old: the example servers need Node.js 20 or newer" >&2
  exit 1
fi

want="$(sha256sum "$servers/package-lock.json" | cut -d' ' -f1)"
if [ "$force" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install-servers: example servers up to date ($servers/node_modules)" >&2
else
  echo "install-servers: installing example servers from package-lock.json into $servers/node_modules" >&2
  (cd "$servers" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
  # Fail now, not at gateway start, if a server's entry point is missing.
  for pkg in server-everything server-memory server-filesystem; do
    f="$servers/node_modules/@modelcontextprotocol/$pkg/dist/index.js"
    [ -f "$f" ] || { echo "install-servers: $f missing after npm ci" >&2; exit 1; }
  done
  for f in "$servers/node_modules/axe-core/axe.min.js" "$servers/node_modules/@modelcontextprotocol/conformance/dist/index.js"; do
    [ -f "$f" ] || { echo "install-servers: $f missing after npm ci" >&2; exit 1; }
  done
  echo "$want" > "$stamp"
fi

# The sandbox is gitignored and user-owned: create missing sample files, never
# overwrite what is there (the memory server's graph lives here too).
mkdir -p "$sandbox/notes" "$sandbox/projects/toolgate"
put() { # put FILE: writes stdin to FILE unless it exists
  if [ -e "$1" ]; then cat >/dev/null; else cat >"$1"; fi
}
put "$sandbox/README.md" <<'TXT'
# Sandbox

This folder is the working area of toolgate's example config (examples/toolgate.json):
the filesystem server may read and write only inside it, and the memory server keeps
its knowledge graph in memory.jsonl here. It is not tracked by git; delete it freely,
and `scripts/install-servers.sh` recreates the sample files.
TXT
put "$sandbox/notes/todo.md" <<'TXT'
# To do

- [ ] Try search_tools with "list the files in a directory"
- [ ] Store an entity in the knowledge graph with the memory server
- [x] Install the example servers
TXT
put "$sandbox/notes/meeting-2026-11-30.txt" <<'TXT'
Meeting notes, 30 November 2026
Attendees: Ada, Grace, Linus
- Agreed to put every MCP server behind one gateway.
- Next step: measure how many tokens tools/list costs with and without it.
TXT
put "$sandbox/projects/toolgate/ideas.json" <<'TXT'
{
  "ideas": [
    {"title": "lazy backends", "status": "planned"},
    {"title": "hybrid ranking", "status": "in progress"}
  ]
}
TXT
echo "install-servers: sandbox ready ($sandbox)" >&2
