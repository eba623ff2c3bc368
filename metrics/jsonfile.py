"""JSON text read into Python with every failure a ``ValueError`` naming where the text came from:
the one reader of every JSON a user gives (settings files, ``tune --grid``, combination files).

``json.loads`` raises ``RecursionError`` (not a ``ValueError``) on arrays or objects nested deeper
than Python's recursion limit (about a thousand levels), and a file crafted that way would otherwise
end a command in a traceback; it also takes ``NaN`` and ``Infinity``, which are not JSON. No
moverkit file nests more than a few levels.
"""

from __future__ import annotations

import json


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
