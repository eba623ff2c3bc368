r"""A metric and reward server on Ray Serve: one deployment, a loaded encoder per replica, requests of
many clients scored together in batches (``pip install "moverkit[serve]"``)::

    import moverkit.serve

    url = moverkit.serve.start("twmd", replicas=2)  # a local Ray cluster unless one is running
    # POST url + "/score"       {"predictions": [...], "references": [...], "arguments": {...}}
    # POST url + "/get_reward"  {"query": [...], "prompts": [...], "labels": [...]}  (OpenRLHF)
    # GET  url + "/health"

or ``moverkit serve --metric twmd --replicas 2`` on the command line. Its routes:

- ``POST /score``: ``predictions`` (a list of strings) and ``references`` (one string or a list of
  strings per prediction), and optionally ``arguments``, the metric's own arguments for this request
  (twmd's ``temperature``, lazy_emd's ``epsilon``, ...; not the encoder's, which the server holds).
  The answer is the metric's result for these pairs, as ``moverkit.functional.<metric>`` gives it:
  one list per output and the ``hashcode``.
- ``POST /get_reward``: OpenRLHF's remote reward protocol (``--remote_rm_url http://HOST:PORT/get_reward``;
  its client posts ``{"query": [...], "prompts": [...], "labels": [...]}``, ``openrlhf/utils/agent.py``,
  and its own server answers ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``,
  ``openrlhf/cli/serve_rm.py``). A query is the prompt and the response, decoded together, so the
  response scored is the query less its prompt where the query starts with it (as OpenRLHF's
  example reward function cuts it, ``examples/python/math_reward_func.py``), less any of
  ``end_markers`` at its end (OpenRLHF decodes with ``skip_special_tokens=False``, so the policy's
  end-of-sequence marker, such as ``<|im_end|>``, ends the query). Its label is its reference (a
  string or a list of strings, the best kept). The reward is :func:`moverkit.reward_function`'s:
  higher is better, lazy_emd's distance negated. Fields OpenRLHF may add are ignored.
- ``GET /health``: the metric, its hashcode, the device, the batching and the limits.

A bad request is answered 4xx with ``{"error": "..."}`` naming the field or the limit, never a
500, and the server keeps serving: a body that is not JSON or not an object, a missing or unknown
field, a list that is empty, ``None``, a number where text goes, lists of different lengths, a lone
surrogate (400); a body, a request's number of texts or one text's characters past the
:class:`Limits` (413); another route (404) or method (405).

Dynamic batching (``@serve.batch``): each row of a request (a prediction with its references) is
one item of the replica's batch queue, so many clients' small requests are scored in one call of
the metric's function, of at most ``Batching.max_batch_size`` rows, after waiting at most
``Batching.wait_s`` for the batch to fill; the call runs in a worker thread, so the next batch
gathers while one is scored. On a CPU each call encodes in batches of
:data:`moverkit.rewards.CPU_BATCH_SIZE` texts, as a reward does.

What a request's scores are. The metric's function on the request's pairs, with the server's
arguments. A text's vectors depend on the shapes of the encoder batch it lands in, at rounding
level, so a request batched with others gets those scores within moverkit's tie tolerance
(:data:`moverkit.facts.ties.TIE_TOLERANCE`: :math:`|a - b| \le 10^{-6} \max(1, |a|, |b|)`; WMT17
pairs scored 8 at a time against all 256 in one call differed by at most 2.8e-7, for each of the
five metrics), and the same scores to the bit when it is batched alone. Settings under which a
score would depend on the other requests of its batch (``centering="batch"``, IDF fitted over the
call) are refused, as :func:`moverkit.reward_function` refuses them.

Replicas: one per GPU of the Ray cluster where it has GPUs (each replica on its own GPU), one CPU
replica otherwise; ``replicas`` and ``cpus_per_replica`` say otherwise. Each loads its encoder once,
in its constructor, before it takes requests.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from dataclasses import asdict, dataclass, field

from ray import serve

from moverkit.rewards import MetricReward, checked_output, independent_arguments

logger = logging.getLogger(__name__)

CALLER = "moverkit.serve"
CONSEQUENCE = "a request's scores would depend on the other requests batched with it"
ROUTES = {"/score": "POST", "/get_reward": "POST", "/health": "GET"}
"""The server's routes and their methods."""


