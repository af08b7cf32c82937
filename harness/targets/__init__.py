"""Target files of either kind: reading and validating one, and the built-in ones.

An HTTP service's file (``harness/_target.py``) and a queue consumer's
(``harness/consumer/_target.py``) are two kinds of one format; loading a file belongs above
both, so neither kind imports the other.  ``reference.toml`` describes the reference server.
The package re-exports nothing: ``harness`` lists ``load_target`` among its public names.
"""
