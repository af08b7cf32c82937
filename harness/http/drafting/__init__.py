"""Drafting and learning a target file: ``idem-harness init`` and ``idem-harness probe``.

``init`` reads an OpenAPI document (or a URL and a path) and writes a commented draft; ``probe``
asks the running service with a few requests under fresh keys and writes what it learned into
the file, keeping everything the user wrote.  The package re-exports nothing: the CLI imports
each module when its command runs, because the OpenAPI libraries take half a second to load.
"""
