"""What every door of moverkit to another library stands on (issue 68): one adapter
(:mod:`moverkit.integrations.adapter`: the policy of defaults, the arguments a door passes, its
output, its device, the call itself) and the rows a door reads and writes
(:mod:`moverkit.integrations.rows`).

The doors stay at the paths users type (``moverkit.map_scores``, ``moverkit.ray``,
``moverkit.rewards``, ``moverkit.verl``, ``moverkit.serve``, ``moverkit.mbr``,
``moverkit.lighteval``, ``moverkit.lm_eval``, ``moverkit.torchmetrics``); each holds its
framework's shape and nothing else. This package imports no torch at import: ``moverkit --help``
reads the doors' commands without it.
"""
