#!/usr/bin/env bash
# Regenerates the A2A wire fixtures under testdata/a2a/ from the real SDKs:
#   - js/capture.mjs : @a2a-js/sdk 1.3.0 server + client -> v1.0/{jsonrpc,rest}, v1.0/card, v0.3/rest
#   - go/ (main.go)  : a2a-go v0.3.3 server + client     -> v0.3/jsonrpc, v0.3/card
# Usage: bash testdata/capture/run.sh   (from anywhere; `make capture` runs it)
# Needs Node >= 20 with npm, and Go. Exits non-zero on any failure; the
# fixture tree is replaced only after both captures succeeded.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/../a2a"
fixtures="$(cd "$here/../a2a" && pwd)"

command -v node >/dev/null || { echo "run.sh: node not found" >&2; exit 1; }
command -v go >/dev/null || { echo "run.sh: go not found" >&2; exit 1; }

if [ ! -d "$here/js/node_modules" ]; then
  (cd "$here/js" && npm ci --no-audit --no-fund)
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

(cd "$here/js" && timeout 120 node capture.mjs "$tmp")
(cd "$here/go" && GOWORK=off GOFLAGS=-mod=readonly timeout 300 go run . "$tmp")

# Sanity: both trees complete, and every file parses with Go's
# http.ReadRequest / http.ReadResponse with nothing left over.
for want in v1.0/card.response.http v1.0/jsonrpc/send.request.http v1.0/rest/send.response.http \
            v0.3/card.response.http v0.3/jsonrpc/send.response.http v0.3/rest/send.request.http; do
  [ -s "$tmp/$want" ] || { echo "run.sh: missing $want" >&2; exit 1; }
done

(cd "$here/go" && GOWORK=off GOFLAGS=-mod=readonly go run . -check "$tmp")

for v in v1.0 v0.3; do
  rm -rf "${fixtures:?}/$v"
  cp -R "$tmp/$v" "$fixtures/$v"
done
n="$(find "$fixtures" -name '*.http' | wc -l | tr -d ' ')"
echo "run.sh: wrote $n fixture files under $fixtures"
