#!/usr/bin/env bash
# fetch-model.sh fetches all-MiniLM-L6-v2 (ONNX + tokenizer.json) into the models
# folder: ${TOOLGATE_MODELS_DIR:-${TOOLGATE_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/toolgate}/models}/all-MiniLM-L6-v2/
#
#   scripts/fetch-model.sh                      # fp32 (default)
#   scripts/fetch-model.sh --variant int8       # or: --variant all
#   scripts/fetch-model.sh --from /mnt/mirror   # air-gapped: a folder with the files or the jars
#   scripts/fetch-model.sh --dir /some/models --source maven
#
# Sources, per file, in order (models/manifest.json pins every sha256): the --from folder,
# Hugging Face (pinned commits), Maven Central (langchain4j jars; the jar and the entry are
# both checked). Same code as `toolgate models fetch` (internal/modelscmd), built without cgo so
# it works before the tokenizer library exists. Idempotent: files already in place with a
# pinned sha256 are kept.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."
command -v go >/dev/null || { echo "fetch-model: go not found in PATH" >&2; exit 1; }
# Built into bin/ (beside bin/toolgate), then run: `go run` turns every exit
# status into 1 and adds a line "exit status N" (a usage error is 2, as
# `toolgate models fetch` says it). An up-to-date bin/fetch-model is not
# linked again (0.3 s; a fresh link in a temp folder each run took 2.4 s).
CGO_ENABLED=0 go build -o bin/fetch-model ./scripts/fetchmodel
exec bin/fetch-model "$@"
