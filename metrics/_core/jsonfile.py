"""JSON text read into Python with every failure a ``ValueError`` naming where the text came from.

``json.loads`` raises ``RecursionError`` (not a ``ValueError``) on arrays or objects nested deeper
than Python's recursion limit (about a thousand levels), and a file crafted that way would otherwise
end a command in a traceback. No moverkit file nests more than a few levels.
"""

from __future__ import annotations

import json


def loads(text: str, source: str, **kwargs):
    """``json.loads(text, **kwargs)``; a ValueError ``"<source>: not a JSON file (...)"`` when the text
    is not JSON or is nested too deeply to parse."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as err:
        raise ValueError(f"{source}: not a JSON file ({err})") from None
    except RecursionError:
        raise ValueError(f"{source}: not a JSON file moverkit reads (nested too deeply to parse)") from None
