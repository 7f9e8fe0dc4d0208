"""docs/architecture.md as a rule a machine checks (issue 22).

The page lists the modules top to bottom.  A module imports only modules
listed further down (modules on one line, or inside one package, may import
each other), and never in a cycle.  Imports sit at the top of modules: one
inside a function is allowed only for a heavy package (HEAVY) or a module of
govsync that imports one at its top (so offline commands never pay for it), and
there are at most FUNCTION_LEVEL_BUDGET imports of govsync's own modules inside
functions in all.  A module only one command needs is imported at the top of that
command's module in cli/, which loads when the command runs
(govsync.cli.root.COMMANDS).
Names under ``if TYPE_CHECKING:`` follow the layering too, so they cannot hide
an upward edge.  Every module of the package is on the page.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "govsync"
# Third-party (and slow standard-library) packages that offline commands must not
# load, so they may be imported where they are used.
HEAVY = frozenset({
    "httpx", "httpcore", "anyio", "h11", "certifi", "ssl", "asyncio", "cel_expr_python",
    "cryptography", "networkx", "starlette", "uvicorn", "psycopg", "pydantic", "pydantic_core",
    "rich", "deepdiff", "ruamel", "playwright", "prometheus_client", "difflib", "resource",
    # importlib.metadata: 11 ms, for `govsync init` (which install made this govsync);
    # importlib.resources, for the files shipped with govsync.  (importlib itself is
    # loaded before any of govsync: project.py's SECTIONS are imported through it.)
    "importlib.metadata", "importlib.resources", "croniter",
    # the time-zone database's loader (with sysconfig): for a project's agent.timezone;
    # subprocess: for git, in an apply's record and the agent's checkout.
    "zoneinfo", "subprocess",
    # pickle and signal: for the rules' worker (bounded.py) and the two-process reader.
    "pickle", "signal",
    # logging (with traceback and string: 3 ms): loaded where a log is configured
    # (GOVSYNC_LOG, logs.py) or written, not by every start-up (issue 31).
    "logging",
    # urllib.parse (with ipaddress: 4 ms): where an endpoint's URL is taken apart.
    "urllib.parse",
    # sqlite3 (2 ms); getpass and socket (5 ms, for a lock's holder): not where no state
    # exists yet.
    "sqlite3", "getpass", "socket",
    # csv (1 ms): for `audit export --format csv`; json (2 ms): where JSON is written
    # or read, or a document near the size limit is measured (validate needs none).
    "csv", "json",
    # The engines of policy and hook code (policycode/: Rego, V8), imported only in the
    # bounded worker; tempfile: where rego-cpp saves a compiled module to read it back.
    "regopy", "py_mini_racer", "tempfile",
})


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def layers() -> list[set[str]]:
    """The page's list: each line's modules.  A package (``api/``) stands for those of
    its modules that no other line names (``api/client.py``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"```text\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```text block listing the modules"
    lines = [re.split(r"\s{2,}", line.strip())[0].split(", ")
             for line in block.group(1).splitlines() if line and line[0] != " "]

    def module(item: str) -> str:
        item = item.strip().removesuffix(".py").removesuffix("/__init__")
        return "govsync." + item.replace("/", ".")

    named = {module(i) for items in lines for i in items if not i.strip().endswith("/")}
    out: list[set[str]] = []
    for items in lines:
        layer: set[str] = set()
        for item in items:
            if item.strip().endswith("/"):
                package = module(item.strip().rstrip("/"))
                layer |= {m for m in MODULES
                          if (m == package or m.startswith(package + ".")) and m not in named}
            else:
                layer.add(module(item))
        out.append(layer)
    return out


LAYERS = layers()
LAYER_OF = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def resolve(name: str) -> str | None:
    """The module of govsync an imported name is (or is in)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in MODULES:
            return candidate
    return None


def is_heavy(name: str, top: str) -> bool:
    """Whether an imported package (``top``, or the full ``name``) is HEAVY."""
    return top in HEAVY or any(name == h or name.startswith(h + ".") for h in HEAVY)


# Tables of modules a module imports by name (importlib) when it needs them:
# project.py's SECTIONS (a project file's section -> the module that parses it), and
# the package's one face, govsync/__init__.py's LAZY (a name -> the module that holds it,
# PEP 562: the library's names, loaded when a program first asks for one).
TABLES = ("SECTIONS", "LAZY")
# Issue 22's rule (issue 42 brought the count under it): imports of govsync's own
# modules inside functions, each statement once per module it loads.  They hide the
# graph and save nothing for a light module: they belong to the command line's edge
# (cli/) and to the modules that bring a heavy package.
FUNCTION_LEVEL_BUDGET = 40


def sections(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(module, line) of each module a module's TABLES name: edges like its imports."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in TABLES):
            table = ast.literal_eval(node.value)
            for target in table.values():
                assert target in MODULES, f"{node.targets[0].id} names {target}, not a module"
                yield target, node.lineno


@functools.cache
def imports(module: str) -> tuple[tuple[str, int, str, bool, bool], ...]:
    """(imported, line, top name, inside a function, under TYPE_CHECKING) of a module
    (parsed once a process: several tests walk every module).  The modules a
    ``SECTIONS`` table names count as imports at the top: they are edges of the graph
    like any other, only loaded later."""
    tree = ast.parse(MODULES[module].read_text())
    tabled = tuple((target, line, "govsync", False, False) for target, line in sections(tree))

    def visit(node: ast.AST, inner: bool, checking: bool) -> Iterator[
            tuple[str, int, str, bool, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                yield from visit(child, inner, True)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, alias.name.split(".")[0], inner, checking
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                for alias in child.names:
                    full = f"{child.module}.{alias.name}"
                    # `from govsync.x import y`: the module y when it is one, else x
                    # (`from importlib import metadata`: importlib.metadata).
                    name = (full if full in MODULES or not child.module.startswith("govsync")
                            else child.module)
                    yield name, child.lineno, child.module.split(".")[0], inner, checking
            yield from visit(child, inner or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef), checking)

    return tabled + tuple(visit(tree, False, False))


def imports_outside_type_checking(module: str) -> Iterator[tuple[str, int]]:
    for name, line, _, _, checking in imports(module):
        target = resolve(name)
        if target is not None and not checking:
            yield target, line


@functools.cache
def heavy_modules() -> frozenset[str]:
    """govsync's modules that import a heavy package at their top, directly or not
    (worked out when a test first asks, not as each worker collects the module)."""
    import networkx as nx  # a quarter of a second: loaded by the two tests that use it

    graph = nx.DiGraph()
    heavy: set[str] = set()
    for module in MODULES:
        graph.add_node(module)
        for name, _, top, inner, checking in imports(module):
            if inner or checking:
                continue
            if is_heavy(name, top):
                heavy.add(module)
            target = resolve(name)
            if target and target != module:
                graph.add_edge(module, target)
    return frozenset(m for m in MODULES if heavy & ({m} | nx.descendants(graph, m)))


def test_every_module_is_on_the_page() -> None:
    missing = sorted(set(MODULES) - set(LAYER_OF) - {"govsync", "govsync.__main__"})
    assert not missing, f"not in docs/architecture.md: {missing}"
    unknown = sorted(set(LAYER_OF) - set(MODULES))
    assert not unknown, f"docs/architecture.md names modules that do not exist: {unknown}"


def package_of(module: str) -> str:
    """The top-level package a module is in (itself for a top-level module)."""
    return ".".join(module.split(".")[:2])


def points_up(module: str, target: str) -> bool:
    """Whether an import of ``target`` by ``module`` breaks the page's order."""
    here, there = LAYER_OF[module], LAYER_OF.get(target)
    assert there is not None, f"{module} imports {target}, which the page does not list"
    same_line = here == there
    return there < here or (same_line and package_of(module) != package_of(target)
                            and len({package_of(m) for m in LAYERS[here]}) == 1)


def edges(module: str) -> Iterator[tuple[str, int]]:
    """(imported module of govsync, line) for each import of ``module``."""
    for name, line, _, _, _ in imports(module):
        target = resolve(name)
        if target is None or target == module or target in ("govsync", "govsync.__main__"):
            continue
        yield target, line


@pytest.mark.parametrize("module", sorted(LAYER_OF))
def test_imports_point_down_the_page(module: str) -> None:
    wrong = [f"{MODULES[module].name}:{line} imports {target} (listed above it)"
             for target, line in edges(module) if points_up(module, target)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_sit_at_the_top_unless_heavy(module: str) -> None:
    wrong = []
    for name, line, top, inner, _ in imports(module):
        if not inner:
            continue
        target = resolve(name) if top == "govsync" else None
        if top == "govsync" and target in heavy_modules():
            continue
        if top != "govsync" and is_heavy(name, top):
            continue
        wrong.append(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: import {name} "
                     "inside a function: move it to the top of the module")
    assert not wrong, "\n".join(wrong)


def function_level_imports() -> list[str]:
    """Each import of a module of govsync inside a function: ``module:line target``."""
    found = set()
    for module in MODULES:
        for name, line, top, inner, _ in imports(module):
            target = resolve(name)
            if inner and top == "govsync" and target is not None:
                found.add(f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} {target}")
    return sorted(found)


def test_few_imports_of_govsyncs_own_modules_sit_inside_functions() -> None:
    found = function_level_imports()
    assert len(found) <= FUNCTION_LEVEL_BUDGET, (
        f"{len(found)} imports of govsync's modules inside functions, over the budget of "
        f"{FUNCTION_LEVEL_BUDGET}: import at the top (a command's own module of cli/ for "
        "what only it needs):\n" + "\n".join(found))
    # The count sees real ones: the embedded server, loaded only for `local`.
    assert any(f.startswith("govsync/runtime.py:") and f.endswith(" govsync.server")
               for f in found), found


def test_no_import_cycle() -> None:
    import networkx as nx  # a quarter of a second: loaded by the two tests that use it

    graph = nx.DiGraph()
    for module in MODULES:
        for name, _, _, _, checking in imports(module):
            target = resolve(name)
            if target and target != module and not checking:
                # A package's face importing its own modules, and each of them
                # importing the others, is not a cycle: Python loads the face first.
                if module.startswith(target + ".") and MODULES[target].name == "__init__.py":
                    continue
                graph.add_edge(module, target)
                # Importing a package's module runs the package's face first.
                face = target.rsplit(".", 1)[0]
                if (face in MODULES and MODULES[face].name == "__init__.py"
                        and not module.startswith(face + ".") and face != "govsync"):
                    graph.add_edge(module, face)
    cycles = [c for c in nx.simple_cycles(graph) if len(c) > 1]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:10])


