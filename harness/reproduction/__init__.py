"""A finding's reproduction: what its script carries, the script, and its replay after the run.

The package re-exports nothing; the runner writes scripts and ``idem-harness reproduce`` plays
them, each importing the module it needs.
"""