@dataclass(frozen=True)
class Limits:
    """What one request may hold; past a limit it is answered 413 with the limit named.

    ``texts``: predictions and references together (for ``/get_reward``, responses and labels);
    ``characters``: one text (for ``/get_reward``, a response once its prompt is cut, and a label);
    ``body_bytes``: the request's body. The encoder truncates a text at the model's limit (512
    tokens for the embedded model, about 2,500 characters of English), so the default of 8,000
    characters refuses only what it would cut anyway."""

    texts: int = 16_384
    characters: int = 8_000
    body_bytes: int = 32 * 2**20

    def __post_init__(self):
        from moverkit._core import checks

        for name, value in asdict(self).items():
            checks.positive_int(f"Limits.{name}", value)


@dataclass(frozen=True)
class Batching:
    """``@serve.batch``'s settings: at most ``max_batch_size`` rows (a prediction and its references)
    in one call of the metric, after waiting at most ``wait_s`` seconds for a batch to fill."""

    max_batch_size: int = 128
    wait_s: float = 0.005

    def __post_init__(self):
        from moverkit._core import checks

        checks.positive_int("Batching.max_batch_size", self.max_batch_size)
        checks.nonnegative_float("Batching.wait_s", self.wait_s, hint=" (seconds)")


class BadRequest(Exception):
    """A request the server refuses: its HTTP ``status`` (4xx) and a message naming the field or limit."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Row:
    """One item of the batch queue: a prediction and its references, scored under the arguments of
    ``key`` (their JSON), for ``/score`` (``reward=False``) or ``/get_reward``."""

    prediction: str
    references: list[str] = field(hash=False)
    key: str = "{}"
    reward: bool = False


# ---------------------------------------------------------------------------------------------
# Reading requests (no Ray here: what the tests check without a server)


def read_body(body: bytes, limits: Limits) -> dict:
    """The JSON object of a request's body, or :class:`BadRequest` (413 past ``limits.body_bytes``,
    400 for anything but a JSON object)."""
    body_size(len(body), limits)
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise BadRequest(400, f"the body is not JSON: {err}") from None
    if not isinstance(data, dict):
        raise BadRequest(400, f"the body must be a JSON object, got {json_type(data)}")
    return data


def body_size(size: int, limits: Limits) -> None:
    """A 413 naming the limit where a body of ``size`` bytes is past ``limits.body_bytes``."""
    if size > limits.body_bytes:
        raise BadRequest(
            413, f"the body has {size:,} bytes; this server takes at most {limits.body_bytes:,} (body_bytes)"
        )


def json_type(value) -> str:
    """What a JSON value is, as a message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def required(data: dict, name: str):
    """Field ``name`` of a request, or a 400 naming it."""
    if name not in data:
        raise BadRequest(400, f"the body has no field {name!r} (it has {', '.join(map(repr, data)) or 'none'})")
    return data[name]


def score_rows(data: dict, limits: Limits) -> tuple[list[str], list[list[str]], dict]:
    """A ``/score`` body as (predictions, references as one list per prediction, the request's
    arguments), checked as the metric checks its inputs (``moverkit._core.base.check_inputs``),
    or :class:`BadRequest` naming the field: an unknown field, an empty ``predictions``,
    ``arguments`` that is not an object."""
    from moverkit._core.base import check_inputs

    unknown = sorted(set(data) - {"predictions", "references", "arguments"})
    if unknown:
        raise BadRequest(400, f"unknown field {unknown[0]!r}; /score takes predictions, references and arguments")
    try:
        predictions, references = check_inputs(required(data, "predictions"), required(data, "references"))
    except (ValueError, TypeError) as err:
        raise BadRequest(400, str(err)) from None
    if not predictions:
        raise BadRequest(400, "predictions is an empty list: give at least one prediction")
    arguments = data.get("arguments", {})
    if not isinstance(arguments, dict):
        raise BadRequest(400, f"arguments must be an object of the metric's arguments, got {json_type(arguments)}")
    within(limits, ("predictions", predictions), *((f"references[{i}]", r) for i, r in enumerate(references)))
    return predictions, references, arguments


