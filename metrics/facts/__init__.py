"""What moverkit states of itself and of each metric, read without torch:

- ``version``: the release literal (hashcodes, setuptools, ``moverkit publish``);
- ``specs``: each metric's facts (outputs, direction, range, reference points): the registry's
  light table, and the one place the metrics' names are spelled out;
- ``ties``: when two scores are one (``TIE_TOLERANCE``), and the rule every choice among scores
  follows (the first of tied values), so that a choice is the same on every CPU.

They import nothing of moverkit, so that ``import moverkit``, ``moverkit --help`` and ``--version``
read them without torch; ``_core`` may read them (``tests/test_architecture.py``)."""
