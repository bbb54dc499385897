"""Tool configuration rows, MCP servers and artifacts (one module each)."""

from tools.models.artifacts import *  # noqa: F403
from tools.models.config import *  # noqa: F403
from tools.models.mcp import *  # noqa: F403