def reward_rows(data: dict, limits: Limits, end_markers: tuple[str, ...] = ()) -> tuple[list[str], list]:
    """A ``/get_reward`` body (OpenRLHF's ``query``, ``prompts``, ``labels``) as (the responses,
    their references), or :class:`BadRequest` naming the field. ``prompts`` may be left out (each
    query is then its response); other fields are ignored."""
    from moverkit._core.base import check_texts
    from moverkit.dataset_map import reference_row

    try:
        queries = check_texts(required(data, "query"), "query")
        given = data.get("prompts")
        prompts = [""] * len(queries) if given is None else check_texts(given, "prompts")
        labels = required(data, "labels")
        if not isinstance(labels, list):
            raise TypeError(f"labels must be a list with one label per query, got {json_type(labels)}")
        if not queries:
            raise ValueError("query is an empty list: give at least one query")
        if not len(queries) == len(prompts) == len(labels):
            raise ValueError(
                f"query, prompts and labels differ in length: {len(queries)}, {len(prompts)}, {len(labels)}"
            )
        references = [reference_row(label, f"labels[{i}]") for i, label in enumerate(labels)]
    except (ValueError, TypeError) as err:
        raise BadRequest(400, str(err)) from None
    responses = [response_text(q, p, end_markers) for q, p in zip(queries, prompts)]
    rows = [[r] if isinstance(r, str) else r for r in references]
    within(limits, ("responses", responses), *((f"labels[{i}]", r) for i, r in enumerate(rows)))
    return responses, rows


def response_text(query: str, prompt: str, end_markers: tuple[str, ...] = ()) -> str:
    """The response of an OpenRLHF query: the query less its prompt where it starts with it (else
    the whole query), less each of ``end_markers`` at its end, as long as one is there."""
    text = query[len(prompt) :] if prompt and query.startswith(prompt) else query
    while True:
        marker = next((m for m in end_markers if m and text.endswith(m)), None)
        if marker is None:
            return text
        text = text[: -len(marker)]


def within(limits: Limits, *fields: tuple[str, list[str]]) -> None:
    """A 413 naming the limit where ``fields`` (name, texts) hold more texts, or one text more
    characters, than ``limits`` allow."""
    count = sum(len(texts) for _, texts in fields)
    if count > limits.texts:
        raise BadRequest(413, f"the request holds {count:,} texts; this server takes at most {limits.texts:,} (texts)")
    for name, texts in fields:
        for i, text in enumerate(texts):
            if len(text) > limits.characters:
                raise BadRequest(
                    413,
                    f"{name}[{i}] has {len(text):,} characters; this server takes at most "
                    f"{limits.characters:,} per text (characters)",
                )


@functools.lru_cache(maxsize=64)
def request_reward(metric: str, output: str | None, server: str, request: str) -> MetricReward:
    """The reward (and the checked arguments) of a request: the server's arguments (JSON) updated
    by the request's own (JSON), checked as :func:`moverkit.reward_function` checks them. The last
    64 sets are kept: a request's arguments are checked once."""
    from moverkit.functional.signature import SHARED

    own = json.loads(request)
    held = sorted(set(own) & ({p.name for p in SHARED} | {"settings"}))
    if held:
        raise ValueError(
            f"{held[0]!r} is the server's to set (the encoder, its device, files on the server); "
            "a request may set the metric's own arguments only"
        )
    _, arguments = independent_arguments(metric, {**json.loads(server), **own}, CALLER, CONSEQUENCE)
    return MetricReward(metric, "references", output, arguments)


