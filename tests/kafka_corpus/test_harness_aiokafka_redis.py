"""The Kafka corpus consumer ``aiokafka_redis`` through the harness: its correct mode clean
by ``run`` and ``explore``, each of its flaws caught by both
(tests/kafka_corpus/through_the_harness.py)."""

from __future__ import annotations

import pytest

from tests.kafka_corpus.through_the_harness import (
    plays,
    test_a_correct_consumer_has_no_finding,
    test_a_seeded_explore_of_a_correct_consumer_finds_nothing,
    test_each_flaw_is_caught_by_explore,
    test_each_flaw_is_caught_by_run,
)

__all__ = ["plays", "test_a_correct_consumer_has_no_finding",
           "test_a_seeded_explore_of_a_correct_consumer_finds_nothing",
           "test_each_flaw_is_caught_by_explore", "test_each_flaw_is_caught_by_run"]


@pytest.fixture(scope="module")
def consumer() -> str:
    return "aiokafka_redis"
