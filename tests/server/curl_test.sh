#!/usr/bin/env bash
# lily serve driven by curl: a streamed chat answer in Server-Sent Events, a
# completion, a malformed request, the metrics, and the refusals to start
# (port in use, missing model), on a loopback port.
set -euo pipefail
lily="$1"; model="$2"
log=$(mktemp); trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
"$lily" serve "$model" --port 0 2>"$log" & pid=$!
for _ in $(seq 300); do
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
base="http://127.0.0.1:$port"
fail() { echo "FAIL: $*"; exit 1; }

out=$(curl -sN "$base/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0,"stream":true}')
[ "$(grep -c '^data: ' <<<"$out")" -ge 3 ] || fail "too few events: $out"
tail -n 2 <<<"$out" | grep -q '^data: \[DONE\]$' || fail "no [DONE] at the end: $out"
grep -q '"finish_reason":"length"' <<<"$out" || fail "no finish_reason: $out"

out=$(curl -s "$base/v1/completions" -d '{"prompt":"abc","max_tokens":3}')
grep -q '"object":"text_completion"' <<<"$out" || fail "completion: $out"

code=$(curl -s -o /tmp/lily_curl_err.json -w '%{http_code}' "$base/v1/chat/completions" -d '{"messages":')
[ "$code" = 400 ] || fail "malformed JSON gave $code"
grep -q '"error":{"message":"the request body is not valid JSON' /tmp/lily_curl_err.json || fail "$(cat /tmp/lily_curl_err.json)"

curl -s "$base/metrics" | grep -q '^lily_requests_total 2$' || fail "metrics: $(curl -s "$base/metrics")"

# a second server on the same port, and a model that is not there, end with an error instead of serving
out=$(timeout 30 "$lily" serve "$model" --port "$port" 2>&1) && fail "a second server started on $port: $out"
grep -q "cannot listen on 127.0.0.1:$port" <<<"$out" || fail "port in use: $out"
rc=0; out=$(timeout 30 "$lily" serve /no/such/model --port 0 2>&1) || rc=$?
[ $rc = 1 ] || fail "a missing model gave exit $rc: $out"
grep -q "error: model '/no/such/model'" <<<"$out" || fail "missing model: $out"
echo "6 passed, 0 failed"
