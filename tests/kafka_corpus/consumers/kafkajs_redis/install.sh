#!/usr/bin/env bash
# Install the exact npm packages of package-lock.json into node_modules.  A second call costs a
# few stat()s: node_modules/.installed holds the hash of the lock file it was installed from.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
stamp="$here/node_modules/.installed"
wanted=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0
exec 9>"$here/.install.lock"
flock 9
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0
echo "installing the kafkajs_redis consumer's npm packages ..." >&2
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
echo "$wanted" >"$stamp"
