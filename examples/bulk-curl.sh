#!/usr/bin/env bash
# Scores a file of indicators (one per line) with curl, in bulks of up to 10,000, and prints the CSV answers
# (value,type,normalized,score,strength,category,top_signals,error) with one header line.
#   IOCV_URL=http://127.0.0.1:8080 IOCV_KEY=iocv_... ./bulk-curl.sh indicators.txt > verdicts.csv
# Needs curl and jq. Retries a 429/503 after the Retry-After the service sends (curl --retry honours it).
set -euo pipefail
: "${IOCV_URL:?set IOCV_URL}" "${IOCV_KEY:?set IOCV_KEY}"
file="${1:?usage: bulk-curl.sh FILE}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
split -l 10000 "$file" "$tmp/part."
first=1
for part in "$tmp"/part.*; do
  jq -R -s '{signal_details: "top", indicators: [split("\n")[] | select(length > 0) | {value: .}]}' "$part" > "$tmp/body.json"
  curl -sS --fail-with-body --retry 5 --retry-connrefused -X POST "$IOCV_URL/api/v2/ioc/verdict/bulk" \
    -H 'content-type: application/json' -H 'accept: text/csv' -H "x-api-key: $IOCV_KEY" \
    --data-binary "@$tmp/body.json" -o "$tmp/answer.csv"
  if [ "$first" = 1 ]; then cat "$tmp/answer.csv"; first=0; else tail -n +2 "$tmp/answer.csv"; fi
done
