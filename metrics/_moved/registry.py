"""``moverkit.registry``, moved to :mod:`moverkit.integrations.registry` in 0.4.0: this old path warns and is
that module until 0.5.0 removes it (:func:`moverkit.integrations.moved_here`)."""

from moverkit.integrations import moved_here

moved_here(__name__)
