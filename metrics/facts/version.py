"""The release of this checkout: one literal, read by the package, its hashcodes, setuptools and `moverkit publish`."""

__version__ = "0.4.0"
