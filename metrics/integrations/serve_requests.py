"""The requests of the metric server (:mod:`moverkit.serve`), read and answered without Ray: the
body read under its limit, the rows of ``/score`` and of OpenRLHF's ``/get_reward`` (the response
cut from its query, less the end-of-sequence markers), the limits and batching a server takes, and
its Prometheus counters. :mod:`moverkit.serve` is the deployment on Ray Serve that uses them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from moverkit.integrations.rows import reference_row

logger = logging.getLogger("moverkit.serve")

END_MARKERS = (
    "<|im_end|>",  # ChatML: Qwen, Yi, OpenHermes, ...
    "<|endoftext|>",  # GPT-2, Qwen's padding, Phi
    "<|eot_id|>",  # Llama 3
    "<|eom_id|>",  # Llama 3.1 tool calls
    "<|end_of_text|>",  # Llama 3 base
    "</s>",  # Llama 2, Mistral, T5
    "<end_of_turn>",  # Gemma
    "<eos>",  # Gemma
    "<|end|>",  # Phi-3
    "<|return|>",  # gpt-oss
    "<｜end▁of▁sentence｜>",  # DeepSeek
    "<|endofresponse|>",
    "<pad>",
    "<|pad|>",
    "[PAD]",
    "<|finetune_right_pad_id|>",  # Llama 3.1's padding
)
"""What ``/get_reward`` cuts from the end of a query unless told otherwise: the end-of-sequence and
padding markers of common chat models, in any order and number, with whitespace between them."""

SPECIAL_LOOKING = re.compile(r"(<\|[^<>|\s]{1,64}\|>|</[^<>/\s]{1,64}>)\s*$")
"""A query that still ends in one of these after its markers are cut is logged (once per marker)."""


@dataclass(frozen=True)
class Limits:
    """What one request may hold; past a limit it is answered 413 with the limit named.

    ``texts``: predictions and references together (for ``/get_reward``, responses and labels);
    ``characters``: one text of ``/score`` (a ``/get_reward`` response or label is scored whatever
    its length, truncated by the encoder as the reward function truncates it); ``body_bytes``: the
    request's body, counted as it is read. The encoder truncates a text at the model's limit (512
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
    in one call of the metric, after waiting at most ``wait_s`` seconds for a batch to fill; a
    request's rows enter the queue in slices of ``request_rows``, two at a time (the module doc).

    ``wait_s`` is 0.05 by measurement (docs/generation.md, "Throughput"): the rows of 32 requests
    posted at once reach a replica over about 150 ms, and at 0.005 s its first batches held a
    request or two each, so the server took 1.40x the time of one call of the metric on all of
    them; at 0.05 s, 1.11x (0.2 s: 1.06x, for up to 0.2 s more on a lone request)."""

    max_batch_size: int = 128
    wait_s: float = 0.05
    request_rows: int = 32

    def __post_init__(self):
        from moverkit._core import checks

        checks.positive_int("Batching.max_batch_size", self.max_batch_size)
        checks.nonnegative_float("Batching.wait_s", self.wait_s, hint=" (seconds)")
        checks.positive_int("Batching.request_rows", self.request_rows)


class BadRequest(Exception):
    """A request the server refuses: its HTTP ``status`` (4xx, or 503 past the request timeout) and
    a message naming the field or limit. A deployment handle's caller catches it as this class."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status

    def __reduce__(self):  # across Ray: rebuilt with its status
        return (type(self), (self.status, str(self)))


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


async def read_stream(chunks, limits: Limits, length: str | None = None) -> bytes:
    """A request's body from its stream of byte ``chunks``, read until ``limits.body_bytes`` and no
    further: a 413 as soon as the body passes it, whether or not it said its length (a chunked
    body says none); a ``Content-Length`` past the limit is refused before a byte is read."""
    if length is not None and length.strip().isdigit():
        body_size(int(length), limits)
    parts, size = [], 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limits.body_bytes:
            raise BadRequest(
                413, f"the body has more than {limits.body_bytes:,} bytes, the most this server takes (body_bytes)"
            )
        parts.append(chunk)
    return b"".join(parts)


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
    count(limits, len(predictions) + sum(map(len, references)))
    within(limits, ("predictions", predictions), *((f"references[{i}]", r) for i, r in enumerate(references)))
    return predictions, references, arguments


def reward_rows(data: dict, limits: Limits, end_markers: Sequence[str] = END_MARKERS) -> tuple[list[str], list]:
    """A ``/get_reward`` body (OpenRLHF's ``query``, ``prompts``, ``labels``) as (the responses,
    their references), or :class:`BadRequest` naming the field. ``prompts`` may be left out (each
    query is then its response); other fields are ignored; an empty ``query`` is no rows."""
    from moverkit._core.base import check_texts

    try:
        queries = check_texts(required(data, "query"), "query")
        given = data.get("prompts")
        prompts = [""] * len(queries) if given is None else check_texts(given, "prompts")
        labels = required(data, "labels")
        if not isinstance(labels, list):
            raise TypeError(f"labels must be a list with one label per query, got {json_type(labels)}")
        if not len(queries) == len(prompts) == len(labels):
            raise ValueError(
                f"query, prompts and labels differ in length: {len(queries)}, {len(prompts)}, {len(labels)}"
            )
        references = [reference_row(label, f"labels[{i}]") for i, label in enumerate(labels)]
    except (ValueError, TypeError) as err:
        raise BadRequest(400, str(err)) from None
    for i, (query, prompt) in enumerate(zip(queries, prompts)):
        if not query.startswith(prompt):
            raise BadRequest(
                400,
                f"query[{i}] does not start with prompts[{i}] ({shown(prompt)}; the query begins {shown(query)}): "
                "a query is its prompt and its response decoded together, as OpenRLHF sends it",
            )
    responses = [response_text(q, p, end_markers) for q, p in zip(queries, prompts)]
    rows = [[r] if isinstance(r, str) else r for r in references]
    count(limits, len(responses) + sum(map(len, rows)))
    return responses, rows


def shown(text: str, width: int = 40) -> str:
    """The start of ``text`` as a message quotes it."""
    return repr(text if len(text) <= width else text[:width] + "...")


def response_text(query: str, prompt: str, end_markers: Sequence[str] = END_MARKERS) -> str:
    """The response of an OpenRLHF query: the query less its prompt where it starts with it, less
    the ``end_markers`` at its end (any number, in any order, whitespace around them cut with them);
    a response that ends in none is returned as it is. One that still ends in something that looks
    like a marker (``<|...|>``, ``</...>``) is logged, once per marker (:func:`unknown_marker`)."""
    text = query[len(prompt) :] if query.startswith(prompt) else query
    cut = text
    while True:
        stripped = cut.rstrip()
        marker = next((m for m in end_markers if m and stripped.endswith(m)), None)
        if marker is None:
            break
        cut = stripped[: -len(marker)]
    if cut is not text:
        text = cut.rstrip()
    unknown_marker(text)
    return text


_WARNED: set[str] = set()
"""The unknown markers this process has logged."""


def unknown_marker(text: str) -> str | None:
    """The special-looking marker ``text`` ends in, if any, logged the first time it is seen."""
    found = SPECIAL_LOOKING.search(text)
    if found is None:
        return None
    marker = found.group(1)
    if marker not in _WARNED:
        _WARNED.add(marker)
        logger.warning(
            "moverkit.serve: a /get_reward query ends in %r, which is not one of the end markers this server "
            "cuts, so it is scored as text; if it is the policy's end of sequence, start the server with "
            "--tokenizer (the policy's) or --end-marker %r",
            marker,
            marker,
        )
    return marker


def count(limits: Limits, texts: int) -> None:
    """A 413 naming the limit where a request holds more than ``limits.texts`` texts."""
    if texts > limits.texts:
        raise BadRequest(413, f"the request holds {texts:,} texts; this server takes at most {limits.texts:,} (texts)")


def within(limits: Limits, *fields: tuple[str, list[str]]) -> None:
    """A 413 naming the limit where one text of ``fields`` (name, texts) holds more characters than
    ``limits.characters``."""
    for name, texts in fields:
        for i, text in enumerate(texts):
            if len(text) > limits.characters:
                raise BadRequest(
                    413,
                    f"{name}[{i}] has {len(text):,} characters; this server takes at most "
                    f"{limits.characters:,} per text (characters)",
                )


def tokenizer_markers(name: str) -> tuple[str, ...]:
    """The end markers of the tokenizer ``name`` (a Hugging Face id in the local cache, or a
    folder): its end-of-sequence and padding tokens, and those of :data:`END_MARKERS` it holds as
    special tokens."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
    except Exception as err:  # transformers raises OSError, ValueError, ... for a name it cannot load
        raise ValueError(f"tokenizer={name!r} could not be loaded: {err}") from None
    special = set(getattr(tokenizer, "all_special_tokens", ()))
    found = [tokenizer.eos_token, tokenizer.pad_token, *(m for m in END_MARKERS if m in special)]
    markers = tuple(dict.fromkeys(m for m in found if isinstance(m, str) and m))
    if not markers:
        raise ValueError(f"tokenizer={name!r} has no end-of-sequence or padding token to cut")
    return markers


# ---------------------------------------------------------------------------------------------
# The counters of GET /metrics


LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
"""The upper bounds (seconds) of the latency histogram."""


class Counters:
    """A replica's counters, in Prometheus' text format: ``moverkit_requests_total`` (by route and
    status), ``moverkit_rows_total`` (rows scored, by route), ``moverkit_errors_total`` (answers of
    4xx and 5xx, by route and status) and ``moverkit_request_seconds`` (a histogram of the time from
    a request's arrival at the replica to its answer, by route). Each replica counts its own
    requests and answers ``/metrics`` with them, its ``replica`` label saying which (Serve routes a
    ``/metrics`` request to one replica; Ray's own metrics export, scraped from each node, holds
    Serve's counters of every replica)."""

    def __init__(self, replica: str = ""):
        self.replica = replica
        self.requests: dict[tuple[str, int], int] = {}
        self.rows: dict[str, int] = {}
        self.latency: dict[str, list] = {}  # route: [count per bucket..., count, sum]

    def observe(self, route: str, status: int, rows: int, seconds: float) -> None:
        self.requests[route, status] = self.requests.get((route, status), 0) + 1
        self.rows[route] = self.rows.get(route, 0) + rows
        held = self.latency.setdefault(route, [0] * (len(LATENCY_BUCKETS) + 1) + [0.0])
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                held[i] += 1
        held[-2] += 1
        held[-1] += seconds

    def text(self) -> str:
        label = f'replica="{self.replica}",' if self.replica else ""
        lines = [
            "# HELP moverkit_requests_total Requests answered, by route and status.",
            "# TYPE moverkit_requests_total counter",
        ]
        lines += [
            f'moverkit_requests_total{{{label}route="{r}",status="{s}"}} {n}'
            for (r, s), n in sorted(self.requests.items())
        ]
        lines += [
            "# HELP moverkit_rows_total Rows (a prediction and its references) scored.",
            "# TYPE moverkit_rows_total counter",
        ]
        lines += [f'moverkit_rows_total{{{label}route="{r}"}} {n}' for r, n in sorted(self.rows.items())]
        lines += ["# HELP moverkit_errors_total Requests answered 4xx or 5xx.", "# TYPE moverkit_errors_total counter"]
        lines += [
            f'moverkit_errors_total{{{label}route="{r}",status="{s}"}} {n}'
            for (r, s), n in sorted(self.requests.items())
            if s >= 400
        ]
        lines += [
            "# HELP moverkit_request_seconds Time from a request's arrival at the replica to its answer.",
            "# TYPE moverkit_request_seconds histogram",
        ]
        for route, held in sorted(self.latency.items()):
            for bound, n in zip((*LATENCY_BUCKETS, "+Inf"), held[:-1]):
                lines.append(f'moverkit_request_seconds_bucket{{{label}route="{route}",le="{bound}"}} {n}')
            lines.append(f'moverkit_request_seconds_count{{{label}route="{route}"}} {held[-2]}')
            lines.append(f'moverkit_request_seconds_sum{{{label}route="{route}"}} {held[-1]:.6f}')
        return "\n".join(lines) + "\n"
