"""Target files of any kind: reading and validating one, and the built-in ones.

Every kind of target is one format (``harness/_target.py``'s tables, which a queue consumer's
file extends); loading a file belongs above every front end, which says whether a file is of
its kind (``harness._front``), so no kind imports another.  ``reference.toml`` describes the
reference server.  The package re-exports nothing: ``harness`` lists ``load_target`` among its
public names.
"""
