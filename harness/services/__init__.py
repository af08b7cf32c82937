"""The real services the harness finds or starts, and what it needs to talk to them.

Toxiproxy, PostgreSQL, RabbitMQ and Kafka (an address from the environment, local binaries or
jars, or a container), the harness's own Kafka client, the child processes it starts,
libfaketime and its preload shim, the store proxy that reads PostgreSQL's and Redis's protocols,
the recorder, the loopback guard and the state directory.  Nothing here knows what a scenario
or a property is.  The package re-exports nothing: each module is imported by its own name, so
starting one service loads only what it needs.
"""
