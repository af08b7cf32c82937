"""``python -m harness.cli``: the same command as the ``idem-harness`` script."""

from harness.cli import main

main()
