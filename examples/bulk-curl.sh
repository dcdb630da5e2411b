#!/usr/bin/env bash
# Scores a file of indicators (one per line) in bulks of up to 10,000 with curl and jq-free shell, printing one
# NDJSON line per indicator: value, score, category, first recommended action.
#   IOCV_URL=http://127.0.0.1:8080 IOCV_KEY=iocv_... ./bulk-curl.sh indicators.txt
set -euo pipefail
: "${IOCV_URL:?set IOCV_URL}" "${IOCV_KEY:?set IOCV_KEY}"
file="${1:?usage: bulk-curl.sh FILE}"
batch=10000
split -l "$batch" "$file" /tmp/iocv-batch.$$.
trap 'rm -f /tmp/iocv-batch.$$.*' EXIT
for part in /tmp/iocv-batch.$$.*; do
  # Build {"indicators":[{"value":"..."},...]} with the values JSON-escaped by python3 (present on most SIEM hosts).
  body=$(python3 -c 'import json,sys; print(json.dumps({"indicators":[{"value":l.strip()} for l in sys.stdin if l.strip()],"signal_details":"top"}))' < "$part")
  curl -sS --fail-with-body --retry 3 --retry-connrefused -X POST "$IOCV_URL/api/v2/ioc/verdict/bulk" \
    -H 'content-type: application/json' -H "x-api-key: $IOCV_KEY" -H 'accept: application/x-ndjson' \
    --data-binary "$body" |
  python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    risk = r.get("risk") or {}
    actions = r.get("recommended_actions") or [{}]
    print(json.dumps({"value": r["indicator"]["value"], "score": risk.get("score"), "category": risk.get("category"),
                      "action": actions[0].get("action"), "errors": r.get("errors", [])}))'
done
