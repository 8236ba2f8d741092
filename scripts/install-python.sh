#!/usr/bin/env bash
# Installs the official Python MCP SDK (PyPI `mcp`) for the interop tests in
# cmd/toolgate/python_test.go, once per requirements file:
#
#   scripts/python-requirements.txt     mcp 2.x (client and servers)
#   scripts/python-requirements-v1.txt  mcp 1.x (FastMCP servers, still the most deployed)
#
# each into a virtualenv in the toolgate cache keyed by the file's sha256:
#
#   ${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}/python/<sha256 of the file>/
#
# Every package, transitive ones too, is pinned with its sha256 in the file
# (pip-compile --generate-hashes, from the .in beside it) and installed with
# --require-hashes --no-deps, wheels only: nothing unpinned or unchecked gets
# in. A changed requirements file is a new folder; the venv is built in a
# temp folder beside it and renamed when complete (with a stamp), so a
# half-built venv is never used.
#
# Idempotent: skips pip when the venv is complete (its stamp) and its python
# runs. Needs python3 >= 3.10 with the venv module (Debian: python3-venv);
# PYTHON names another interpreter.
#
# Usage: scripts/install-python.sh [--force] [--print [REQUIREMENTS]]
#   --print  prints the python of REQUIREMENTS' venv (default
#            scripts/python-requirements.txt); exit 1 if it is not installed
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache=${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}
stampname=.toolgate-requirements.sha256

venv_of() { # venv_of REQUIREMENTS: the venv folder for that file
	echo "$cache/python/$(sha256sum "$1" | cut -d' ' -f1)"
}

force=0
usage="usage: scripts/install-python.sh [--force] [--print [REQUIREMENTS]]
  installs the Python MCP SDKs of the interop tests into venvs in the toolgate cache;
  --print prints the python of REQUIREMENTS' venv (default scripts/python-requirements.txt)"
case "${1:-}" in
--force) force=1 ;;
--print)
	venv="$(venv_of "${2:-$root/scripts/python-requirements.txt}")"
	[ -f "$venv/$stampname" ] || { echo "install-python: $venv missing: run scripts/install-python.sh (or make deps-python)" >&2; exit 1; }
	echo "$venv/bin/python"
	exit 0
	;;
-h | --help) echo "$usage"; exit 0 ;;
"") ;;
*) echo "$usage" >&2; exit 2 ;;
esac

up_to_date() { # up_to_date KEY VENV: the venv is complete and its python runs
	[ "$force" = 0 ] && [ "$(cat "$2/$stampname" 2>/dev/null)" = "$1" ] && "$2/bin/python" -c '' 2>/dev/null
}

install() { # install REQUIREMENTS
	local req=$1 key venv tmp start py
	key="$(sha256sum "$req" | cut -d' ' -f1)"
	venv="$cache/python/$key"
	if up_to_date "$key" "$venv"; then
		echo "install-python: $(basename "$req") up to date ($venv)" >&2
		return
	fi
	# One install at a time (two make test runs on one machine): the second
	# finds the venv the first made.
	mkdir -p "$cache/python"
	exec 9>"$cache/python/.lock"
	flock 9
	if up_to_date "$key" "$venv"; then
		echo "install-python: $(basename "$req") up to date ($venv)" >&2
		exec 9>&-
		return
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
	tmp="$(mktemp -d "$cache/python/.tmp-$key.XXXXXX")"
	# shellcheck disable=SC2064 # tmp is fixed now
	trap "rm -rf '$tmp'" EXIT
	echo "install-python: installing $(basename "$req") into $venv" >&2
	start=$SECONDS
	"$py" -m venv "$tmp/venv" >&2 || {
		echo "install-python: $py -m venv failed: install the venv module (Debian: apt-get install python3-venv)" >&2
		exit 1
	}
	PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/python" -m pip install --quiet --no-input \
		--require-hashes --no-deps --only-binary=:all: -r "$req" >&2
	"$tmp/venv/bin/python" -c 'import mcp' >&2
	echo "$key" >"$tmp/venv/$stampname"
	rm -rf "$venv"
	mv "$tmp/venv" "$venv"
	# Entry-point scripts carry the temp path in their shebang; the tests run
	# "$venv/bin/python" only, but fix them so bin/ works for a person too.
	grep -lr --null "$tmp/venv" "$venv/bin" 2>/dev/null | xargs -0 -r sed -i "s|$tmp/venv|$venv|g"
	rm -rf "$tmp"
	trap - EXIT
	exec 9>&-
	echo "install-python: done in $((SECONDS - start))s ($venv)" >&2
}

for req in "$root/scripts/python-requirements.txt" "$root/scripts/python-requirements-v1.txt"; do
	install "$req"
done
