"""Text files as the command line and the demos read them: one text per line, and output paths
checked before any work and written whole or not at all."""

from __future__ import annotations

import os
import tempfile
import unicodedata
from collections.abc import Iterable
from pathlib import Path


def split_lines(text: str) -> list[str]:
    """One text per line, where a line ends at ``"\n"`` only, as ``wc -l`` counts: a form feed, a
    vertical tab, ``\x1c``-``\x1e``, ``\x85``, U+2028 or U+2029 (where ``str.splitlines`` also
    breaks) stays inside its text, so a stray one cannot shift the pairs that follow. A ``"\r"``
    just before the ``"\n"`` (Windows line ends) is not part of the text (a lone ``"\r"``
    elsewhere is). A final ``"\n"`` does not start one more, empty text; a last line without it
    is still a text."""
    lines = text.split("\n")
    if lines[-1] == "":  # the final newline (or no text at all)
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def table_label(what: str, value: str) -> str:
    """``value`` if it can stand in a report's table cell: no ``|`` (a Markdown cell's end), no
    control character (a newline, NEL U+0085) and no line or paragraph separator (U+2028,
    U+2029). Every character where ``str.splitlines`` breaks a line is one of these; one in a
    name split its table row. ``what`` names the value in the message."""
    if "|" in value or any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value):
        raise ValueError(
            f"{what} {value!r}: a name may hold no '|', no control character (a newline) and no line separator"
        )
    return value


def read_lines(path: Path) -> list[str]:
    """The texts of a UTF-8 file, one per line (:func:`split_lines`); a byte order mark at the
    start is dropped. Bytes that are not UTF-8 are refused naming the line they are on."""
    data = Path(path).read_bytes()
    try:
        return split_lines(data.decode("utf-8-sig"))
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def read_texts(path: Path) -> list[str]:
    """:func:`read_lines`, refusing a file with no line."""
    texts = read_lines(path)
    if not texts:
        raise ValueError(f"{path} is empty; it needs one text per line")
    return texts


def check_out(out: Path | None, inputs: Iterable[Path | None], flag: str = "--out") -> None:
    """Refuse, before any work, an output path (given as ``flag``) that cannot take the file or
    that is an input (it would be overwritten)."""
    if out is None:
        return
    if out.is_dir():
        raise ValueError(f"{flag} {out} is a folder; give the path of a file")
    folder = out.parent
    if not folder.is_dir():
        raise ValueError(f"{flag} {out}: there is no folder {folder}")
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"{flag} {out} cannot be written (permission denied)")
    for path in inputs:
        if path is not None and out.exists() and path.exists() and os.path.samefile(out, path):
            raise ValueError(f"{flag} {out} is the input file {path}; writing would overwrite it")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: into a temporary file in the same folder,
    renamed over ``path`` at the end, so a failed or interrupted command leaves no partial file
    (and an existing file stays as it was). Every file the package writes under a name the user
    gave goes through here.

    Only a regular file (or a new path) is replaced: a symbolic link is followed, so the file it
    names is the one written and the link stays; a path that is neither a file nor a folder (a
    device such as ``/dev/null``, a FIFO, a socket) is opened and written as it is, since renaming
    over it would replace the node with a plain file."""
    path = Path(os.path.realpath(path))  # through every link, to the file it names
    mode = "wb" if isinstance(data, bytes) else "w"
    text = {} if mode == "wb" else {"encoding": "utf-8", "newline": ""}
    if path.exists() and not path.is_file():
        with open(path, mode, **text) as f:
            f.write(data)
        return
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(handle, mode, **text) as f:
            f.write(data)
        os.chmod(temporary, _mode_for(path))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    """The permission bits ``path`` keeps (an existing file's), or those a plain ``open`` would
    give a new one (0o666 less the umask); ``mkstemp`` alone would leave 0o600."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
