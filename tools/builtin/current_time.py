"""``current_time``: the current date and time in an IANA timezone (models have no clock)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine import Tool, ToolResult
from tools.registry import ToolContext, ToolSpec, register

__all__ = ["current_time"]


def current_time(timezone: str = "UTC", *, now: datetime | None = None) -> ToolResult:
    """Now in ``timezone``; an unknown or malformed name is an error observation."""
    name = (timezone or "UTC").strip()
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return ToolResult(
            f"Error: unknown timezone '{name}'. Use an IANA name such as 'UTC', "
            "'Europe/Paris', 'America/New_York' or 'Asia/Shanghai'.",
            is_error=True,
        )
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
                        "description": f"IANA name, e.g. 'Europe/Paris'. Default {default}.",
                        "default": default,
                    }
                },
            },
            func=run,
            timeout=5.0,
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
