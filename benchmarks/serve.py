"""``moverkit bench serve``: the metric server (:mod:`moverkit.serve`) under concurrent clients,
against the same requests scored in one process, side by side in one run.

``--clients`` clients (32) each post one ``/score`` request of ``--completions`` completions (8) at
once, every round; client k's completions are the system translations of WMT17 segments
8k..8k+7 and its references theirs. The same requests are scored in this process by the metric's
function with the server's arguments (a reward's: on a CPU, encoder batches of 16 texts), one
request at a time, and all of them in one call. Each side is warm (models loaded, one call made)
and the sides take turns, ``--rounds`` times (the median reported). The server runs on a local Ray
cluster of this machine's CPUs, with ``--replicas`` replicas of ``--cpus-per-replica`` CPUs each
(default: the CPUs shared out). Times are wall seconds (the server's work is in other processes),
so the machine should be otherwise idle. Reported: seconds per round, completions per second, the
server against the one batched call (goal: at most 1.3x) and the one-at-a-time path against the
server (goal: at least 3x on a CPU), the p50 and p99 latency of a request, and how many of the
server's scores equal the function's on the request's pairs to the bit (and the largest
difference, against moverkit's tie tolerance).

``--verl-python PY`` also runs verl's ``BatchRewardManager`` with :func:`moverkit.verl.compute_score`
(loaded by verl's own ``get_custom_reward_fn`` from ``pkg://moverkit.verl``) on a ``DataProto``
made with the embedded model's tokenizer, in a subprocess of ``PY``, an interpreter whose
environment imports verl and moverkit (verl 0.9 caps transformers below 5.11, which the test extra
cannot take): how many of its rewards equal :func:`moverkit.reward_function`'s on the responses as
verl decodes them, and its seconds. ``--avx2`` runs it all again in a subprocess capped at AVX2.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from benchmarks._shared import (
    AVX2_ENV,
    child_environment,
    command_parser,
    interleaved,
    machine_isa,
    run_capped,
    text_pairs,
)
from moverkit.formats.options import METRICS, emit, positive_int, rounds

HELP = "the metric server under 32 concurrent clients, against one process (one request at a time, one call)"

VERL_SCRIPT = r"""
import asyncio, json, sys, time
import torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.reward_manager import BatchRewardManager
import moverkit
from moverkit._core import embedded_model_path
from benchmarks.serve import verl_decoded, verl_rollout

metric, path = sys.argv[1], sys.argv[2]
rows = json.load(open(path, encoding="utf-8"))  # [prompt, response, reference] per row
tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
data = verl_rollout(tokenizer, rows)
function = {"path": "pkg://moverkit.verl", "name": "compute_score", "reward_kwargs": {"metric": metric}}
config = OmegaConf.create({"custom_reward_function": function, "reward": {"custom_reward_function": function}})
compute_score = get_custom_reward_fn(config)  # verl <= 0.8 reads custom_reward_function, 0.9 reward.custom_reward_function
manager = BatchRewardManager(tokenizer, num_examine=0, compute_score=compute_score)
manager(data)  # warm: the encoder loads once in this process
start = time.perf_counter()
tensor = manager(data)
seconds = time.perf_counter() - start
lengths, decoded = verl_decoded(tokenizer, data)
got = [float(tensor[i, n - 1]) for i, n in enumerate(lengths)]
exact = moverkit.reward_function(metric)(decoded, references=[ref for _, _, ref in rows])
expected = [float(torch.tensor(v, dtype=torch.float32)) for v in exact]  # the reward tensor is float32
loop, loop_seconds = None, None
try:  # verl 0.9's reward loop: one call per response
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
except ImportError:
    NaiveRewardManager = None
if NaiveRewardManager is not None:
    async def per_sample():
        naive = NaiveRewardManager(config, tokenizer, compute_score)
        return await asyncio.gather(*(naive.run_single(data[i : i + 1]) for i in range(len(rows))))
    start = time.perf_counter()
    loop = [out["reward_score"] for out in asyncio.run(per_sample())]
    loop_seconds = time.perf_counter() - start
