#!/usr/bin/env bash
# Installs Debian's chromium package, the browser the console's browser
# tests drive (cmd/toolgate: TestConsoleInBrowser, TestObservability) through
# chromedp. Nothing downloads a browser of its own: this is the system
# package, from apt.
#
# The version is pinned to CHROMIUM_VERSION when apt still offers it;
# Debian replaces chromium with each security update, so when the pinned
# build is gone the current one is installed and the script says so.
# Idempotent: an installed chromium is kept (a version other than the pin
# is reported). Without root (or passwordless sudo) it prints the command
# and exits 0: the browser tests then skip locally and fail under CI=true.
#
# Usage: CHROMIUM_VERSION=... scripts/install-chromium.sh
set -euo pipefail

usage="usage: scripts/install-chromium.sh (CHROMIUM_VERSION=VERSION pins the build)
  installs Debian's chromium with apt-get for the browser tests, unless installed"
case "${1:-}" in
-h | --help) echo "$usage"; exit 0 ;;
"") ;;
*) echo "$usage" >&2; exit 2 ;;
esac

want="${CHROMIUM_VERSION:-}"

if have="$(dpkg-query -W -f='${Version}' chromium 2>/dev/null)" && [ -n "$have" ]; then
  if [ -n "$want" ] && [ "$have" != "$want" ]; then
    echo "install-chromium: chromium $have installed (pinned: $want); keeping it" >&2
  fi
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium: apt-get not found: install Chromium with your package manager (the browser tests look for \"chromium\" on PATH)" >&2
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    echo "install-chromium: not root: run 'sudo apt-get install -y chromium' (the browser tests skip until then; with CI=true they fail)" >&2
    exit 0
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
pkg=chromium
if [ -n "$want" ]; then
  if apt-cache madison chromium | awk '{print $3}' | grep -qxF "$want"; then
    pkg="chromium=$want"
  else
    echo "install-chromium: chromium $want is no longer offered by apt (a security update replaced it); installing $(apt-cache policy chromium | awk '/Candidate:/ {print $2}')" >&2
  fi
fi
$sudo apt-get install -y -qq --no-install-recommends "$pkg" >&2
echo "install-chromium: $(chromium --version 2>/dev/null)" >&2
