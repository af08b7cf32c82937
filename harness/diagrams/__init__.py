"""A finding's events as a sequence diagram, for an HTTP target or a queue consumer.

``_model.py`` is the diagram as data, the one thing a front end's layout and a report's
renderer share (an HTTP service's layout is ``harness/http/_diagram.py``, a consumer's
``harness/consumer/_diagram.py``); ``_storyboard.py`` asks the history's front end for its
layout.  The package re-exports nothing, so a front end importing the model loads no layout.
"""
