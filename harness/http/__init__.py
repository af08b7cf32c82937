"""The HTTP front end: an HTTP service driven through Toxiproxy by the recording client.

Everything that belongs to HTTP services alone lives here: the deployment and its instances,
the recording client, the scenario context and its nemesis, the run of scenarios (one at a time
or at once), the explorer's machine, a finding's sequence diagram and its reproduction, Locust
under chaos (``load/``) and drafting a target file (``drafting/``).  The engine reaches it only
through ``_front.py`` (a ``harness._front.Front``, found by the registry); its public names are
re-exported by ``harness``.  It imports the engine and nothing of another front end.

This ``__init__`` imports nothing: a Locust process imports ``harness.http.load._process``
before anything loads ``ssl`` (docs/load.md), and must find nothing else to load on the way.
"""
