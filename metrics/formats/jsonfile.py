"""JSON text read into Python with every failure a ``ValueError`` naming where the text came from:
the one reader of every JSON a user gives (settings files, ``tune --grid``, combination files),
and what moverkit's own JSON files share (settings and combination files): reading the file,
checking its ``format`` and ``version``, and the digest of its canonical JSON.

``json.loads`` raises ``RecursionError`` (not a ``ValueError``) on arrays or objects nested deeper
than Python's recursion limit (about a thousand levels), and a file crafted that way would otherwise
end a command in a traceback; it also takes ``NaN`` and ``Infinity``, which are not JSON. No
moverkit file nests more than a few levels.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def loads(text: str, source: str):
    """``text`` as JSON; a ValueError ``"<source>: not a JSON file (...)"`` when the text is not JSON
    (``NaN`` and ``Infinity`` included) or is nested too deeply to parse."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except ValueError as err:
        raise ValueError(f"{source}: not a JSON file ({err})") from None
    except RecursionError:
        raise ValueError(f"{source}: not a JSON file moverkit reads (nested too deeply to parse)") from None


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def read_file(path: str | os.PathLike, source: str):
    """The JSON of the file at ``path``, read as untrusted (:func:`loads`); a ValueError naming
    ``source`` when it does not exist or is not UTF-8 text."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{source} does not exist") from None
    except UnicodeDecodeError:
        raise ValueError(f"{source} is not UTF-8 text") from None
    return loads(text, source)


def check_format(record, source: str, *, kind: str, version: int) -> dict:
    """``record`` if it is a JSON object with ``"format": kind`` and ``"version": version``; a
    ValueError naming ``source`` and the field otherwise."""
    if not isinstance(record, dict):
        found = {list: "a JSON array", str: "a JSON string", bool: "true or false", type(None): "null"}.get(
            type(record), "a JSON number"
        )
        raise ValueError(f"{source}: {found}, not an object: a {kind} file is one JSON object")
    if record.get("format") != kind:
        raise ValueError(f'{source}: not a {kind} file (no "format": "{kind}")')
    if record.get("version") != version:
        raise ValueError(f"{source}: version {record.get('version')!r}; this moverkit reads version {version}")
    return record


def digest(record, *, compact: bool = True) -> str:
    """SHA-256 (hex) of ``record`` as canonical JSON: keys sorted, floats by their shortest exact
    repr, NaN refused, and no spaces (``compact``; settings files hash with json's default
    ``", "`` and ``": "``, as their digests have been since version 1, so that a file keeps its digest)."""
    separators = (",", ":") if compact else None
    canonical = json.dumps(record, sort_keys=True, separators=separators, allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
