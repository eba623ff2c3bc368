r"""A metric and reward server on Ray Serve: one deployment, a loaded encoder per replica, requests of
many clients scored together in batches (``pip install "moverkit[serve]"``)::

    serve run moverkit.serve:app                      # Ray Serve's own command: the default server
    serve run moverkit.serve:build metric=twmd        # an application builder: one args object
    serve run serve_config.yaml                       # import_path: moverkit.serve:build, args: {...}
    moverkit serve --metric twmd --replicas 2         # or moverkit's command (Ctrl-C stops it)

or from Python, ``url = moverkit.serve.start("twmd", replicas=2)``, or
``serve.run(moverkit.serve.application("twmd"), name="moverkit", route_prefix="/")``. Its routes:

- ``POST /score``: ``predictions`` (a list of strings) and ``references`` (one string or a list of
  strings per prediction), and optionally ``arguments``, the metric's own arguments for this request
  (twmd's ``temperature``, lazy_emd's ``epsilon``, ...; not the encoder's, which the server holds).
  The answer is the metric's result for these pairs, as ``moverkit.functional.<metric>`` gives it:
  one list per output and the ``hashcode``.
- ``POST /get_reward``: OpenRLHF's remote reward protocol (``--reward.remote_url
  http://HOST:PORT/get_reward``, ``--remote_rm_url`` before; its client posts ``{"query": [...],
  "prompts": [...], "labels": [...]}``, ``openrlhf/utils/agent.py``, and its own server answers
  ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``, ``openrlhf/cli/serve_rm.py``). A
  query is ``decode(prompt_ids + action_ids, skip_special_tokens=False)``: the prompt, the response
  and the policy's end-of-sequence marker. The response scored is the query less its prompt (a
  prompt the query does not start with is a 400 naming it), less the markers and whitespace at its
  end (:func:`response_text`): by default those of :data:`END_MARKERS`, the end-of-sequence and
  padding markers of common chat models, or the named tokenizer's (``tokenizer=``); a query that
  still ends in something that looks like a marker (``<|...|>``, ``</...>``) is scored as it is,
  with a warning logged once per marker. Its label is its reference (a string or a list of strings,
  the best kept). The reward is :func:`moverkit.reward_function`'s: higher is better, lazy_emd's
  distance negated. An empty ``query`` list is answered with empty lists (OpenRLHF sends one when
  it shards fewer queries than it has servers). Fields OpenRLHF may add are ignored. A response is
  scored whatever its length, truncated by the encoder as the reward function truncates it
  (``Limits.characters`` bounds ``/score``'s texts only).
- ``GET /health``: the metric, its hashcode, the device, the batching and the limits.
- ``GET /metrics``: the replica's counters in Prometheus' text format (:class:`Counters`).

A deployment handle (``serve.get_app_handle("moverkit")``) takes the same requests as Python calls,
``handle.score.remote(predictions, references, arguments=None)`` and
``handle.get_reward.remote(query, prompts=None, labels=...)``, and returns their answers as plain
dicts; a refused request raises :class:`BadRequest` (its ``status`` and message), which the caller
catches as that class.

A bad request is answered 4xx with ``{"error": "..."}`` naming the field or the limit, never a
500, and the server keeps serving: a body that is not JSON or not an object, a missing or unknown
field, an empty ``predictions``, ``None``, a number where text goes, lists of different lengths, a
lone surrogate, a prompt the query does not start with (400); a body past ``Limits.body_bytes``
(counted as it is read, whether or not it says its length), a request's number of texts or one
``/score`` text's characters past the :class:`Limits` (413); a request not answered within
``request_timeout_s`` (503); another route (404) or method (405).

Dynamic batching (``@serve.batch``): each row of a request (a prediction with its references) is
one item of the replica's batch queue, so many clients' small requests are scored in one call of
the metric's function, of at most ``Batching.max_batch_size`` rows, after waiting at most
``Batching.wait_s`` for the batch to fill; the call runs in a worker thread, so the next batch
gathers while one is scored. Fairness: a request's rows enter the queue in slices of
``Batching.request_rows`` rows, two slices at a time (the next when the oldest is scored), so a
request of thousands of rows holds at most two slices of the queue and a small request that
arrives behind it waits for about a batch, not for the whole big request. On a CPU each call encodes in batches of
:data:`moverkit.integrations.adapter.CPU_BATCH_SIZE` texts, as every slice door does.

What a request's scores are. The metric's function on the request's pairs, with the server's
arguments. A text's vectors depend on the shapes of the encoder batch it lands in, at rounding
level, so a request batched with others gets those scores within moverkit's tie tolerance
(:data:`moverkit.facts.ties.TIE_TOLERANCE`: :math:`|a - b| \le 10^{-6} \max(1, |a|, |b|)`; WMT17
pairs scored 8 at a time against all 256 in one call differed by at most 2.8e-7, for each of the
five metrics), and the same scores to the bit when it is batched alone. A server batch is a slice
of what its clients score, so the server is a slice door (:mod:`moverkit.integrations.adapter`):
it takes the batch-independent defaults (moverscore's IDF off unless a table is given; the
hashcode says ``no-idf``) and refuses a setting under which a score would depend on the other
requests of its batch (``centering="batch"``, IDF fitted over the call), with the message every
slice door gives. Every argument is checked by name and by value (the function's own checks,
:func:`moverkit.integrations.adapter.check_values`) in :func:`application`, before Ray starts
replicas; a request's own ``arguments`` are a 400.

Replicas: one per GPU of the Ray cluster where it has GPUs (each replica on its own GPU), one CPU
replica otherwise; ``replicas`` (or ``autoscaling_config``) and ``cpus_per_replica`` say otherwise,
and so does a Serve config file's ``deployments:`` entry for ``moverkit`` (``num_replicas``,
``autoscaling_config``, ``ray_actor_options``), which Serve applies over the code's. Each loads its
encoder once, in its constructor, before it takes requests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from moverkit.integrations import adapter, missing_extra
from moverkit.integrations.rewards import MetricReward
from moverkit.integrations.rows import records_result, result_records
from moverkit.integrations.serve_requests import (
    END_MARKERS,
    BadRequest,
    Batching,
    Counters,
    Limits,
    Row,
    read_body,
    read_stream,
    reward_rows,
    score_rows,
    tokenizer_markers,
)

try:
    from ray import serve
except ModuleNotFoundError as err:
    raise missing_extra(err, "serve") from None

logger = logging.getLogger("moverkit.serve")
"""The server's one logger (its requests' too), named by the path Serve's commands give."""

