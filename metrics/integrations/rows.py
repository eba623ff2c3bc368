"""Rows in and out of a door: a row's references checked as ``compute`` checks them (the error
naming the column or field and the row), a column a door reads that is not there, and a result
as columns (``datasets.map``, Ray Data) or as one record per pair and back (the server)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class MissingColumn(KeyError):
    """A column a door reads is not in its batch: a ``KeyError``, as ``batch[name]`` raises,
    whose message reads as written (a ``KeyError`` prints the repr of its message)."""

    def __str__(self) -> str:
        return str(self.args[0])


def reference_row(value, name: str):
    """One row of references, as ``compute`` takes it: a string, or a non-empty list of strings
    (several references); ``name`` says where it is in an error."""
    from moverkit._core.base import check_text, from_numpy, is_missing

    if isinstance(value, str) or is_missing(value):
        return check_text(value, name)
    value = from_numpy(value)
    if isinstance(value, (bytes, dict)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a string or a list of strings, got {type(value).__name__}: {value!r}")
    if len(value) == 0:
        raise ValueError(f"{name} is an empty list; give at least one reference per prediction")
    return [check_text(item, f"reference {j} in {name}") for j, item in enumerate(value)]


def result_columns(result: Mapping) -> dict[str, list]:
    """A metric's result as columns: its per-pair lists (outputs, and alignments or reference
    indices when asked), without the one ``hashcode`` of the call."""
    return {key: value for key, value in result.items() if isinstance(value, list)}


def result_records(result: Mapping) -> list[dict]:
    """A metric's result as one record per pair: its outputs, with the call's ``hashcode``."""
    columns = result_columns(result)
    n = len(next(iter(columns.values()), []))
    return [{**{key: values[i] for key, values in columns.items()}, "hashcode": result["hashcode"]} for i in range(n)]


def records_result(records: Sequence[Mapping]) -> dict:
    """Records of :func:`result_records` (of one call's arguments, however many calls scored
    them) as one result: a list per output, in the records' order, and their ``hashcode``."""
    columns = {key: [record[key] for record in records] for key in records[0] if key != "hashcode"}
    return {**columns, "hashcode": records[0]["hashcode"]}