import verl, transformers
print(json.dumps({"rewards": got, "expected": expected, "exact": exact, "seconds": seconds, "cells": int((tensor != 0).sum()),
                  "loop": loop, "loop_seconds": loop_seconds, "verl": verl.__version__, "transformers": transformers.__version__}))
"""
"""verl's ``BatchRewardManager`` with moverkit's ``compute_score`` on a ``DataProto`` of the rows of a
JSON file (:func:`verl_rollout`), its reward tensor read at each response's last token; it prints the rewards, the rewards of
:func:`moverkit.reward_function` on the responses as verl decodes them (rounded to float32, the
tensor's type), the seconds of one warm call, and how many cells of the reward tensor are not zero
(one per response: its last token's). Where verl has its reward loop (0.9), it also runs the loop's
``NaiveRewardManager``, which calls ``compute_score`` once per response, on every row at once, and
prints its rewards and seconds."""


def verl_rollout(tokenizer, rows: list) -> object:
    """A verl ``DataProto`` of ``rows`` (``[prompt, response, ground truth]`` each) laid out as verl's
    rollout lays it out: prompts left-padded, responses right-padded, the ground truth under
    ``reward_model``; run in an environment that imports verl (:data:`VERL_SCRIPT`,
    tests/integrations/test_verl_environment.py)."""
    import numpy as np
    import torch
    from verl import DataProto

    tokenizer.padding_side = "left"
    prompts = tokenizer([p for p, _, _ in rows], add_special_tokens=False, padding=True, return_tensors="pt")
    tokenizer.padding_side = "right"
    responses = tokenizer([r for _, r, _ in rows], add_special_tokens=False, padding=True, return_tensors="pt")
    return DataProto.from_dict(
        tensors={
            "prompts": prompts["input_ids"],
            "responses": responses["input_ids"],
            "attention_mask": torch.cat([prompts["attention_mask"], responses["attention_mask"]], dim=1),
        },
        non_tensors={
            "data_source": np.array(["wmt17"] * len(rows), dtype=object),
            "reward_model": np.array([{"ground_truth": truth} for _, _, truth in rows], dtype=object),
            "extra_info": np.array([{"index": i} for i in range(len(rows))], dtype=object),
        },
    )


def verl_decoded(tokenizer, data) -> tuple[list[int], list[str]]:
    """Each response of a :func:`verl_rollout` ``data``: its length in tokens (its last token holds
    its reward in a reward tensor) and its text as verl's reward managers decode it (the response's
    ids without padding, ``skip_special_tokens=True``)."""
    responses = data.batch["responses"]
    lengths = data.batch["attention_mask"][:, -responses.shape[-1] :].sum(dim=1).tolist()
    return lengths, [tokenizer.decode(responses[i][:n], skip_special_tokens=True) for i, n in enumerate(lengths)]


def register(which) -> None:
    parser = command_parser(which, "serve", HELP, command)
    parser.add_argument("--metric", choices=METRICS, default="twmd", help="the metric served (default: twmd)")
    parser.add_argument("--clients", type=positive_int, default=32, help="concurrent clients (default: 32)")
    parser.add_argument("--completions", type=positive_int, default=8, help="completions per request (default: 8)")
    parser.add_argument("--rounds", type=rounds, default=5, help="interleaved timed rounds (median; default: 5)")
    parser.add_argument("--replicas", type=positive_int, default=1, help="server replicas (default: 1)")
    parser.add_argument("--cpus-per-replica", type=positive_int, help="(default: this machine's CPUs shared out)")
    parser.add_argument("--max-batch-size", type=positive_int, help="rows a server batch holds (default: the server's)")
    parser.add_argument("--batch-wait", type=float, help="seconds a server batch waits to fill (default: the server's)")
    parser.add_argument("--verl-python", help="an interpreter whose environment imports verl and moverkit")
    parser.add_argument("--avx2", action="store_true", help="run again limited to AVX2, in a subprocess")


def command(args) -> int:
    if args.avx2:
        return run_capped(capped_argv(args), AVX2_ENV)
    segments = text_pairs(args)
    n = args.completions
    if len(segments) < args.clients * n:
        raise ValueError(f"--data has {len(segments)} usable segments; {args.clients} x {n} completions need more")
    requests = [
        ([h for h, _ in part], [r for _, r in part])
        for part in (segments[k * n : (k + 1) * n] for k in range(args.clients))
    ]
    report = [machine_isa(), "", throughput(args, requests)]
    if args.verl_python:
        report += ["", verl_rewards(args.verl_python, args.metric, requests)]
    return emit("\n".join(report), args.out)


def capped_argv(args) -> list[str]:
    """The command's own options, for its rerun under the AVX2 caps."""
    argv = ["bench", "serve", "--data", str(args.data), "--metric", args.metric, "--rounds", str(args.rounds)]
    argv += ["--clients", str(args.clients), "--completions", str(args.completions), "--replicas", str(args.replicas)]
    argv += ["--cpus-per-replica", str(args.cpus_per_replica)] if args.cpus_per_replica else []
    argv += ["--max-batch-size", str(args.max_batch_size)] if args.max_batch_size else []
    argv += ["--verl-python", args.verl_python] if args.verl_python else []
    return argv + (["--out", str(args.out)] if args.out else [])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def throughput(args, requests: list[tuple[list[str], list[str]]]) -> str:
    """The table: the server, one request at a time and one call, on the same requests."""
    import numpy as np
    import ray

    import moverkit
    import moverkit.serve as server
    from moverkit.facts.ties import tied
    from moverkit.integrations.adapter import checked_output, output_scores
    from moverkit.integrations.registry import get

    function = get(args.metric).function
    arguments = moverkit.reward_function(args.metric, device="cpu").call_arguments()
    everything = ([p for ps, _ in requests for p in ps], [r for _, rs in requests for r in rs])
    cpus = os.cpu_count() or 1
    per_replica = args.cpus_per_replica or max(1, cpus // args.replicas)
    ray.init(num_cpus=max(cpus, per_replica * args.replicas), include_dashboard=False, log_to_driver=False)
    try:
        chosen = {"max_batch_size": args.max_batch_size, "wait_s": args.batch_wait}
        batching = server.Batching(**{key: value for key, value in chosen.items() if value is not None})
        url = server.start(
            args.metric,
            port=free_port(),
            replicas=args.replicas,
            cpus_per_replica=per_replica,
            batching=batching,
            device="cpu",
        )
        latencies, answers = [], {}
        contenders = {
            f"server ({args.replicas} x {per_replica} CPUs, batch wait {batching.wait_s:g} s, {args.clients} concurrent clients)": lambda: (
                answers.update(burst(url, requests, latencies))
            ),
            "one process, one request at a time": lambda: [function(p, r, **arguments) for p, r in requests],
            "one process, one call": lambda: function(*everything, **arguments),
        }
        for run in contenders.values():
            run()  # warm
        latencies.clear()
        times = {label: statistics.median(t) for label, t in interleaved(contenders, args.rounds).items()}
    finally:
        server.stop(shared=False)  # the Ray this process started: Serve goes with it
        ray.shutdown()
    served, one_at_a_time, one_call = times.values()
    output = checked_output(args.metric, None)
    expected = [output_scores(function(p, r, **arguments), output) for p, r in requests]
    pairs = [(a, e) for k, result in answers.items() for a, e in zip(output_scores(result, output), expected[k])]
    same = sum(a == e for a, e in pairs)
    largest = max(abs(a - e) for a, e in pairs)
    completions = sum(len(p) for p, _ in requests)
    lines = [
        f"## Server throughput: {args.metric}, {args.clients} clients x {args.completions} completions = {completions} "
        f"per round (device cpu; median of {args.rounds} interleaved rounds; wall seconds)",
        "",
        "| side | s per round | completions/s | x one call | one at a time / side |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, seconds in times.items():
        lines.append(
            f"| {label} | {seconds:.3f} | {completions / seconds:.1f} | {seconds / one_call:.2f} | {one_at_a_time / seconds:.2f} |"
        )
    p50, p99 = np.percentile(latencies, [50, 99])
    lines += [
        "",
        f"Server against one call: {served / one_call:.2f}x (goal: at most 1.3x); one request at a time against the "
        f"server: {one_at_a_time / served:.2f}x (goal: at least 3x). Latency of a request (all {len(latencies)} of "
        f"the timed rounds): p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms. The server's {len(pairs)} scores of "
        f"the last round: {same} equal to the function's on the request's pairs to the bit, the largest difference "
        f"{largest:.1e} ({'within' if all(tied(a, e) for a, e in pairs) else 'NOT within'} the tie tolerance).",
    ]
    return "\n".join(lines)


def burst(url: str, requests: list, latencies: list) -> dict:
    """Every request posted at once, one client thread each; each answer by request, each request's
    seconds appended to ``latencies``. An answer other than 200 is an error naming it."""
    import requests as http

    ready = threading.Barrier(len(requests))
    answers: dict = {}

    def client(k: int) -> None:
        predictions, references = requests[k]
        ready.wait()
        start = time.perf_counter()
        answer = http.post(f"{url}/score", json={"predictions": predictions, "references": references}, timeout=600)
        latencies.append(time.perf_counter() - start)
        answers[k] = (
            answer.json() if answer.status_code == 200 else RuntimeError(f"{answer.status_code}: {answer.text}")
        )

    threads = [threading.Thread(target=client, args=(k,)) for k in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [a for a in answers.values() if isinstance(a, Exception)]
    if failed or len(answers) != len(requests):
        raise RuntimeError(f"the server failed {len(failed)} of {len(requests)} requests: {failed[:1]}")
    return answers


def verl_rewards(python: str, metric: str, requests: list) -> str:
    """verl's BatchRewardManager with moverkit's compute_score (:data:`VERL_SCRIPT` in ``python``)."""
    rows = [[f"Translate segment {k}:", p, r] for k, (ps, rs) in enumerate(requests) for p, r in zip(ps, rs)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.json"
        path.write_text(json.dumps(rows), encoding="utf-8")
        done = subprocess.run(
            [python, "-c", VERL_SCRIPT, metric, str(path)], capture_output=True, text=True, env=child_environment()
        )
    title = f"## verl's BatchRewardManager with moverkit.verl.compute_score ({metric}, {len(rows)} responses)"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{title}\n\nNot run: {last[:200]}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    same = sum(a == b for a, b in zip(out["rewards"], out["expected"]))
    lines = [
        title,
        "",
        f"verl {out['verl']}, transformers {out['transformers']}: BatchRewardManager's {same} of {len(rows)} rewards "
        f"equal moverkit.reward_function's on the responses as verl decodes them (float32, to the bit), "
        f"{out['cells']} nonzero cells in its reward tensor; one warm call {out['seconds']:.2f} s "
        f"({len(rows) / out['seconds']:.0f} responses/s).",
    ]
    if out["loop"] is not None:
        same = sum(a == b for a, b in zip(out["loop"], out["exact"]))
        largest = max(abs(a - b) for a, b in zip(out["loop"], out["exact"]))
        lines.append(
            f"verl's reward loop (NaiveRewardManager: one compute_score call per response, every response at once): "
            f"{same} of {len(rows)} rewards equal to the bit, the largest difference {largest:.1e} (each response is "
            f"encoded in a call of its own); {out['loop_seconds']:.2f} s ({len(rows) / out['loop_seconds']:.0f} responses/s)."
        )
    return "\n".join(lines)
