"""Latency of a Space under load, for docs/speed.md: ``python tests/spaces/space_latency.py [app]``
serves the Space's app (default twmd) on 127.0.0.1 and sends 12 gradio_client visitors at once,
each pressing Score on its own 50 WMT17 pairs (data/wmt17_seg_da_to_en.tsv, consecutive slices);
prints each visitor's latency (submit to answer), their p50 and p95, the refusals, the wall time
and the process's peak resident memory."""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

from spaceserver import SPACES, import_app, serve  # noqa: E402

VISITORS = 12
PAIRS_EACH = 50
WMT17 = Path(__file__).resolve().parents[2] / "data" / "wmt17_seg_da_to_en.tsv"


def peak_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM"))


def main(name: str = "twmd") -> None:
    from gradio_client import Client
    from gradio_client.utils import QueueError

    from moverkit.judgments import read_judgments

    data = read_judgments(WMT17)
    app = import_app(SPACES / name / "app.py")
    url = serve(app.demo)
    clients = [Client(url, verbose=False, analytics_enabled=False) for _ in range(VISITORS)]
    clients[0].predict(predictions_text="warm up", references_text="warm up", api_name="/score")
    latencies, refused = [], []
    lock = threading.Lock()

    def visit(i):
        part = slice(i * PAIRS_EACH, (i + 1) * PAIRS_EACH)
        start = time.perf_counter()
        try:
            clients[i].predict(
                predictions_text="\n".join(data.predictions[part]),
                references_text="\n".join(data.references[part]),
                api_name="/score",
            )
        except QueueError as error:
            with lock:
                refused.append(str(error))
            return
        with lock:
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    threads = [threading.Thread(target=visit, args=(i,)) for i in range(VISITORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    app.demo.close()
    cuts = statistics.quantiles(latencies, n=20, method="inclusive")
    print(f"{name}: {VISITORS} visitors x {PAIRS_EACH} WMT17 pairs, {len(refused)} refused")
    print("latencies (s):", " ".join(f"{s:.2f}" for s in sorted(latencies)))
    print(
        f"p50 {statistics.median(latencies):.2f} s, p95 {cuts[18]:.2f} s, wall {wall:.2f} s, peak RSS {peak_mb():.0f} MB"
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
