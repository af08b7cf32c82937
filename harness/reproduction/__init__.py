"""A finding's reproduction script: what the scripts of every front end share.

Where a report directory keeps them, and their comments (``_scripts.py``).  Each front end
writes its own findings' scripts; the package re-exports nothing.
"""
