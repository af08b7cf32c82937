"""An HTTP finding's reproduction, after the run: what its script carries, the script, the replay.

``_reproduction.py`` is what a script carries (its key's story, or its scenario and seed, and
how the target started); ``_scripts.py`` writes the bash script, with the ``curl`` lines that
send the same requests by hand; ``_replay.py`` plays the story again at the run's moments and
says whether it broke again (``idem-harness reproduce``).  The package re-exports nothing.
"""
