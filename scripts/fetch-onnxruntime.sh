#!/usr/bin/env bash
# fetch-onnxruntime.sh installs the ONNX Runtime shared library that
# github.com/yalue/onnxruntime_go loads at run time, taken from the npm package
# onnxruntime-node (its tarball ships bin/napi-v6/linux/x64/libonnxruntime.so.1).
# `npm pack` downloads the tarball only: no install script runs.
#
# Version and sha256 of both the tarball and the library are pinned in
# models/manifest.json under "runtime"."onnxruntime". Installs to
#
#   ${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}/onnxruntime/<version>/libonnxruntime.so.1
#
# Idempotent: does nothing when the installed library's sha256 matches the pin.
# A file is moved into place only after its checksum is verified.
set -euo pipefail

usage="usage: scripts/fetch-onnxruntime.sh
  installs libonnxruntime.so.1 (npm onnxruntime-node, sha256-checked) into the toolgate cache, unless it is there already"
case "${1:-}" in
-h | --help) echo "$usage"; exit 0 ;;
"") ;;
*) echo "$usage" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

log() { printf 'fetch-onnxruntime: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# manifest KEY prints runtime.onnxruntime.KEY from models/manifest.json.
manifest() {
	python3 - "$repo/models/manifest.json" "$1" <<'EOF'
import json, sys
print(json.load(open(sys.argv[1]))["runtime"]["onnxruntime"][sys.argv[2]])
EOF
}

command -v python3 >/dev/null || die "python3 not found (needed to read models/manifest.json)"
version=$(manifest version) || die "no runtime.onnxruntime.version in $repo/models/manifest.json"
pkg=$(manifest npm_package)
tar_sha=$(manifest tarball_sha256)
member=$(manifest tarball_path)
file=$(manifest file)
lib_sha=$(manifest sha256)

cache=${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}
dest="$cache/onnxruntime/$version"
lib="$dest/$file"

if [[ -f "$lib" ]]; then
	if [[ "$(sha256 "$lib")" == "$lib_sha" ]]; then
		log "present: $lib (sha256 $lib_sha)"
		exit 0
	fi
	log "$lib has the wrong sha256; fetching again"
fi

command -v npm >/dev/null || die "npm not found in PATH: install Node.js/npm and re-run $0"

work=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-ort.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "npm pack $pkg@$version (download only, no install scripts)"
(cd "$work" && npm pack "$pkg@$version" --ignore-scripts --silent >/dev/null)
tgz="$work/$pkg-$version.tgz"
[[ -f "$tgz" ]] || die "npm pack did not produce $tgz"
got=$(sha256 "$tgz")
[[ "$got" == "$tar_sha" ]] || die "tarball sha256 $got != pinned $tar_sha (models/manifest.json)"

tar -xzf "$tgz" -C "$work" "$member"
got=$(sha256 "$work/$member")
[[ "$got" == "$lib_sha" ]] || die "$member sha256 $got != pinned $lib_sha (models/manifest.json)"

mkdir -p "$dest"
tmp="$dest/.$file.$$"
cp "$work/$member" "$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$lib"
log "installed $lib (onnxruntime $version, sha256 $lib_sha)"
