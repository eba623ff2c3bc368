"""The light leaves: modules that import nothing of moverkit but each other, and no heavy package
(torch, transformers) at import, so that ``import moverkit``, ``moverkit --help`` and ``--version``
read them without torch:

- ``version``: the release literal (hashcodes, setuptools, ``moverkit publish``);
- ``specs``: each metric's facts (outputs, direction, range, reference points), the registry's
  light table;
- ``lines``: text files read one text a line, and files written whole or not at all;
- ``jsonfile``: JSON read with every failure a ``ValueError`` naming its source;
- ``settings``: settings files (what ``moverkit tune`` chose for a metric);
- ``options``: the command line's shared options, read by ``moverkit``'s commands and its benchmarks.

``_core`` may read them, and nothing else outside itself (``tests/test_architecture.py``)."""
