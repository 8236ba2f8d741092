#!/usr/bin/env bash
# Installs the official Python MCP SDK (PyPI `mcp`, for the interop tests in
# cmd/toolgate/python_test.go) into a virtualenv in the toolgate cache:
#
#   ${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}/python/<sha256 of scripts/python-requirements.txt>/
#
# Every package, transitive ones too, is pinned with its sha256 in
# scripts/python-requirements.txt (pip-compile --generate-hashes, from
# scripts/python-requirements.in) and installed with --require-hashes
# --no-deps: nothing unpinned or unchecked gets in. A changed requirements
# file is a new folder; the venv is built in a temp folder beside it and
# renamed when complete, so a half-built venv is never used.
#
# Idempotent: skips pip when the venv is complete (its stamp) and its python
# runs. Needs python3 >=
# 3.10 with the venv module (Debian: python3-venv); PYTHON names another
# interpreter.
#
# Usage: scripts/install-python.sh [--force] [--print]
#   --print  prints the venv's python and exits 1 if it is not installed
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
req="$root/scripts/python-requirements.txt"
cache=${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}
key="$(sha256sum "$req" | cut -d' ' -f1)"
venv="$cache/python/$key"

force=0
case "${1:-}" in
--force) force=1 ;;
--print)
	[ -f "$venv/.toolgate-requirements.sha256" ] || { echo "install-python: $venv missing: run scripts/install-python.sh (or make deps-python)" >&2; exit 1; }
	echo "$venv/bin/python"
	exit 0
	;;
"") ;;
*) echo "usage: $0 [--force] [--print]" >&2; exit 2 ;;
esac

stamp="$venv/.toolgate-requirements.sha256"
if [ "$force" = 0 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$key" ] && "$venv/bin/python" -c '' 2>/dev/null; then
	echo "install-python: Python MCP SDK up to date ($venv)" >&2
	exit 0
fi

py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
	echo "install-python: $py not found: install Python 3.10 or newer" >&2
	exit 1
fi
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
	echo "install-python: $("$py" --version 2>&1) is too old: the MCP SDK needs Python 3.10 or newer" >&2
	exit 1
fi

mkdir -p "$cache/python"
tmp="$(mktemp -d "$cache/python/.tmp-$key.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "install-python: installing the Python MCP SDK from $req into $venv" >&2
start=$SECONDS
"$py" -m venv "$tmp/venv" >&2 || {
	echo "install-python: python3 -m venv failed: install the venv module (Debian: apt-get install python3-venv)" >&2
	exit 1
}
PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/python" -m pip install --quiet --no-input \
	--require-hashes --no-deps --only-binary=:all: -r "$req" >&2
"$tmp/venv/bin/python" -c 'import mcp' >&2
echo "$key" >"$tmp/venv/.toolgate-requirements.sha256"
rm -rf "$venv"
mv "$tmp/venv" "$venv"
# Entry-point scripts carry the temp path in their shebang; the tests run
# "$venv/bin/python" only, but fix them so bin/ works for a person too.
grep -lr --null "$tmp/venv" "$venv/bin" 2>/dev/null | xargs -0 -r sed -i "s|$tmp/venv|$venv|g"
echo "install-python: done in $((SECONDS - start))s ($venv)" >&2