CALLER = "moverkit.serve"
NAME = "moverkit"
"""The name of the application and of its deployment."""
ROUTES = {"/score": "POST", "/get_reward": "POST", "/health": "GET", "/metrics": "GET"}
"""The server's routes and their methods."""


def request_reward(metric: str, output: str | None, server: str, request: str) -> MetricReward:
    """The reward (and the checked arguments) of a request: the server's arguments (JSON) updated
    by the request's own (JSON), checked by name as :func:`moverkit.reward_function` checks them.
    A replica keeps what it built (:meth:`MetricServer.reward_for`)."""
    from moverkit.functional.signature import SHARED

    own = json.loads(request)
    held = sorted(set(own) & ({p.name for p in SHARED} | {"settings"}))
    if held:
        raise ValueError(
            f"{held[0]!r} is the server's to set (the encoder, its device, files on the server); "
            "a request may set the metric's own arguments only"
        )
    arguments = adapter.slice_arguments(metric, {**json.loads(server), **own}, CALLER)
    return MetricReward(metric, "references", output, arguments)


# ---------------------------------------------------------------------------------------------
# The deployment


def _json(payload, status: int = 200):
    from starlette.responses import JSONResponse

    return JSONResponse(payload, status_code=status)


@serve.deployment(name=NAME, max_ongoing_requests=256)
class MetricServer:
    """A replica: the metric's encoder, loaded in the constructor (a first call, whose hashcode the
    health route gives), the routes of the module doc, and the handle's methods :meth:`score` and
    :meth:`get_reward`."""

    def __init__(self, metric: str, output: str | None, arguments: dict, options: dict):
        import torch

        self.metric, self.output, self.arguments = metric, output, arguments
        self.limits, self.batching = Limits(**options["limits"]), Batching(**options["batching"])
        self.end_markers = tuple(options["end_markers"])
        self.timeout = options.get("request_timeout_s")
        self.server_key = json.dumps(arguments, sort_keys=True)
        reward = self.reward_for("{}")
        self.hashcode = adapter.score(metric, ["warm"], ["warm"], reward.call_arguments())["hashcode"]
        self.device = str(reward.call_arguments()["device"])
        self.threads = torch.get_num_threads()
        self.counters = Counters(replica_id())
        self.probed: set[str] = set()  # the argument sets a probe call accepted
        self.scored.set_max_batch_size(self.batching.max_batch_size)
        self.scored.set_batch_wait_timeout_s(self.batching.wait_s)

    def reward_for(self, key: str) -> MetricReward:
        """The reward of a request's arguments (JSON ``key``), built and checked once and kept
        (:func:`moverkit.integrations.adapter.kept`, the last sets of arguments used)."""
        settings = (CALLER, self.metric, self.output, self.server_key, key)
        return adapter.kept(settings, lambda: request_reward(self.metric, self.output, self.server_key, key))

    async def __call__(self, request):
        started = time.perf_counter()
        path = request.url.path
        root = request.scope.get("root_path", "")
        path = (path[len(root) :] if root and path.startswith(root) else path).rstrip("/") or "/"
        status, rows = 200, 0
        try:
            if path not in ROUTES:
                routes = ", ".join(f"{m} {r}" for r, m in ROUTES.items())
                raise BadRequest(404, f"no route {path!r}; the routes are {routes}")
            if request.method != ROUTES[path]:
                raise BadRequest(405, f"{path} takes {ROUTES[path]}, not {request.method}")
            if path == "/metrics":
                from starlette.responses import PlainTextResponse

                return PlainTextResponse(self.counters.text(), media_type="text/plain; version=0.0.4")
            if path == "/health":
                return _json(self.health())
            answer = await self.timed(self.answer(path, request))
            rows = len(answer["rewards"]) if path == "/get_reward" else len(next(iter(answer.values())))
            return _json(answer)
        except BadRequest as err:
            status = err.status
            return _json({"error": str(err)}, status)
        except Exception as err:  # a fault of the server: logged, answered without a traceback
            status = 500
            logger.exception("moverkit.serve: %s failed", path)
            return _json({"error": f"the server failed on this request: {type(err).__name__}: {err}"}, status)
        finally:
            if path in ROUTES and path != "/metrics":
                self.counters.observe(path, status, rows, time.perf_counter() - started)

    async def answer(self, path: str, request) -> dict:
        body = await read_stream(request.stream(), self.limits, request.headers.get("content-length"))
        data = read_body(body, self.limits)
        return await (self.scores(data) if path == "/score" else self.reward_answer(data))

    async def timed(self, work):
        """``work`` awaited, or a 503 past ``request_timeout_s``."""
        if self.timeout is None:
            return await work
        try:
            return await asyncio.wait_for(work, self.timeout)
        except asyncio.TimeoutError:
            raise BadRequest(
                503, f"the request was not answered within {self.timeout:g} s (request_timeout_s); retry later"
            ) from None

    def health(self) -> dict:
        return {
            "status": "ok",
            "metric": self.metric,
            "output": self.output,
            "hashcode": self.hashcode,
            "device": self.device,
            "threads": self.threads,
            "batching": asdict(self.batching),
            "limits": asdict(self.limits),
            "end_markers": list(self.end_markers),
            "request_timeout_s": self.timeout,
        }

    # The handle's methods: plain dicts, BadRequest for a refused request

    async def score(self, predictions, references, arguments: dict | None = None) -> dict:
        """``/score`` as a handle's call: the metric's result for the pairs, as a dict."""
        data = {"predictions": predictions, "references": references}
        return await self.timed(self.scores(data if arguments is None else {**data, "arguments": arguments}))

    async def get_reward(self, query, prompts=None, labels=None) -> dict:
        """``/get_reward`` as a handle's call: ``{"rewards", "scores", "extra_logs"}``."""
        data = {"query": query, "labels": labels} if labels is not None else {"query": query}
        return await self.timed(self.reward_answer(data if prompts is None else {**data, "prompts": prompts}))

    # The routes' work

    async def scores(self, data: dict) -> dict:
        predictions, references, arguments = score_rows(data, self.limits)
        key = await self.checked_key(arguments)
        return records_result(await self.in_turn([Row(p, r, key) for p, r in zip(predictions, references)]))

    async def reward_answer(self, data: dict) -> dict:
        responses, references = reward_rows(data, self.limits, self.end_markers)
        rewards = await self.in_turn([Row(p, r, reward=True) for p, r in zip(responses, references)])
        return {"rewards": rewards, "scores": rewards, "extra_logs": {self.reward_for("{}").__name__: rewards}}

    async def in_turn(self, rows: list[Row]) -> list:
        """The rows' results, in slices of ``Batching.request_rows`` rows, two slices in the queue
        at a time (one scored while the next gathers): the fairness of the module doc."""
        step = self.batching.request_rows
        slices = [
            asyncio.ensure_future(asyncio.gather(*(self.scored(row) for row in rows[start : start + step])))
            for start in range(0, min(len(rows), 2 * step), step)
        ]
        out: list = []
        for start in range(2 * step, len(rows) + 2 * step, step):
            out += await slices.pop(0)
            if start < len(rows):
                slices.append(
                    asyncio.ensure_future(asyncio.gather(*(self.scored(row) for row in rows[start : start + step])))
                )
        return out

    async def checked_key(self, arguments: dict) -> str:
        """The key of a request's arguments, checked once per distinct set: by name and batch
        dependence (:func:`request_reward`), then by value, by the metric's function on one pair (in
        a worker thread); a refused set is a 400 with the function's message, before it can reach a
        batch that other requests share."""
        if not arguments:
            return "{}"
        try:
            key = json.dumps(arguments, sort_keys=True, allow_nan=False)
            reward = self.reward_for(key)
            if key not in self.probed:
                await asyncio.to_thread(adapter.score, self.metric, ["probe"], ["probe"], reward.call_arguments())
                self.probed.add(key)
        except (ValueError, TypeError) as err:
            raise BadRequest(400, f"arguments: {err}") from None
        return key

    @serve.batch(max_batch_size=Batching.max_batch_size, batch_wait_timeout_s=Batching.wait_s)
    async def scored(self, rows: list[Row]) -> list:
        """The batch: its rows scored in one call of the metric per set of arguments (and kind), in
        a worker thread."""
        return await asyncio.to_thread(self.score_batch, rows)

    def score_batch(self, rows: list[Row]) -> list:
        """Each row's result (a dict of its outputs and the hashcode) or reward (a float)."""
        groups: dict[tuple[str, bool], list[int]] = {}
        for i, row in enumerate(rows):
            groups.setdefault((row.key, row.reward), []).append(i)
        out: list = [None] * len(rows)
        for (key, is_reward), members in groups.items():
            reward = self.reward_for(key)
            predictions = [rows[i].prediction for i in members]
            references = [rows[i].references for i in members]
            if is_reward:
                values = reward(predictions, references=references)
            else:
                values = result_records(adapter.score(self.metric, predictions, references, reward.call_arguments()))
            for i, value in zip(members, values):
                out[i] = value
        return out


