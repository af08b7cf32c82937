"""What the harness reads from a target beside its answers, outside its idempotency layer.

The side effects of each key (``_oracle.py``: an HTTP query, a SQL query, the recorder) and the
key table (``_store_size.py``: its size, its cleanup).  An HTTP service's deployment and a queue
consumer's both read them; the judge only ever sees what they recorded in the history.
"""
