"""Small requests' latency beside one big request on moverkit's server (docs/generation.md, "Bounded
and fair"): one client posts a /score request of 4,000 rows; another posts a request of 8 rows every
0.5 s until the big one is answered; the small requests' p50 and p99 are printed, for each
``request_rows`` given (4,000 puts the big request's rows in the queue at once, as before issue 67).

    python deploy/fairness.py --data data/wmt17_seg_da_to_en.tsv --request-rows 32 4000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--metric", default="twmd")
    parser.add_argument("--rows", type=int, default=4_000)
    parser.add_argument("--request-rows", type=int, nargs="+", default=[32, 4_000])
    args = parser.parse_args()

    import ray
    import requests
    from ray import serve

    import moverkit.serve

    predictions, references = read_pairs(args.data)
    big = {
        "predictions": [predictions[i % len(predictions)] for i in range(args.rows)],
        "references": [references[i % len(references)] for i in range(args.rows)],
    }
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        for rows in args.request_rows:
            url = moverkit.serve.start(
                args.metric,
                port=8123,
                replicas=1,
                cpus_per_replica=2,
                batching=moverkit.serve.Batching(request_rows=rows),
                limits=moverkit.serve.Limits(texts=2 * args.rows),
            )
            requests.post(f"{url}/score", json={"predictions": predictions[:8], "references": references[:8]})
            latencies: list[float] = []
            done = threading.Event()

            def post_big(url=url, rows=rows, done=done):
                started = time.perf_counter()
                answer = requests.post(f"{url}/score", json=big, timeout=3_600)
                answer.raise_for_status()
                print(f"request_rows={rows}: the {args.rows}-row request took {time.perf_counter() - started:.1f} s")
                done.set()

            thread = threading.Thread(target=post_big)
            thread.start()
            time.sleep(0.5)
            k = 0
            while not done.is_set():
                small = {
                    "predictions": predictions[8 * k : 8 * k + 8],
                    "references": references[8 * k : 8 * k + 8],
                }
                started = time.perf_counter()
                requests.post(f"{url}/score", json=small, timeout=3_600).raise_for_status()
                latencies.append(time.perf_counter() - started)
                k = (k + 1) % 30
                time.sleep(0.5)
            thread.join()
            latencies.sort()
            p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
            print(
                json.dumps(
                    {
                        "request_rows": rows,
                        "small_requests": len(latencies),
                        "p50_s": round(statistics.median(latencies), 3),
                        "p99_s": round(p99, 3),
                        "max_s": round(latencies[-1], 3),
                    }
                ),
                flush=True,
            )
            serve.delete("moverkit")
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def read_pairs(path: str) -> tuple[list[str], list[str]]:
    """The system translations and references of the WMT17 judgments TSV."""
    import csv

    with open(path, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    key_p = next(k for k in rows[0] if k.lower() in ("hypothesis", "translation", "prediction"))
    key_r = next(k for k in rows[0] if k.lower() in ("reference", "ref", "references"))
    return [r[key_p] for r in rows], [r[key_r] for r in rows]


if __name__ == "__main__":
    main()