def replica_id() -> str:
    """This replica's id in Serve, where it runs in one."""
    try:
        return serve.get_replica_context().replica_id.unique_id
    except Exception:  # outside a replica (the tests' direct calls)
        return ""


# ---------------------------------------------------------------------------------------------
# The application


def application(
    metric: str = "centered_bertscore",
    *,
    output: str | None = None,
    replicas: int | None = None,
    cpus_per_replica: float = 1,
    autoscaling_config: Mapping | None = None,
    batching: Batching | None = None,
    limits: Limits | None = None,
    end_markers: Sequence[str] | None = None,
    tokenizer: str | None = None,
    request_timeout_s: float | None = None,
    **metric_arguments,
):
    """The server of ``metric`` as a Ray Serve application, for ``serve.run(app, name="moverkit",
    route_prefix="/")``.

    ``metric_arguments`` are those of ``moverkit.functional.<metric>`` (``model_type``,
    ``dtype="bfloat16"``, ``settings=PATH``, ...), checked here by name as
    :func:`moverkit.reward_function` checks them (a batch-dependent setting is refused) and by
    value by the function's own checks (``device`` is left to the replica, which may run on another
    machine); ``output`` is the reward's output of ``/get_reward`` (default: the metric's main one).
    ``replicas`` defaults to one per GPU of the Ray cluster (each replica given one GPU), or one CPU
    replica of ``cpus_per_replica`` CPUs where the cluster has none; ``autoscaling_config`` (Serve's)
    replaces a fixed number. ``end_markers`` are what ``/get_reward`` cuts from a query's end
    (default: the ``tokenizer``'s where one is named, else :data:`END_MARKERS`; ``()`` cuts none);
    ``batching``, ``limits`` (default: :class:`Batching`'s and :class:`Limits`') and
    ``request_timeout_s`` (seconds, default none) are the module doc's."""
    from moverkit._core import checks

    arguments = adapter.slice_arguments(metric, metric_arguments, CALLER)
    output = adapter.checked_output(metric, output)
    batching = Batching() if batching is None else batching
    limits = Limits() if limits is None else limits
    if not isinstance(batching, Batching) or not isinstance(limits, Limits):
        raise TypeError("batching must be a moverkit.serve.Batching and limits a moverkit.serve.Limits")
    markers = checked_markers(end_markers, tokenizer)
    if request_timeout_s is not None:
        request_timeout_s = checks.finite_positive_float("request_timeout_s", request_timeout_s, hint=" (seconds)")
    adapter.check_values(metric, {key: value for key, value in arguments.items() if key != "device"})
    gpus = cluster_gpus()
    cpus_per_replica = checks.finite_positive_float("cpus_per_replica", cpus_per_replica)
    on_gpu = gpus > 0 and str(arguments.get("device", "cuda")).startswith("cuda")
    scaling: dict = {}
    if autoscaling_config is not None:
        if replicas is not None:
            raise ValueError("give replicas or autoscaling_config, not both")
        if not isinstance(autoscaling_config, Mapping):
            raise TypeError(f"autoscaling_config must be a mapping (Serve's), got {type(autoscaling_config).__name__}")
        scaling["autoscaling_config"] = dict(autoscaling_config)
    else:
        scaling["num_replicas"] = checks.positive_int("replicas", gpus or 1 if replicas is None else replicas)
    options = {
        "limits": asdict(limits),
        "batching": asdict(batching),
        "end_markers": list(markers),
        "request_timeout_s": request_timeout_s,
    }
    deployment = MetricServer.options(
        **scaling,
        ray_actor_options={"num_gpus": 1} if on_gpu else {"num_cpus": cpus_per_replica},
        max_ongoing_requests=max(256, 2 * batching.max_batch_size),
    )
    return deployment.bind(metric, output, arguments, options)


