#!/usr/bin/env bash
# Build the Go worker into .bin/consumer (modules from the Go module proxy, go-sqlite3 with cgo).
# A second call costs a few stat()s: .bin/.installed holds the hash of the sources and of the Go
# version it was built from; a change to either rebuilds it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stamp="$here/.bin/.installed"
wanted=$( (cat "$here/go.mod" "$here/go.sum" "$here/main.go"; go version) | sha256sum | cut -d' ' -f1)
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0
mkdir -p "$here/.bin"
exec 9>"$here/.bin/.install.lock"
flock 9
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0
echo "building the franz_inbox consumer into $here/.bin ..." >&2
(cd "$here" && CGO_ENABLED=1 go build -mod=readonly -o .bin/consumer .)
echo "$wanted" >"$stamp"
