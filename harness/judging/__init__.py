"""Judging a history: the checker, properties P1-P11, the view they share, and findings.

The history is the only input; a verdict is data (a finding, a note, pass, n/a or unknown with
its reason), never an exception.  The package re-exports nothing: ``harness`` lists the public
names, and P1-P11 register on first use so that ``import harness`` stays cheap.
"""