def checked_markers(end_markers: Sequence[str] | None, tokenizer: str | None) -> tuple[str, ...]:
    """The end markers of :func:`application`: those given and the tokenizer's; by default
    :data:`END_MARKERS`."""
    if end_markers is None:
        end_markers = () if tokenizer is not None else END_MARKERS
    if isinstance(end_markers, str) or not all(isinstance(m, str) and m for m in end_markers):
        raise TypeError(f"end_markers must be a list of non-empty strings, got {end_markers!r}")
    if tokenizer is not None:
        if not isinstance(tokenizer, str) or not tokenizer:
            raise TypeError(f"tokenizer must be a Hugging Face id or a folder, got {tokenizer!r}")
        end_markers = (*end_markers, *tokenizer_markers(tokenizer))
    return tuple(dict.fromkeys(end_markers))


BUILD_OPTIONS = {
    "output",
    "replicas",
    "cpus_per_replica",
    "autoscaling_config",
    "end_markers",
    "tokenizer",
    "request_timeout_s",
}
BUILD_BATCHING = {"max_batch_size": "max_batch_size", "batch_wait_s": "wait_s", "request_rows": "request_rows"}
BUILD_LIMITS = {"max_texts": "texts", "max_characters": "characters", "max_body_bytes": "body_bytes"}


