#!/usr/bin/env bash
# ext_proc under load: ghz against writ's ext_proc server
# (envoy.service.ext_proc.v3.ExternalProcessor/Process), as bench/extauthz.sh
# measures the ext_authz server. writ (`writ serve`) is pinned to CPU 0, ghz
# to CPU 1. Kept apart from bench/extauthz.sh; `make bench-envoy` runs both.
#
# Each call is one stream, as Envoy opens one per HTTP request, carrying the
# messages Envoy sends for bench/request_allow.json (the A2A 1.0 SendMessage
# bench/extauthz.sh checks: RS256 JWT with a two-hop act chain, push config
# with a token, text and data parts):
#   request phase       request headers, then the buffered body: writ decides,
#                       sets Writ-Caller and strips the push config (a body
#                       mutation);
#   request + response  the same, then the agent's answer (headers, then its
#                       JSON body, a completed task): writ records it in the
#                       lifecycle store, as it does for every answer.
# Policies: the shipped one (decision cache on, as deployed) and an
# always-allow policy (the baseline). Runs, for each: a 3,000-call warm-up,
# maximum throughput (-c 16 -z DURATION), then fixed rates (-c 32 --rps R -z
# DURATION). Prints one table (markdown).
#
# Environment: DURATION (15s), RATES ("1000 2000 4000"), PORT (19193),
# GHZ (ghz on PATH, else $(go env GOPATH)/bin/ghz, installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-15s}
RATES=${RATES:-"1000 2000 4000"}
PORT=${PORT:-19193}
REQ=bench/request_allow.json
CALL=envoy.service.ext_proc.v3.ExternalProcessor/Process
WORK=$(mktemp -d)
PID=""

cleanup() {
	if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT

for tool in jq taskset base64; do
	command -v "$tool" >/dev/null || { echo "bench/extproc.sh needs $tool" >&2; exit 1; }
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

# The stream's messages, from the CheckRequest: headers as a header map
# (pseudo-headers included), the body as bytes; the agent's answer.
ANSWER='{"jsonrpc":"2.0","id":"req-7f3a","result":{"task":{"id":"t-bench","contextId":"ctx-wholesale-981","status":{"state":"TASK_STATE_COMPLETED"}}}}'
jq --arg answer "$(printf '%s' "$ANSWER" | base64 -w0)" '.attributes.request.http as $h | [
	{protocolConfig: {requestBodyMode: "BUFFERED", responseBodyMode: "BUFFERED"},
	 requestHeaders: {headers: {headers: [$h.headers | to_entries[] | {key: .key, value: .value}]}}},
	{requestBody: {body: ($h.body | @base64), endOfStream: true}},
	{responseHeaders: {headers: {headers: [{key: ":status", value: "200"}, {key: "content-type", value: "application/json"}]}}},
	{responseBody: {body: $answer, endOfStream: true}}]' "$REQ" >"$WORK/both.json"
jq '.[0:2]' "$WORK/both.json" >"$WORK/request.json"

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
  ext_proc_listen: 127.0.0.1:$PORT
  max_request_bytes: 1048576
  reflection: true
EOF
}

start() {
	# The decision log (stdout) goes to a file, as deployed, not to the table.
	taskset -c 0 "$WORK/writ" serve -config "$1" >"$WORK/decisions.jsonl" 2>"$WORK/writ.log" &
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

# verify CONFIG: the request must be the allowed delegation (writ eval runs the
# same identity, input and policy), so that writ forwards it rather than
# answering it itself. (BenchmarkProcess in proxy/extproc checks the stream
# message by message.)
verify() {
	jq -j '.attributes.request.http as $h | "\($h.method) \($h.path) HTTP/1.1\r\nhost: \($h.host)\r\n" +
		"content-length: \($h.body | utf8bytelength)\r\n" +
		([$h.headers | to_entries[] | select(.key | startswith(":") | not) | "\(.key): \(.value)\r\n"] | join("")) +
		"\r\n" + $h.body' "$REQ" >"$WORK/request.http"
	allow=$("$WORK/writ" eval -request "$WORK/request.http" -config "$1" | jq -r '.decision.allow')
	[ "$allow" = true ] || { echo "bench request is not allowed under $1" >&2; exit 1; }
}

# check DATA: one stream completes without error.
check() {
	"$GHZ" --insecure --call "$CALL" -D "$1" -n 1 -c 1 --format json "127.0.0.1:$PORT" >"$WORK/one.json"
	jq -e '(.errorDistribution // {}) == {} and .count == 1' "$WORK/one.json" >/dev/null ||
		{ echo "bench stream failed: $(cat "$WORK/one.json")" >&2; exit 1; }
}

ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
HZ=$(getconf CLK_TCK)

# load LABEL DATA GHZ-ARGS...: one ghz run; prints a table row.
load() {
	local label=$1 data=$2 t0 t1
	shift 2
	t0=$(ticks)
	taskset -c 1 "$GHZ" --insecure --call "$CALL" -D "$data" --format json -o "$WORK/out.json" "$@" "127.0.0.1:$PORT"
	t1=$(ticks)
	jq -r --arg what "$label" --arg policy "$POLICY" --arg phase "$PHASE" --argjson cpu "$(((t1 - t0) * 1000000 / HZ))" '
		def ms(p): ((.latencyDistribution // []) | map(select(.percentage == p)) | (.[0].latency // 0) / 1e6);
		def cut: test("transport is closing|client connection is closing|context canceled");
		def errs(f): ([(.errorDistribution // {}) | to_entries[] | select(.key | f) | .value] | add // 0);
		"| \($policy) | \($phase) | \($what) | \(.rps | floor) | \(ms(50) * 100 | round / 100) | \(ms(99) * 100 | round / 100) | \(errs(cut | not)) (\(errs(cut))) | \(if .count > 0 then ($cpu / .count | round) else 0 end) |"' \
		"$WORK/out.json"
}

bench() {
	POLICY=$1
	config "$2" "$3" >"$WORK/writ.yaml"
	verify "$WORK/writ.yaml"
	start "$WORK/writ.yaml"
	for PHASE in "request" "request + response"; do
		data="$WORK/request.json"
		[ "$PHASE" = "request" ] || data="$WORK/both.json"
		check "$data"
		taskset -c 1 "$GHZ" --insecure --call "$CALL" -D "$data" -n 3000 -c 16 "127.0.0.1:$PORT" >/dev/null
		load "max (-c 16)" "$data" -c 16 -z "$DURATION"
		for r in $RATES; do
			load "$r/s (-c 32)" "$data" -c 32 --rps "$r" -z "$DURATION"
		done
	done
	echo "| $POLICY | | RSS after | $(awk '/VmRSS/ {print int($2 / 1024) " MiB"}' "/proc/$PID/status") | | | | |"
	stop
}

# errors: failed streams (in parentheses: streams in flight when ghz stopped at
# the end of the run, which it cancels and counts as errors).
echo "| policy | phases | load | streams/s | p50 ms | p99 ms | errors (cut at end) | server CPU µs/stream |"
echo "|---|---|---|---|---|---|---|---|"
bench "shipped" policies 10000
bench "always-allow" "$WORK/allow" 10000
