#!/usr/bin/env bash
# Build the Go worker when needed (install.sh), then run it: start.sh ARGS...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/install.sh"
exec "$here/.bin/consumer" "$@"
