"""``moverkit serve``: a metric and reward server on Ray Serve (:mod:`moverkit.serve`).

    moverkit serve --metric twmd --replicas 2 --port 8000
    # POST /score, POST /get_reward (OpenRLHF's --remote_rm_url), GET /health

It starts Ray Serve on the Ray cluster of ``--address`` (a local one by default), prints the URL
and serves until interrupted: Ctrl-C or SIGTERM (a container's stop) stops it, with
:func:`moverkit.serve.stop`: on a cluster of ``--address`` only moverkit's application is deleted
(the cluster's other applications keep serving), a local cluster is shut down. Every argument of
the metric is checked before Ray starts, by name and by value, as the function checks it (``--arg
temperature=-1``, ``--num-layers 99``, a setting under which a score would depend on the other
requests, ``--centering batch`` or ``--arg idf=true``): exit status 2 and the function's message.
"""

from __future__ import annotations

from moverkit.formats.options import (
    METRICS,
    add_metric_options,
    encoder_options,
    given_arguments,
    positive_int,
)


def register(commands) -> None:
    serve = commands.add_parser("serve", help="serve a metric and reward over HTTP on Ray Serve (the serve extra)")
    serve.add_argument("--metric", choices=METRICS, default="centered_bertscore", help="(default: centered_bertscore)")
    serve.add_argument("--output", help="the output /get_reward rewards (default: the metric's main one)")
    serve.add_argument("--replicas", type=positive_int, help="replicas (default: one per GPU, else one on the CPU)")
    serve.add_argument("--cpus-per-replica", type=float, default=1, help="CPUs of a CPU replica (default: 1)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=positive_int, default=8000, help="(default: 8000)")
    serve.add_argument("--address", help="a running Ray cluster to serve on (default: start a local one)")
    serve.add_argument(
        "--max-batch-size",
        type=positive_int,
        help="rows (a prediction and its references) a batch holds (default: 128)",
    )
    serve.add_argument("--batch-wait", type=float, help="seconds a batch waits to fill (default: 0.05)")
    serve.add_argument("--max-texts", type=positive_int, help="texts one request may hold (default: 16384)")
    serve.add_argument("--max-characters", type=positive_int, help="characters one text may hold (default: 8000)")
    serve.add_argument("--max-body-bytes", type=positive_int, help="bytes a request's body may hold (default: 32 MiB)")
    serve.add_argument(
        "--end-marker",
        action="repeat",
        metavar="TEXT",
        help="cut TEXT from the end of each /get_reward query (the policy's end of sequence, e.g. '<|im_end|>'); "
        "repeatable (default: the tokenizer's, else common chat models' end markers, moverkit.serve.END_MARKERS)",
    )
    serve.add_argument(
        "--tokenizer",
        help="the policy's tokenizer (Hugging Face id in the local cache, or a folder): /get_reward cuts its "
        "end-of-sequence and padding tokens from each query",
    )
    serve.add_argument(
        "--request-timeout",
        type=float,
        metavar="SECONDS",
        help="answer 503 to a request not answered within SECONDS (default: no limit)",
    )
    add_metric_options(serve)
    serve.set_defaults(run=run)


def run(args) -> int:
    import signal
    import time

    from moverkit.integrations import serve as server  # without Ray: its error names the extra (missing_extra)

    batching = {"max_batch_size": args.max_batch_size, "wait_s": args.batch_wait}
    limits = {"texts": args.max_texts, "characters": args.max_characters, "body_bytes": args.max_body_bytes}
    url = server.start(
        args.metric,
        host=args.host,
        port=args.port,
        address=args.address,
        output=args.output,
        replicas=args.replicas,
        cpus_per_replica=args.cpus_per_replica,
        batching=server.Batching(**{k: v for k, v in batching.items() if v is not None}),
        limits=server.Limits(**{k: v for k, v in limits.items() if v is not None}),
        end_markers=tuple(args.end_marker) or None,
        tokenizer=args.tokenizer,
        request_timeout_s=args.request_timeout,
        **given_arguments(encoder_options(args), args.arg),
    )
    print(
        f"moverkit serve: {args.metric} on {url} (POST /score, POST /get_reward, GET /health, GET /metrics); "
        "Ctrl-C stops it",
        flush=True,
    )
    signal.signal(signal.SIGTERM, interrupted)  # a container's stop drains as Ctrl-C does
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        done = server.stop(shared=args.address is not None)
        print(f"moverkit serve: stopped ({'its application deleted' if done == 'delete' else 'Serve shut down'})")
    return 0


def interrupted(signum, frame):
    """SIGTERM as Ctrl-C: the serving loop's ``KeyboardInterrupt``."""
    raise KeyboardInterrupt
