#!/usr/bin/env bash
# build-tokenizers.sh builds libtokenizers.a (the Rust static library behind
# github.com/daulet/tokenizers) from the Go module's own source with cargo, and
# installs it into the toolgate cache, keyed by version:
#
#   ${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}/tokenizers/<version>/libtokenizers.a
#
# v1.20.2 is used because its Cargo.lock pins only crates.io crates (v1.24.0
# pulls a git dependency that cannot be fetched offline). A stamp file next to
# the library records the rustc version and the library's sha256.
#
# Idempotent: does nothing when the library and its stamp are present and the
# sha256 matches the stamp. --force (or FORCE=1) rebuilds.
set -euo pipefail

usage="usage: scripts/build-tokenizers.sh [--force]
  builds libtokenizers.a with cargo into the toolgate cache, unless it is there already"
case "${1:-}" in
--force) FORCE=1 ;;
-h | --help) echo "$usage"; exit 0 ;;
"") ;;
*) echo "$usage" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

# manifest KEY prints runtime.tokenizers.KEY from models/manifest.json (empty if absent).
manifest() {
	python3 - "$repo/models/manifest.json" "$1" <<'EOF' 2>/dev/null || true
import json, sys
try:
    print(json.load(open(sys.argv[1]))["runtime"]["tokenizers"][sys.argv[2]])
except Exception:
    pass
EOF
}
version=$(manifest version)
version=${version:-1.20.2}
lock_sha=$(manifest cargo_lock_sha256)
module=github.com/daulet/tokenizers

cache=${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}
dest="$cache/tokenizers/$version"
lib="$dest/libtokenizers.a"
stamp="$dest/STAMP"

log() { printf 'build-tokenizers: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [[ "${FORCE:-}" != 1 && -f "$lib" && -f "$stamp" ]]; then
	want=$(sed -n 's/^sha256=//p' "$stamp")
	if [[ -n "$want" && "$(sha256 "$lib")" == "$want" ]]; then
		log "present: $lib (sha256 $want)"
		exit 0
	fi
	log "stamp does not match $lib; rebuilding"
fi

command -v go >/dev/null || die "go not found in PATH"
command -v cargo >/dev/null || die "cargo not found in PATH: install Rust (https://rustup.rs) and re-run $0"

src="$(go env GOMODCACHE)/$module@v$version"
if [[ ! -f "$src/Cargo.lock" ]]; then
	log "downloading Go module $module@v$version"
	(cd "$repo" && go mod download "$module@v$version")
fi
[[ -f "$src/Cargo.lock" ]] || die "$src/Cargo.lock missing after go mod download"
if [[ -n "$lock_sha" && "$(sha256 "$src/Cargo.lock")" != "$lock_sha" ]]; then
	die "$src/Cargo.lock sha256 $(sha256 "$src/Cargo.lock") != pinned $lock_sha (models/manifest.json)"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/toolgate-tokenizers.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The module cache is read-only: build on a writable copy.
cp -r "$src/." "$work/src"
chmod -R u+w "$work/src"

log "cargo build --release --locked ($module@v$version, $(rustc --version))"
start=$(date +%s)
(cd "$work/src" && CARGO_TARGET_DIR="$work/target" cargo build --release --locked --lib >&2)
end=$(date +%s)
built="$work/target/release/libtokenizers.a"
[[ -f "$built" ]] || die "cargo finished but $built is missing"

mkdir -p "$dest"
tmp="$dest/.libtokenizers.a.$$"
cp "$built" "$tmp"
sum=$(sha256 "$tmp")
mv -f "$tmp" "$lib"
cat >"$stamp.tmp" <<EOF
module=$module@v$version
rustc=$(rustc --version)
cargo=$(cargo --version)
sha256=$sum
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
build_seconds=$((end - start))
EOF
mv -f "$stamp.tmp" "$stamp"
log "installed $lib (sha256 $sum, built in $((end - start))s)"
