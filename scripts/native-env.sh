#!/usr/bin/env bash
# native-env.sh points the Go toolchain and toolgate at the native pieces in
# the toolgate cache (${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}):
#
#   CGO_ENABLED=1
#   CGO_LDFLAGS=-L<cache>/tokenizers/<version>   (libtokenizers.a, for github.com/daulet/tokenizers)
#   TOOLGATE_ORT_LIB=<cache>/onnxruntime/<version>/libonnxruntime.so.1
#
# Use it either way:
#   source scripts/native-env.sh          # exports the variables into this shell
#   scripts/native-env.sh --print         # prints KEY=VALUE lines (for the Makefile); exit 0
#   scripts/native-env.sh --check         # exit status 1 when a piece is missing
#
# A missing piece is reported on stderr with the script that installs it
# (or `make deps` for all of them). Sourcing never exits the caller's shell.

_tg_native_env() {
	local here repo cache tok_ver ort_ver ort_file tok_dir ort_lib missing=0
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	repo=$(cd "$here/.." && pwd)
	cache=${TOOLGATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toolgate}

	# Versions come from models/manifest.json ("runtime"); the defaults match it.
	local vers
	vers=$(python3 - "$repo/models/manifest.json" <<'EOF' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))["runtime"]
print(r["tokenizers"]["version"], r["onnxruntime"]["version"], r["onnxruntime"]["file"])
EOF
	)
	read -r tok_ver ort_ver ort_file <<<"$vers"
	tok_ver=${tok_ver:-1.20.2}
	ort_ver=${ort_ver:-1.30.0}
	ort_file=${ort_file:-libonnxruntime.so.1}

	tok_dir="$cache/tokenizers/$tok_ver"
	if [[ ! -f "$tok_dir/libtokenizers.a" ]]; then
		echo "native-env: missing $tok_dir/libtokenizers.a: run scripts/build-tokenizers.sh (or make deps)" >&2
		missing=1
	fi
	ort_lib=${TOOLGATE_ORT_LIB:-"$cache/onnxruntime/$ort_ver/$ort_file"}
	if [[ ! -f "$ort_lib" ]]; then
		echo "native-env: missing $ort_lib: run scripts/fetch-onnxruntime.sh (or make deps)" >&2
		missing=1
	fi

	local ldflags="-L$tok_dir"
	case " ${CGO_LDFLAGS:-} " in
	*" $ldflags "*) ldflags=$CGO_LDFLAGS ;;
	*) ldflags="$ldflags${CGO_LDFLAGS:+ $CGO_LDFLAGS}" ;;
	esac

	_TG_CGO_LDFLAGS=$ldflags
	_TG_ORT_LIB=$ort_lib
	return $missing
}

_tg_mode=${1:-}
if _tg_native_env; then _tg_missing=0; else _tg_missing=1; fi
case "$_tg_mode" in
--print)
	printf 'CGO_ENABLED=1\nCGO_LDFLAGS=%s\nTOOLGATE_ORT_LIB=%s\n' "$_TG_CGO_LDFLAGS" "$_TG_ORT_LIB"
	;;
--check) ;;
*)
	export CGO_ENABLED=1
	export CGO_LDFLAGS="$_TG_CGO_LDFLAGS"
	export TOOLGATE_ORT_LIB="$_TG_ORT_LIB"
	;;
esac
unset -f _tg_native_env
unset _TG_CGO_LDFLAGS _TG_ORT_LIB _tg_mode
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
	# --print always succeeds (the warnings are on stderr); --check reports.
	[[ "${1:-}" == --print ]] && exit 0
	exit "$_tg_missing"
fi
unset _tg_missing
return 0 2>/dev/null || true
