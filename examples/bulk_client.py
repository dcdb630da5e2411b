"""Scores indicators from a file (one per line) in bulks of up to 10,000 with requests, retrying 429 and 503 after
the Retry-After the service sends, and prints one JSON line per indicator: value, score, category, first action.

    IOCV_URL=http://127.0.0.1:8080 IOCV_KEY=iocv_... python3 bulk_client.py indicators.txt
"""
import json
import os
import sys
import time

import requests

URL = os.environ["IOCV_URL"]
KEY = os.environ["IOCV_KEY"]
BATCH = 10_000


def bulk(session, indicators):
    for attempt in range(1, 6):
        res = session.post(
            f"{URL}/api/v2/ioc/verdict/bulk",
            json={"indicators": indicators, "signal_details": "top", "source": {"channel": "soar", "product": "example"}},
            headers={"x-api-key": KEY},
            timeout=60,
        )
        if res.status_code == 200:
            return res.json()
        if res.status_code in (429, 503) and attempt < 5:
            time.sleep(float(res.headers.get("retry-after", "1")))
            continue
        body = res.json()
        raise RuntimeError(f"bulk failed: {res.status_code} {body.get('code')}: {body.get('message')}")


def main(path):
    with open(path, encoding="utf-8") as f:
        values = [line.strip() for line in f if line.strip()]
    with requests.Session() as session:
        for i in range(0, len(values), BATCH):
            answer = bulk(session, [{"value": v} for v in values[i:i + BATCH]])
            for r in answer["results"]:
                risk = r.get("risk") or {}
                actions = r.get("recommended_actions") or [{}]
                print(json.dumps({"value": r["indicator"]["value"], "score": risk.get("score"), "category": risk.get("category"),
                                  "action": actions[0].get("action"), "errors": r.get("errors", [])}))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: IOCV_URL=... IOCV_KEY=... python3 bulk_client.py FILE")
    main(sys.argv[1])