def build(args: dict):
    """Ray Serve's application builder (``serve run moverkit.serve:build metric=twmd
    temperature=0.1``, or ``import_path: moverkit.serve:build`` with ``args:`` in a Serve config
    file): one dict, ``metric`` (default centered_bertscore), :func:`application`'s options
    (``output``, ``replicas``, ``cpus_per_replica``, ``autoscaling_config``, ``end_markers``,
    ``tokenizer``, ``request_timeout_s``), ``max_batch_size``, ``batch_wait_s``, ``request_rows``,
    ``max_texts``, ``max_characters``, ``max_body_bytes``, and any argument of the metric. A value
    given as text on ``serve run``'s command line is read as JSON where it parses (``true``, ``0.1``,
    ``["<|im_end|>"]``), else kept as text, as ``moverkit serve --arg`` reads it."""
    if args is not None and not isinstance(args, Mapping):
        raise TypeError(f"moverkit.serve:build takes a dict of arguments, got {type(args).__name__}")
    given = {key: plain_value(value) for key, value in dict(args or {}).items()}
    metric = given.pop("metric", "centered_bertscore")
    options = {key: given.pop(key) for key in BUILD_OPTIONS & set(given)}
    batching = {field_: given.pop(key) for key, field_ in BUILD_BATCHING.items() if key in given}
    limits = {field_: given.pop(key) for key, field_ in BUILD_LIMITS.items() if key in given}
    if isinstance(options.get("end_markers"), str):
        options["end_markers"] = [options["end_markers"]]
    return application(metric, batching=Batching(**batching), limits=Limits(**limits), **options, **given)


