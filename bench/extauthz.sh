#!/usr/bin/env bash
# Envoy mode under load: ghz against writ's gRPC ext_authz server, the way
# ../shared/BENCHMARKS.md measured OPA's Envoy plugin. writ (`writ serve`, a
# deploy/envoy/writ.yaml-like config) is pinned to CPU 0, ghz to CPU 1.
#
# The request is bench/request_allow.json: BENCHMARKS.md's A2A 1.0 SendMessage
# (RS256 JWT with a two-hop act chain, push config with a token, text and data
# parts) with one change: its configuration carried `"blocking": false`, an A2A
# 0.3 field that writ refuses in a 1.0 request (-32602); the copy says
# `"returnImmediately": true`, the 1.0 spelling, so the check is the allowed
# delegation it was meant to be.
#
# Runs, for each policy: a 3,000-check warm-up, maximum throughput (-c 16 -z
# DURATION), then fixed rates (-c 32 --rps R -z DURATION). Policies: the shipped
# one (decision cache on, as deployed: a repeated delegation is a lookup), the
# shipped one with the decision cache off (every check evaluates the policy),
# and an always-allow policy (the baseline). Prints one table.
#
# Environment: DURATION (15s), RATES ("1000 2000 4000"), PORT (19191),
# GHZ (ghz on PATH, else $(go env GOPATH)/bin/ghz, installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-15s}
RATES=${RATES:-"1000 2000 4000"}
PORT=${PORT:-19191}
REQ=bench/request_allow.json
CALL=envoy.service.auth.v3.Authorization/Check
WORK=$(mktemp -d)
PID=""

cleanup() {
	if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT

for tool in jq taskset; do
	command -v "$tool" >/dev/null || { echo "bench/extauthz.sh needs $tool" >&2; exit 1; }
done
GHZ=${GHZ:-$(command -v ghz || echo "$(go env GOPATH)/bin/ghz")}
if [ ! -x "$GHZ" ]; then
	echo "installing ghz" >&2
	(cd /tmp && go install github.com/bojand/ghz/cmd/ghz@latest)
	GHZ="$(go env GOPATH)/bin/ghz"
fi

go build -o "$WORK/writ" ./cmd/writ

mkdir -p "$WORK/allow"
cat >"$WORK/allow/allow.rego" <<'EOF'
package writ.authz

decision := {"allow": true, "denials": []}
EOF

# config POLICIES CACHE: a writ.yaml like deploy/envoy/writ.yaml, with the
# bench token's JWKS as a file and reflection on (ghz reads the service from it).
config() {
	cat <<EOF
listen: 127.0.0.1:0
admin: 127.0.0.1:0
policies: [$1]
decision_cache_size: $2
identity:
  jwt:
    - issuer: https://idp.bank.ae
      audiences: [a2a-gateway]
      jwks_file: testdata/identity/bench_jwks.json
agents:
  - name: sanctions-screening-agent
    route: /
    upstream: http://127.0.0.1:9101
    public_url: https://sanctions-screening-agent.agents.bank.ae
    owner: group-compliance
    tenants: [wholesale, retail]
    max_data_classification: restricted
    security_schemes: [oauth2]
    skills:
      - {id: screen, tags: [sanctions, compliance, screening]}
envoy:
  grpc_listen: 127.0.0.1:$PORT
  max_request_bytes: 1048576
  reflection: true
EOF
}

# verify CONFIG: the request must be the allowed delegation (writ eval runs the
# same identity, input and policy).
verify() {
	jq -j '.attributes.request.http as $h | "\($h.method) \($h.path) HTTP/1.1\r\nhost: \($h.host)\r\n" +
		"content-length: \($h.body | utf8bytelength)\r\n" +
		([$h.headers | to_entries[] | select(.key | startswith(":") | not) | "\(.key): \(.value)\r\n"] | join("")) +
		"\r\n" + $h.body' "$REQ" >"$WORK/request.http"
	allow=$("$WORK/writ" eval -request "$WORK/request.http" -config "$1" | jq -r '.decision.allow')
	[ "$allow" = true ] || { echo "bench request is not allowed under $1" >&2; exit 1; }
}

start() {
	taskset -c 0 "$WORK/writ" serve -config "$1" 2>"$WORK/writ.log" &
	PID=$!
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return; fi
		sleep 0.1
	done
	cat "$WORK/writ.log" >&2
	exit 1
}

stop() {
	kill "$PID"
	wait "$PID" 2>/dev/null || true
	PID=""
}

ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
HZ=$(getconf CLK_TCK)

# load LABEL GHZ-ARGS...: one ghz run; prints a table row.
load() {
	local label=$1 t0 t1
	shift
	t0=$(ticks)
	taskset -c 1 "$GHZ" --insecure --call "$CALL" -D "$REQ" --format json -o "$WORK/out.json" "$@" "127.0.0.1:$PORT"
	t1=$(ticks)
	jq -r --arg what "$label" --arg policy "$POLICY" --argjson cpu "$(((t1 - t0) * 1000000 / HZ))" '
		def ms(p): ((.latencyDistribution // []) | map(select(.percentage == p)) | (.[0].latency // 0) / 1e6);
		def cut: test("transport is closing|client connection is closing");
		def errs(f): ([(.errorDistribution // {}) | to_entries[] | select(.key | f) | .value] | add // 0);
		"| \($policy) | \($what) | \(.rps | floor) | \(ms(50) * 100 | round / 100) | \(ms(99) * 100 | round / 100) | \(errs(cut | not)) (\(errs(cut))) | \(if .count > 0 then ($cpu / .count | round) else 0 end) |"' \
		"$WORK/out.json"
}

bench() {
	POLICY=$1
	config "$2" "$3" >"$WORK/writ.yaml"
	verify "$WORK/writ.yaml"
	start "$WORK/writ.yaml"
	taskset -c 1 "$GHZ" --insecure --call "$CALL" -D "$REQ" -n 3000 -c 16 "127.0.0.1:$PORT" >/dev/null
	load "max (-c 16)" -c 16 -z "$DURATION"
	for r in $RATES; do
		load "$r/s (-c 32)" -c 32 --rps "$r" -z "$DURATION"
	done
	echo "| $POLICY | RSS after | $(awk '/VmRSS/ {print int($2 / 1024) " MiB"}' "/proc/$PID/status") | | | | |"
	stop
}

# errors: failed checks (in parentheses: calls in flight when ghz stopped at the
# end of the run, which it cancels and counts as errors).
echo "| policy | load | checks/s | p50 ms | p99 ms | errors (cut at end) | server CPU µs/check |"
echo "|---|---|---|---|---|---|---|"
bench "shipped" policies 10000
bench "shipped, cache off" policies -1
bench "always-allow" "$WORK/allow" 10000