# ---------------------------------------------------------------------------------------------
# The deployment


def _error(status: int, message: str):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status)


@serve.deployment(name="moverkit", max_ongoing_requests=256)
class MetricServer:
    """A replica: the metric's encoder, loaded in the constructor (a first call, whose hashcode the
    health route gives), and the routes of the module doc."""

    def __init__(self, metric: str, output: str | None, arguments: dict, options: dict):
        import torch

        from moverkit.registry import get

        self.metric, self.output, self.arguments = metric, output, arguments
        self.limits, self.batching = Limits(**options["limits"]), Batching(**options["batching"])
        self.end_markers = tuple(options["end_markers"])
        self.server_key = json.dumps(arguments, sort_keys=True)
        self.function = get(metric).function
        reward = self.reward_for("{}")
        self.hashcode = self.function(["warm"], ["warm"], **reward.call_arguments())["hashcode"]
        self.device = str(reward.call_arguments()["device"])
        self.threads = torch.get_num_threads()
        self.probed: set[str] = set()  # the argument sets a probe call accepted
        self.scored.set_max_batch_size(self.batching.max_batch_size)
        self.scored.set_batch_wait_timeout_s(self.batching.wait_s)

    def reward_for(self, key: str) -> MetricReward:
        return request_reward(self.metric, self.output, self.server_key, key)

    async def __call__(self, request):
        path = request.url.path
        root = request.scope.get("root_path", "")
        path = (path[len(root) :] if root and path.startswith(root) else path).rstrip("/") or "/"
        if path not in ROUTES:
            return _error(404, f"no route {path!r}; the routes are {', '.join(f'{m} {r}' for r, m in ROUTES.items())}")
        if request.method != ROUTES[path]:
            return _error(405, f"{path} takes {ROUTES[path]}, not {request.method}")
        try:
            if path == "/health":
                return self.health()
            length = request.headers.get("content-length", "")
            body_size(int(length) if length.isdigit() else 0, self.limits)  # before the body is read
            data = read_body(await request.body(), self.limits)
            return await (self.score(data) if path == "/score" else self.get_reward(data))
        except BadRequest as err:
            return _error(err.status, str(err))
        except Exception as err:  # a fault of the server: logged, answered without a traceback
            logger.exception("moverkit.serve: %s failed", path)
            return _error(500, f"the server failed on this request: {type(err).__name__}: {err}")

    def health(self):
        from starlette.responses import JSONResponse

        return JSONResponse(
            {
                "status": "ok",
                "metric": self.metric,
                "output": self.output,
                "hashcode": self.hashcode,
                "device": self.device,
                "threads": self.threads,
                "batching": asdict(self.batching),
                "limits": asdict(self.limits),
            }
        )

    async def score(self, data: dict):
        from starlette.responses import JSONResponse

        predictions, references, arguments = score_rows(data, self.limits)
        key = await self.checked_key(arguments)
        results = await asyncio.gather(*(self.scored(Row(p, r, key)) for p, r in zip(predictions, references)))
        answer = {name: [result[name] for result in results] for name in results[0] if name != "hashcode"}
        return JSONResponse({**answer, "hashcode": results[0]["hashcode"]})

    async def get_reward(self, data: dict):
        from starlette.responses import JSONResponse

        responses, references = reward_rows(data, self.limits, self.end_markers)
        rewards = list(
            await asyncio.gather(*(self.scored(Row(p, r, reward=True)) for p, r in zip(responses, references)))
        )
        name = self.reward_for("{}").__name__
        return JSONResponse({"rewards": rewards, "scores": rewards, "extra_logs": {name: rewards}})

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
                await asyncio.to_thread(self.function, ["probe"], ["probe"], **reward.call_arguments())
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
                result = self.function(predictions, references, **reward.call_arguments())
                values = [
                    {**{k: v[j] for k, v in result.items() if k != "hashcode"}, "hashcode": result["hashcode"]}
                    for j in range(len(members))
                ]
            for i, value in zip(members, values):
                out[i] = value
        return out


