"""A load run's page reads as a person pastes it back: the seed as it was given, durations and
rates with their units."""

from __future__ import annotations

from harness.reports._sections import parse_load


def test_settings_keep_the_seed_pasteable_and_give_units() -> None:
    section = parse_load({"settings": {"seed": 3931199299, "duration": 30.0,
                                       "request_timeout": 2.0, "spawn_rate": 10.0,
                                       "double_submit": 0.125, "users": 50, "listen": None},
                          "figures": {"seconds": 31.25, "requests": 12000}})
    settings = dict(section.settings)
    assert settings == {"seed": "3931199299", "duration": "30s", "request timeout": "2s",
                        "spawn rate": "10 users/s", "double submit": "12.5% of charges",
                        "users": "50"}
    assert dict(section.figures)["seconds"] == "31.2s"
