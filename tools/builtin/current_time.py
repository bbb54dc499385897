"""``current_time``: the current date and time in a timezone (models have no clock).

The timezone is an IANA name, or the city part of one ("Tokyo", "new york"): models
know cities better than zone names, and small ones invent offsets ("UTC+01:59").
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from engine import Tool, ToolExample, ToolResult
from tools.registry import ToolContext, ToolSpec, register

__all__ = ["TIMEZONE_PATTERN", "current_time", "zone_named"]

# Letters, then letters, '/', '_', '-', '+', spaces or digits ("Etc/GMT+9"): no JSON,
# quotes or sentences in the argument of a grammar-constrained model.
TIMEZONE_PATTERN = r"^[A-Za-z][A-Za-z0-9/_ +-]{0,40}$"


@functools.cache
def _zone_index() -> dict[str, str]:
    """Every IANA name and the city part of each, lower-cased with spaces for "_"
    ("asia/tokyo", "tokyo", "new york") -> the zone's name."""
    index: dict[str, str] = {}
    for zone in sorted(available_timezones()):  # "America/..." before "US/..." aliases
        index[zone.replace("_", " ").lower()] = zone
        index.setdefault(zone.rsplit("/", 1)[-1].replace("_", " ").lower(), zone)
    return index


# Words models add after a zone or city: "US/Eastern Timezone", "Tokyo time".
_TRAILING_WORDS = re.compile(r"\s+(?:time\s*zone|time|zone|city)$")


def zone_named(name: str) -> ZoneInfo | None:
    """The zone ``name`` means (an IANA name in any case, or its city part), else None."""
    key = " ".join(name.replace("_", " ").split()).lower()
    zone = _zone_index().get(key) or _zone_index().get(_TRAILING_WORDS.sub("", key))
    return ZoneInfo(zone) if zone else None


def current_time(timezone: str = "UTC", *, now: datetime | None = None) -> ToolResult:
    """Now in ``timezone``; an unknown or malformed name is an error observation."""
    name = (timezone or "UTC").strip()
    zone = zone_named(name)
    if zone is None:
        return ToolResult(
            f"Error: unknown timezone '{name}'. Use an IANA name such as 'UTC', "
            "'Europe/Paris', 'America/New_York' or 'Asia/Shanghai', or a city in one.",
            is_error=True,
        )
    name = zone.key
    moment = (now or datetime.now(UTC)).astimezone(zone)
    offset = moment.strftime("%z")
    offset = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    return ToolResult(
        f"{moment.strftime('%A, %d %B %Y, %H:%M:%S')} in {name} "
        f"({moment.tzname()}, {offset}); ISO 8601: {moment.isoformat(timespec='seconds')}"
    )


def build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    default = str(config.get("default_timezone") or "UTC")

    def run(timezone: str = default) -> ToolResult:
        return current_time(timezone)

    return [
        Tool(
            name="current_time",
            description="The current date and time (with weekday and UTC offset) in a timezone.",
            parameters={
                "type": "object",
                "properties": {
                    "timezone": {
                        "type": "string",
                        "description": (
                            f"IANA name such as 'Europe/Paris', or a city. Default {default}."
                        ),
                        "default": default,
                        "pattern": TIMEZONE_PATTERN,
                    }
                },
            },
            func=run,
            timeout=5.0,
            examples=(ToolExample("What time is it in Berlin?", {"timezone": "Europe/Berlin"}),),
        )
    ]


SPEC = register(
    ToolSpec(
        name="current_time",
        description="Current date and time in a given timezone.",
        build=build,
        config_schema={
            "type": "object",
            "properties": {
                "default_timezone": {
                    "type": "string",
                    "description": "Timezone used when the model names none.",
                    "default": "UTC",
                }
            },
        },
        default_config={"default_timezone": "UTC"},
    )
)
