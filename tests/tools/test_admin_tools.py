"""The admin's tools list says which tools models are offered (issue 47: a disabled tool
said "yes")."""

from __future__ import annotations

import re

import pytest

from tools.models import ToolConfig
from tools.services import toolconfig_sync, toolconfig_update

pytestmark = pytest.mark.django_db


def offered(admin_client, name: str) -> str:
    page = admin_client.get("/admin/tools/toolconfig/").content.decode()
    rows = re.findall(r"<tr[^>]*>.*?</tr>", page, re.DOTALL)
    row = next(row for row in rows if f">{name}</a>" in row)
    return re.search(r'<td class="field-readiness">(.*?)</td>', row).group(1)


def test_a_disabled_tool_is_not_offered(admin_client) -> None:
    toolconfig_sync()
    calculator = ToolConfig.objects.get(name="calculator")
    toolconfig_update(toolconfig=calculator, enabled=True)
    assert offered(admin_client, "calculator") == "yes"
    toolconfig_update(toolconfig=calculator, enabled=False)
    assert offered(admin_client, "calculator") == "no: disabled"