def test_the_page_is_checked_against_real_edges() -> None:
    """A test that cannot fail is a defect: the rule catches a made-up upward edge."""
    top, bottom = LAYERS[0], LAYERS[-1]
    assert min(LAYER_OF[m] for m in top) < min(LAYER_OF[m] for m in bottom)
    assert "govsync.cli" in top and "govsync.api.status" in bottom
    # The graph the cases check is the real one: known imports are edges in it...
    assert {"govsync.errors", "govsync.manifests.manifest"} <= {t for t, _ in edges("govsync.cli.root")}
    # project.py's SECTIONS (imported by name, when a file has the section) are edges too.
    assert {"govsync.rules", "govsync.approvals", "govsync.agentconfig"} <= {
        t for t, _ in edges("govsync.project")}
    # A command's module of cli/ imports what only it needs at its top.
    assert {"govsync.commands.applying", "govsync.apply"} <= {
        t for t, _ in imports_outside_type_checking("govsync.cli.apply")}
    every = {(m, t) for m in LAYER_OF for t, _ in edges(m)}
    assert len(every) > 100, f"only {len(every)} imports between govsync's modules found"
    assert all(not points_up(m, t) for m, t in every)
    # ... and the rule flags an edge pointing up the page, but not the same edge down.
    assert points_up("govsync.api.status", "govsync.cli.root")
    assert not points_up("govsync.cli.root", "govsync.api.status")


def test_the_exception_diagram_names_every_exception() -> None:
    """errors.py opens with the diagram of the tree: every class is on it."""
    import govsync.errors as errors

    diagram = errors.__doc__ or ""
    classes = [name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, errors.GovsyncError)
               and not name.startswith("_")]
    missing = [name for name in classes if not re.search(rf"\b{name}\b", diagram)]
    assert not missing, f"errors.py's diagram lacks {missing}"


def test_the_agent_does_not_import_the_dashboard() -> None:
    """Issue 31: statuses sit below both; the dashboard is mounted by agentweb.py, above."""
    agent = [m for m in MODULES if m == "govsync.agent" or m.startswith("govsync.agent.")]
    assert len(agent) > 10
    found = [(m, target) for m in agent for target, *_ in imports(m)
             if target == "govsync.ui" or target.startswith("govsync.ui.")]
    assert not found, found
    # The check sees real edges: agentweb.py does import the dashboard.
    assert any(t.startswith("govsync.ui") for t, *_ in imports("govsync.agentweb"))