def plain_value(value):
    """A builder's value: text read as JSON where it parses (``serve run``'s ``key=value``)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def cluster_gpus() -> int:
    """The GPUs of the Ray cluster this process is connected to, else those torch sees here."""
    import ray

    if ray.is_initialized():
        return int(ray.cluster_resources().get("GPU", 0))
    import torch

    return torch.cuda.device_count()


def start(
    metric: str = "centered_bertscore",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    address: str | None = None,
    **options,
) -> str:
    """Start the server of ``metric`` on ``host:port`` and return its URL: Ray Serve on the Ray
    cluster at ``address`` (or the one this process is connected to), else on a local one started
    here; ``options`` are :func:`application`'s, checked before Ray starts (``device`` too, where
    the server runs here). Where Serve already runs on the cluster, the application replaces its
    ``moverkit`` application and its proxy keeps the address it has (the URL returned says which).
    :func:`stop` stops it."""
    import ray

    application(metric, **options)  # the arguments checked before Ray starts
    if address is None and not ray.is_initialized() and "device" in options:
        adapter.check_values(metric, {"device": options["device"]})
    if not ray.is_initialized():
        ray.init(address=address)
    app = application(metric, **options)  # its replicas counted on the cluster's GPUs
    serve.start(http_options={"host": host, "port": port})
    serve.run(app, name=NAME, route_prefix="/")
    host, port = serving_address(host, port)
    return f"http://{host}:{port}"


def stop(shared: bool) -> str:
    """Stop the server :func:`start` started: on a cluster others share (``shared``: ``moverkit
    serve --address``, or a Ray this process did not start), only moverkit's application is deleted
    (``serve.delete``), and Serve and the cluster's other applications keep running; else Serve is
    shut down with the local cluster. Returns what it did (``"delete"`` or ``"shutdown"``)."""
    if shared:
        serve.delete(NAME)
        return "delete"
    serve.shutdown()
    return "shutdown"


def serving_address(host: str, port: int) -> tuple[str, int]:
    """Where Serve's HTTP proxy listens: where it was asked to, unless Serve was already running on
    the cluster, whose proxy keeps its own address (``serve.start`` then only logs so)."""
    try:
        from ray.serve.context import _get_global_client

        config = _get_global_client().http_config
        return (host if config.host in (None, "0.0.0.0") else config.host), int(config.port)
    except Exception:  # another Ray's private layout: the address asked for
        return host, port


__all__ = ["END_MARKERS", "BadRequest", "Batching", "Limits", "MetricServer", "application", "build", "start", "stop"]
