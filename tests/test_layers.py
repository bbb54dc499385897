"""The import layers of docs/architecture.md hold: each package imports only those below it,
no two modules import each other (directly or round a ring), and an import inside a function
says why it is there.

Read from the source (every import statement: at module level, inside functions, under
``TYPE_CHECKING``), so a loop cannot hide behind a deferred import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Lowest first: a package may import the packages before it, never one after it.
LAYERS = (
    "engine",
    "core",
    "audit",
    "files",
    "llms",
    "knowledge",
    "tools",
    "conversations",
    "agentsite",
)
# The rooms of conversations/, lowest first (docs/architecture.md says what each holds).
# pages sits below runs while the worker renders a run's frames (runs/publisher.py).
CONVERSATION_ROOMS = (
    "models",
    "accounts",
    "history",
    "organise",
    "selectors",
    "user_settings",
    "preferences",
    "chat_settings",
    "instructions",
    "presets",
    "preset_usage",
    "titles",
    "runs",
    "attachments",
    "services",
    "knowledge_sources",
    "starting",
    "pages",
    "transfer",
    "http",
    "branches",
    "live",
    "views",
    "context_processors",
    "knowledge_pages",
    "settings_pages",
    "language_pages",
    "chat_settings_pages",
    "preset_pages",
    "organise_pages",
    "api",
    "urls",
    "routing",
    "tasks",
    "runtime",
    "admin",
    "apps",
    "management",
    "templatetags",
)
# Test support: the test suite and benchmarks import it, production never does.
TEST_SUPPORT = ("tests", "testing")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the project module imported (the longest known prefix)
    line: int
    in_function: bool
    commented: bool  # a comment on the line or the line above says why


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in LAYERS
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


MODULES = source_files()


def known(name: str) -> str | None:
    """The project module a dotted name refers to (a module, or a name in one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def says_why(lines: list[str], line: int) -> bool:
    """A comment on the import's line, or above the block of imports it belongs to."""
    if "#" in lines[line - 1]:
        return True
    above = line - 2
    while above >= 0 and lines[above].strip().startswith(("from ", "import ")):
        above -= 1
    return above >= 0 and lines[above].strip().startswith("#")


def imports_of(module: str, path: Path) -> Iterator[Import]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, filename=str(path))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            in_function.update(id(sub) for sub in ast.walk(node))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        line = node.lineno
        commented = says_why(lines, line)
        for name in names:
            target = known(name)
            if target and target != module:
                yield Import(module, target, line, id(node) in in_function, commented)


IMPORTS = [imp for module, path in MODULES.items() for imp in imports_of(module, path)]


def package_of(module: str) -> str:
    return module.split(".")[0]


def test_each_package_imports_only_the_layers_below_it() -> None:
    rank = {package: n for n, package in enumerate(LAYERS)}
    upward = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if rank[package_of(imp.target)] > rank[package_of(imp.module)]
    ]
    assert upward == []


def room_of(module: str) -> str:
    return module.split(".")[1]


def test_every_room_of_conversations_has_a_place() -> None:
    rooms = {room_of(m) for m in MODULES if package_of(m) == "conversations" and "." in m}
    assert rooms - set(CONVERSATION_ROOMS) == set()


def test_rooms_of_conversations_import_only_rooms_below() -> None:
    rank = {room: n for n, room in enumerate(CONVERSATION_ROOMS)}
    upward = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if package_of(imp.module) == package_of(imp.target) == "conversations"
        and "." in imp.module
        and "." in imp.target
        and rank.get(room_of(imp.target), 0) > rank.get(room_of(imp.module), 0)
    ]
    assert upward == []


def test_only_the_project_package_imports_itself() -> None:
    """agentsite/ is settings, urls, asgi, celery and the server: Django loads it."""
    outside = [
        f"{imp.module}:{imp.line}"
        for imp in IMPORTS
        if package_of(imp.target) == "agentsite" and package_of(imp.module) != "agentsite"
    ]
    assert outside == []


def test_production_never_imports_test_support() -> None:
    offenders = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [f"{module}: {n}" for n in names if n.split(".")[0] in TEST_SUPPORT]
    assert offenders == []


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_between_modules() -> None:
    edges: dict[str, set[str]] = {module: set() for module in MODULES}
    for imp in IMPORTS:
        edges[imp.module].add(imp.target)
    assert cycles(edges) == []


def test_cycle_finder_sees_a_ring() -> None:
    ring = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(ring) == [["a", "b", "c"]]


def test_an_import_inside_a_function_says_why() -> None:
    """Deferred imports hide loops and start-up costs: each names the reason it exists (the
    app registry not ready yet, a slow library imported on first use)."""
    silent = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.in_function and not imp.commented
    ]
    assert silent == []


def test_the_scan_reads_every_kind_of_import() -> None:
    """A guard for the tests above: the scanner resolves absolute and in-function imports."""
    seen = {(imp.module, imp.target, imp.in_function) for imp in IMPORTS}
    assert ("conversations.tasks", "conversations.runs.launcher", False) in seen
    assert ("conversations.apps", "conversations.accounts.users", True) in seen
