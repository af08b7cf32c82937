#!/usr/bin/env bash
# Install what the express-idempotency example needs: Redis and Node from Debian's packages when
# absent, then the exact npm packages of package-lock.json.  A second call costs a few stat()s:
# node_modules/.installed holds the hash of the lock file it was installed from.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shared="$here/../shared"

"$shared/ensure-command" redis-server redis-server
"$shared/ensure-command" node nodejs
"$shared/ensure-command" npm npm

stamp="$here/node_modules/.installed"
wanted=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0

# Two starts at once (two app processes) must not install twice into one directory.
exec 9>"$here/.install.lock"
flock 9
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0
echo "installing the express-idempotency example's npm packages ..." >&2
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
echo "$wanted" >"$stamp"
