"""A finding's events as a sequence diagram, for an HTTP target or a queue consumer.

``_model.py`` is the diagram as data, the one thing a front end's layout and a report's
renderer share; ``_http.py`` lays out an HTTP target's events (a consumer's layout is
``harness/consumer/_diagram.py``); ``_storyboard.py`` picks the layout by the history.  The
package re-exports nothing, so a front end importing the model loads no layout.
"""
