"""The formats of what users hand moverkit and get back, read without torch:

- ``lines``: text files read one text a line, and files written whole or not at all;
- ``jsonfile``: JSON read with every failure a ``ValueError`` naming its source;
- ``settings``: settings files (what ``moverkit tune`` chose for a metric);
- ``options``: the command line's shared options, read by ``moverkit``'s commands and its benchmarks.

They import nothing of moverkit but each other and :mod:`moverkit.facts`, so that ``moverkit --help``
loads no torch; ``_core`` may read them (``tests/test_architecture.py``)."""
