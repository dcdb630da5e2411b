"""A Splunk-style external lookup (batch): reads CSV on stdin with a `value` column (and any others), asks
ioc-verdict for every value in bulks of up to 10,000, and writes the same CSV on stdout with `ioc_score`,
`ioc_category`, `ioc_strength` and `ioc_action` filled in. Standard library only (Splunk's Python has no requests).

    IOCV_URL=http://127.0.0.1:8080 IOCV_KEY=iocv_... python3 splunk_lookup.py < events.csv > enriched.csv

In transforms.conf: [ioc_verdict] external_cmd = splunk_lookup.py value, fields_list = value, ioc_score, ...
(the key and URL come from the environment of the search head).
"""
import csv
import json
import os
import sys
import time
import urllib.error
import urllib.request

URL = os.environ["IOCV_URL"].rstrip("/")
KEY = os.environ["IOCV_KEY"]
BATCH = 10_000
FIELDS = ["ioc_score", "ioc_category", "ioc_strength", "ioc_action"]


def bulk(values):
    body = json.dumps({"indicators": [{"value": v} for v in values], "source": {"channel": "siem", "product": "splunk"}}).encode()
    for attempt in range(1, 6):
        req = urllib.request.Request(f"{URL}/api/v2/ioc/verdict/bulk", data=body, method="POST",
                                     headers={"content-type": "application/json", "x-api-key": KEY})
        try:
            with urllib.request.urlopen(req, timeout=60) as res:
                return json.load(res)["results"]
        except urllib.error.HTTPError as err:
            if err.code in (429, 503) and attempt < 5:
                time.sleep(float(err.headers.get("retry-after", "1")))
                continue
            raise


def main():
    reader = csv.DictReader(sys.stdin)
    rows = list(reader)
    out = csv.DictWriter(sys.stdout, fieldnames=list(reader.fieldnames or ["value"]) + [f for f in FIELDS if f not in (reader.fieldnames or [])])
    out.writeheader()
    wanted = [r for r in rows if r.get("value")]
    for i in range(0, len(wanted), BATCH):
        part = wanted[i:i + BATCH]
        for row, result in zip(part, bulk([r["value"] for r in part])):
            risk = result.get("risk") or {}
            actions = result.get("recommended_actions") or [{}]
            row.update({"ioc_score": risk.get("score", ""), "ioc_category": risk.get("category", ""),
                        "ioc_strength": risk.get("strength", ""), "ioc_action": actions[0].get("action", "")})
    for row in rows:
        out.writerow(row)


if __name__ == "__main__":
    main()
