# The walk-through's two request helpers (docs/walkthrough.md): source it
# (. examples/rpc.sh), then
#
#   rpc   TOKEN JSON   one A2A 1.0 JSON-RPC request to writ (A2A-Version: 1.0)
#   rpc03 TOKEN JSON   the same as A2A 0.3 (no A2A-Version header)
#
# Each prints the status line, writ's headers (Writ-Answered-By: writ on
# every answer writ gives itself, Writ-Decision-Id naming its decision) and
# the answer. WRIT_LISTEN is writ's address (default 127.0.0.1:8080).
rpc() { _rpc "$1" "$2" -H 'A2A-Version: 1.0'; }
rpc03() { _rpc "$1" "$2"; }
_rpc() {
  curl -s -i "http://${WRIT_LISTEN:-127.0.0.1:8080}/" -H "Authorization: Bearer $1" \
    -H 'Content-Type: application/json' "${@:3}" -d "$2" | grep -Ei '^(HTTP/|writ-|\{)'
  echo
}
