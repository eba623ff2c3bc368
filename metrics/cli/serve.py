"""``moverkit serve``: a metric and reward server on Ray Serve (:mod:`moverkit.serve`).

    moverkit serve --metric twmd --replicas 2 --port 8000
    # POST /score, POST /get_reward (OpenRLHF's --remote_rm_url), GET /health

It starts Ray Serve on the Ray cluster of ``--address`` (a local one by default), prints the URL
and serves until interrupted (Ctrl-C stops the server). The metric's arguments are checked before
Ray starts: a setting under which a score would depend on the other requests (``--centering batch``,
``--arg idf=true``) is refused there.
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
    serve.add_argument("--batch-wait", type=float, help="seconds a batch waits to fill (default: 0.005)")
    serve.add_argument("--max-texts", type=positive_int, help="texts one request may hold (default: 16384)")
    serve.add_argument("--max-characters", type=positive_int, help="characters one text may hold (default: 8000)")
    serve.add_argument("--max-body-bytes", type=positive_int, help="bytes a request's body may hold (default: 32 MiB)")
    serve.add_argument(
        "--end-marker",
        action="repeat",
        metavar="TEXT",
        help="cut TEXT from the end of each /get_reward response (the policy's end of sequence, e.g. '<|im_end|>'); repeatable",
    )
    add_metric_options(serve)
    serve.set_defaults(run=run)


def run(args) -> int:
    import time

    try:
        import moverkit.serve as server
    except ImportError as err:
        raise ImportError(f"moverkit serve needs Ray Serve: pip install 'moverkit[serve]' ({err})") from None
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
        end_markers=tuple(args.end_marker),
        **given_arguments(encoder_options(args), args.arg),
    )
    print(
        f"moverkit serve: {args.metric} on {url} (POST /score, POST /get_reward, GET /health); Ctrl-C stops it",
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.serve.shutdown()
    return 0
