"""axe-core, the accessibility checker, run in a page of the browser tests.

axe-core is vendored like the site's browser libraries (static/vendor/axe-core/, from
package-lock.json) but no page of the site loads it: this helper injects it. The CSP
forbids inline scripts, so it is added as a script element with its same-origin /static/
URL, which ``script-src 'self'`` allows, and run in the page as a user's browser sees it.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

AXE_URL = "/static/vendor/axe-core/axe.min.js"
# What fails a page: axe's two worst impacts (the minor and moderate ones are advice).
FAILING = ("serious", "critical")

RUN = """async (failing) => {
  const results = await window.axe.run(document, { resultTypes: ["violations"] });
  return results.violations
    .filter((v) => failing.includes(v.impact))
    .map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({
        target: n.target.join(" "),
        summary: (n.failureSummary || "").replace(/\\s+/g, " ").trim(),
      })),
    }));
}"""


def inject(page: Page) -> None:
    """Load axe-core into the page (once)."""
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(url=AXE_URL)
    page.wait_for_function("() => !!window.axe")


def violations(page: Page) -> list[dict[str, Any]]:
    """The serious and critical violations axe finds in the page as it is now."""
    inject(page)
    return page.evaluate(RUN, list(FAILING))


def report(found: list[dict[str, Any]]) -> str:
    """A readable list: one rule a paragraph, one line per element (its CSS path and why)."""
    lines = []
    for rule in found:
        lines.append(f"{rule['id']} ({rule['impact']}): {rule['help']}")
        for node in rule["nodes"][:8]:
            lines.append(f"  - {node['target']}: {node['summary']}")
        if len(rule["nodes"]) > 8:
            lines.append(f"  … and {len(rule['nodes']) - 8} more")
    return "\n".join(lines)


def assert_accessible(page: Page, where: str) -> None:
    """Fail with axe's serious and critical violations of ``page``, named by ``where``."""
    found = violations(page)
    assert not found, f"axe-core finds in {where}:\n{report(found)}"
