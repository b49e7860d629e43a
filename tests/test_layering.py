"""Who may import whom among isrlab's packages (harness/__init__.py, "Layering").

Every import statement counts, also those inside functions and under
TYPE_CHECKING: a layer must not even name a layer above it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("broker", "generator", "contract", "workloads", "nemesis", "checker", "reports",
            "harness")

# package -> the packages of ours it must not import
FORBIDDEN: dict[str, set[str]] = {
    "broker": set(PACKAGES) - {"broker"},
    "generator": set(PACKAGES) - {"generator"},
    "contract": set(PACKAGES) - {"contract", "broker"},
    "workloads": {"nemesis", "harness", "checker", "reports"},
    # Jepsen's generator is its own namespace below the workload and the nemesis:
    # they share the combinators, and the nemesis knows nothing of the workload.
    "nemesis": {"workloads", "harness", "checker", "reports"},
    "checker": {"harness", "reports"},
    "reports": {"harness"},
    "harness": set(),  # but see test_only_the_cli_wires_in_checker_and_reports
}
# The harness modules that hand runs to the checker and render reports: the CLI's
# (harness/cli/: batchcheck.py, the batch check and reports; one module per command).
WIRING = ["harness/cli/__init__.py", "harness/cli/batchcheck.py", "harness/cli/cellrun.py",
          "harness/cli/chaos.py", "harness/cli/check.py", "harness/cli/checker.py",
          "harness/cli/flags.py", "harness/cli/nightly.py", "harness/cli/reproduce.py",
          "harness/cli/shrink.py", "harness/cli/swarm.py", "harness/cli/trace.py"]
# The CLI module that assembles the parser from the command modules, and the ones
# every command module may import besides non-CLI modules, lowest first (each may
# import those before it).
CLI_ASSEMBLY = "harness/cli/__init__.py"
CLI_SHARED = ("harness.cli.flags", "harness.cli.batchcheck", "harness.cli.cellrun")

# (module file, imported package) pairs that break the rules above today, each
# to be fixed in its own folder. Empty: none does.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def _imported_packages(path: Path) -> set[str]:
    """The top-level packages of ours that the module at `path` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    own = path.relative_to(ROOT).parts[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: stays inside its own package
                found.add(own)
            elif node.module:
                found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_no_layer_above(package: str) -> None:
    assert _modules(package), f"no modules found under {package}/"
    bad = sorted(
        (_rel(path), dep)
        for path in _modules(package)
        for dep in _imported_packages(path) & FORBIDDEN[package]
        if (_rel(path), dep) not in KNOWN_EXCEPTIONS
    )
    assert bad == [], f"{package} imports a layer it must not: {bad}"


def test_only_the_cli_wires_in_checker_and_reports() -> None:
    wiring = sorted(
        _rel(path)
        for path in _modules("harness")
        if _imported_packages(path) & {"checker", "reports"}
    )
    assert wiring == WIRING


def test_cli_command_modules_import_no_other_cli_module() -> None:
    """A command's module imports the shared modules and non-CLI modules only: never another
    command's module, nor the assembly (harness/cli/__init__.py), which alone
    imports them all; __main__.py imports only the assembly."""
    cli_modules = {"harness.cli"} | {
        _rel(p)[:-3].replace("/", ".") for p in (ROOT / "harness" / "cli").glob("*.py")}
    assert set(CLI_SHARED) <= cli_modules
    bad = {}
    for path in sorted((ROOT / "harness" / "cli").glob("*.py")):
        if _rel(path) == CLI_ASSEMBLY:
            continue
        module = _rel(path)[:-3].replace("/", ".")
        allowed = {"harness.cli"} if path.name == "__main__.py" else set(CLI_SHARED)
        if module in CLI_SHARED:
            allowed = set(CLI_SHARED[:CLI_SHARED.index(module)])
        wrong = (_imported_modules(path) & cli_modules) - allowed
        if wrong:
            bad[_rel(path)] = sorted(wrong)
    assert bad == {}, f"CLI modules that import another CLI module: {bad}"


def test_nemesis_and_workloads_load_without_the_harness() -> None:
    """Importing them for real (a fresh interpreter) pulls in no harness, checker
    or reports module, not even through a dependency."""
    modules = [_rel(p)[:-3].replace("/", ".").removesuffix(".__init__")
               for pkg in ("generator", "nemesis", "workloads") for p in _modules(pkg)]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('harness', 'checker', 'reports')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- inside the harness ---------------------------------------------------------

# The harness's folders, lowest first (docs/README.md, "The layout"): a module may
# import harness modules of its own folder and of the folders before it, never of
# one after it -- so no cycle can form between folders.
HARNESS_LAYERS = (
    "harness",  # errors, progress, YAML locations and validation: shared by all
    "harness.sim",  # the simulator's runtime and fetch-round trace
    "harness.backends",  # nodes, network faults, artefacts: local, docker, ssh, sim
    "harness.scenario",  # the scenario format, its loader and the catalogue
    "harness.run",  # one run: runner, steps, observation, collection
    "harness.chaos",  # random faults: chaos runs, nightly, swarm, shrink, export
    "harness.cli",  # the commands: the only wiring to the checker and reports
)

# The `isrlab` script's entry point: above every folder, it imports the CLI inside
# its try so that an interrupt during the imports is the documented line.
ENTRY = "harness/entry.py"

# Function-local imports of harness modules, each kept local because the module
# loads a heavy or optional dependency (the value) that only its command needs;
# none dodges an import cycle. Nothing else may have one.
LOCAL_IMPORT_EXCEPTIONS: dict[tuple[str, str], str] = {
    (ENTRY, "harness.cli"): "everything: Ctrl-C while it imports is handled",
    ("harness/cli/docker.py", "harness.backends.docker_image"): "the docker SDK",
    ("harness/cli/ssh.py", "harness.backends.ssh_hosts"): "the docker SDK",
    ("harness/cli/ssh.py", "harness.backends.ssh"): "paramiko",
    ("harness/cli/ssh.py", "harness.backends.ssh_clean"): "paramiko",
}


def _imported_modules(path: Path, *, local_only: bool = False) -> set[str]:
    """The harness modules the module at `path` imports (`from harness.x import y`
    counts as harness.x); with `local_only`, only imports inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    scopes: list[ast.AST] = [tree]
    if local_only:
        scopes = [n for n in ast.walk(tree)
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    found: set[str] = set()
    for scope in scopes:
        for node in ast.walk(scope):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from harness.run import admin` imports the module harness.backends.admin
                found.update(f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}")
                             else node.module for a in node.names)
    return {m for m in found if m == "harness" or m.startswith("harness.")}


def _is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _layer(module: str) -> int:
    """The index in HARNESS_LAYERS of the folder that holds `module`."""
    folder = module if _is_package(module) else module.rpartition(".")[0]
    return HARNESS_LAYERS.index(folder)


def _is_package(name: str) -> bool:
    return (ROOT / name.replace(".", "/") / "__init__.py").is_file()


def test_every_harness_folder_has_a_layer() -> None:
    folders = {_rel(p.parent).replace("/", ".") for p in _modules("harness")}
    assert folders == set(HARNESS_LAYERS)


def test_harness_folders_import_only_their_own_and_lower_layers() -> None:
    bad = sorted(
        (_rel(path), mod)
        for path in _modules("harness")
        for mod in _imported_modules(path)
        if mod != "harness" and _rel(path) != ENTRY
        and _layer(mod) > _layer(_rel(path)[:-3].replace("/", ".").removesuffix(".__init__"))
    )
    assert bad == [], f"harness modules that import a folder above their own: {bad}"


def test_no_function_local_import_of_a_harness_module() -> None:
    """A function-local import of a harness module hides a cycle or a layering
    breach; heavy or optional dependencies (docker SDK, pyspark) that are not
    harness modules may be imported locally."""
    found = {(_rel(path), mod)
             for path in _modules("harness")
             for mod in _imported_modules(path, local_only=True)}
    assert found - LOCAL_IMPORT_EXCEPTIONS.keys() == set()
    assert LOCAL_IMPORT_EXCEPTIONS.keys() - found == set(), "an exception that is fixed: drop it"


def test_no_backend_switch_outside_the_backends() -> None:
    """Backend differences live behind the backend's own methods and declared words
    (`watch`, `deterministic`): no module outside harness/backends/ asks
    `isinstance(x, SomeBackend)`."""
    bad = []
    for path in _modules("harness"):
        if path.is_relative_to(ROOT / "harness" / "backends"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" \
                    and len(node.args) == 2 and ast.unparse(node.args[1]).endswith("Backend"):
                bad.append(f"{_rel(path)}:{node.lineno}")
    assert bad == []


def test_every_backend_is_watched_somehow() -> None:
    """Each backend's `watch` word names a way the runner knows to watch it."""
    from harness.backends import BACKENDS, HIDDEN, backend_class
    from harness.run.runner import WATCHES

    words = {backend_class(name).watch for name in [*BACKENDS, *HIDDEN]}
    assert words == set(WATCHES)


def _module_name(path: Path) -> str:
    return _rel(path)[:-3].replace("/", ".").removesuffix(".__init__")


def _all_imports(path: Path) -> set[str]:
    """Every module of ours the module at `path` imports, relative imports resolved,
    also inside functions and under TYPE_CHECKING (`from a import b` counts as a.b
    where that is a module, else as a)."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            found.update(f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base
                         for a in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES and _is_module(m)} - {me}


def test_no_import_cycles() -> None:
    """No module of ours reaches itself through imports, hidden ones included (a
    function-local import or one under TYPE_CHECKING only hides a cycle). A package's
    __init__ importing its own submodules is not a cycle of concepts: left out."""
    graph = {_module_name(p): _all_imports(p) for pkg in PACKAGES for p in _modules(pkg)}
    for mod, deps in graph.items():
        graph[mod] = {d for d in deps if not mod.startswith(d + ".")}
    cycles, state = [], {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert cycles == []