# ---------------------------------------------------------------------------------------------
# The application


def application(
    metric: str = "centered_bertscore",
    *,
    output: str | None = None,
    replicas: int | None = None,
    cpus_per_replica: float = 1,
    batching: Batching = Batching(),
    limits: Limits = Limits(),
    end_markers: tuple[str, ...] = (),
    **metric_arguments,
):
    """The server of ``metric`` as a Ray Serve application, for ``serve.run(app, route_prefix="/")``.

    ``metric_arguments`` are those of ``moverkit.functional.<metric>`` (``model_type``,
    ``dtype="bfloat16"``, ``settings=PATH``, ...), checked here as :func:`moverkit.reward_function`
    checks them (a batch-dependent setting is refused); ``output`` is the reward's output of
    ``/get_reward`` (default: the metric's main one). ``replicas`` defaults to one per GPU of the
    Ray cluster (each replica given one GPU), or one CPU replica of ``cpus_per_replica`` CPUs where
    the cluster has none; ``batching``, ``limits`` and ``end_markers`` are the module doc's."""
    registered, arguments = independent_arguments(metric, metric_arguments, CALLER, CONSEQUENCE)
    output = checked_output(registered.spec, output)
    if not isinstance(batching, Batching) or not isinstance(limits, Limits):
        raise TypeError("batching must be a moverkit.serve.Batching and limits a moverkit.serve.Limits")
    if isinstance(end_markers, str) or not all(isinstance(m, str) and m for m in end_markers):
        raise TypeError(f"end_markers must be a list of non-empty strings, got {end_markers!r}")
    from moverkit._core import checks

    gpus = cluster_gpus()
    replicas = checks.positive_int("replicas", gpus or 1 if replicas is None else replicas)
    cpus_per_replica = checks.finite_positive_float("cpus_per_replica", cpus_per_replica)
    on_gpu = gpus > 0 and str(arguments.get("device", "cuda")).startswith("cuda")
    options = {"limits": asdict(limits), "batching": asdict(batching), "end_markers": list(end_markers)}
    deployment = MetricServer.options(
        num_replicas=replicas,
        ray_actor_options={"num_gpus": 1} if on_gpu else {"num_cpus": cpus_per_replica},
        max_ongoing_requests=max(256, 2 * batching.max_batch_size),
    )
    return deployment.bind(metric, output, arguments, options)


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
    here; ``options`` are :func:`application`'s, checked before Ray starts. Where Serve already
    runs on the cluster, the application replaces its ``moverkit`` application and its proxy keeps
    the address it has (the URL returned says which). ``serve.shutdown()`` stops it."""
    import ray

    application(metric, **options)  # the arguments checked before Ray starts
    if not ray.is_initialized():
        ray.init(address=address)
    app = application(metric, **options)  # its replicas counted on the cluster's GPUs
    serve.start(http_options={"host": host, "port": port})
    serve.run(app, name="moverkit", route_prefix="/")
    host, port = serving_address(host, port)
    return f"http://{host}:{port}"


def serving_address(host: str, port: int) -> tuple[str, int]:
    """Where Serve's HTTP proxy listens: where it was asked to, unless Serve was already running on
    the cluster, whose proxy keeps its own address (``serve.start`` then only logs so)."""
    try:
        from ray.serve.context import _get_global_client

        config = _get_global_client().http_config
        return (host if config.host in (None, "0.0.0.0") else config.host), int(config.port)
    except Exception:  # another Ray's private layout: the address asked for
        return host, port


__all__ = ["Batching", "Limits", "MetricServer", "application", "start"]
