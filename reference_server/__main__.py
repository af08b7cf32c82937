"""``python -m reference_server``: ``idem-harness serve``, or ``consume`` for the consumer.

The same command as ``idem-harness serve``; ``python -m reference_server consume ...``, the
reference queue consumer on RabbitMQ; ``python -m reference_server consume-kafka ...``, the same
consumer on a Kafka topic."""

import sys

__all__: list[str] = []

if sys.argv[1:2] == ["consume"]:
    from reference_server.consumer.cli import consume

    consume(args=sys.argv[2:], prog_name="python -m reference_server consume")
elif sys.argv[1:2] == ["consume-kafka"]:
    from reference_server.consumer.kafka_cli import consume_kafka

    consume_kafka(args=sys.argv[2:], prog_name="python -m reference_server consume-kafka")
else:
    from reference_server.cli import serve

    serve(prog_name="python -m reference_server")
