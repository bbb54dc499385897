from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tools.builtin.current_time import build, current_time
from tools.registry import ToolContext

MOMENT = datetime(2024, 7, 1, 12, 30, tzinfo=UTC)


def test_named_zone_with_offset_and_weekday():
    result = current_time("Asia/Tokyo", now=MOMENT)
    assert not result.is_error
    assert "Monday, 01 July 2024, 21:30:00 in Asia/Tokyo" in result.content
    assert "UTC+09:00" in result.content
    assert "2024-07-01T21:30:00+09:00" in result.content


def test_default_is_utc():
    assert "UTC" in current_time(now=MOMENT).content


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "Europe/", "not a zone"])
def test_invalid_zone_is_a_clear_error(zone):
    result = current_time(zone)
    assert result.is_error
    assert "unknown timezone" in result.content and "IANA" in result.content


async def test_tool_uses_configured_default():
    (tool,) = build({"default_timezone": "Europe/Paris"}, ToolContext())
    result = await tool.invoke({})
    assert "in Europe/Paris" in result.content
    assert tool.parameters["properties"]["timezone"]["default"] == "Europe/Paris"


@pytest.mark.parametrize(
    ("name", "zone"),
    [
        ("Tokyo", "Asia/Tokyo"),
        ("new york", "America/New_York"),
        ("New_York", "America/New_York"),
        ("europe/paris", "Europe/Paris"),
        ("London", "Europe/London"),
        ("utc", "UTC"),
    ],
)
def test_a_city_or_any_case_names_its_zone(name, zone):
    """Models know cities better than zone names; the answer names the zone used."""
    result = current_time(name, now=MOMENT)
    assert not result.is_error and f"in {zone} (" in result.content


@pytest.mark.parametrize("argument", ['"]}', "UTC+01:59; 23.62", "{timezone}", 'Asia/Tokyo"}'])
async def test_json_debris_and_offsets_are_refused_by_the_schema(argument):
    """The pattern is what a grammar-constrained model is held to: no JSON, no prose."""
    (tool,) = build({}, ToolContext())
    assert tool.validation_error({"timezone": argument}) is not None
    assert tool.validation_error({"timezone": "America/Argentina/Buenos_Aires"}) is None
