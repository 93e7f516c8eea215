"""The layout's rules, read from the code itself: arrows point one way (PUMA may import
PersonalWAB, never the reverse), no import cycles, no test tooling in the installed
package, and a README whose links resolve and whose Layout names what the repository holds."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("PersonalWAB", "PUMA")
# names of modules that serve tests or parity runs; they belong in devtools/, not in a package
TEST_TOOLING = re.compile(r"testing|parity|scripted|responder|fixture|conftest")


def package_modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `packages` (default: the installed ones)."""
    modules = {}
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The package module `name` lands in (its longest known prefix), None outside the packages."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports anywhere (top level or inside functions)."""
    modules = package_modules(packages)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [_target(alias.name, modules) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                # `from package import module` imports that module; `from module import name` the module
                targets = [_target(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base, modules)
                           for alias in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_personalwab_never_imports_puma():
    graph = import_graph()
    wrong = sorted(f"{source} -> {target}" for source, targets in graph.items() if source.startswith("PersonalWAB")
                   for target in targets if target.startswith("PUMA"))
    assert wrong == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_no_step_module_imports_another():
    """Work two PUMA steps share lives in a library module both import (PUMA/steps.py names the steps)."""
    from PUMA.steps import STEPS

    step_modules = {step.module for step in STEPS}
    graph = import_graph()
    wrong = sorted(f"{module} -> {target}" for module in step_modules for target in graph[module]
                   if target in step_modules)
    assert wrong == []


RECIPE_NAMES = ("release", "improved")


def recipe_branches(source: str) -> list[int]:
    """Lines of `source` that ask which recipe runs (a recipe or its `.name` compared with a recipe's
    name) or pass a "release" boolean (a parameter or keyword named `release`/`release_*` that is a
    bool): a recipe is settings, and code reads the setting it needs."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = [s for s in sides if isinstance(s, ast.Constant) and s.value in RECIPE_NAMES]
            asked = [s for s in sides if (isinstance(s, ast.Name) and "recipe" in s.id)
                     or (isinstance(s, ast.Attribute) and ("recipe" in s.attr or s.attr == "name"
                                                          and "recipe" in ast.unparse(s.value)))]
            if names and asked:
                found.append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = [*node.args.args, *node.args.kwonlyargs]
            found += [a.lineno for a in arguments if a.arg.split("_")[0] == "release"
                      and a.annotation is not None and ast.unparse(a.annotation) == "bool"]
        elif isinstance(node, ast.Call):
            found += [k.value.lineno for k in node.keywords if k.arg == "release"]
    return sorted(found)


def test_no_puma_code_asks_which_recipe_runs_or_passes_a_release_flag():
    """A recipe is a file of step settings (PUMA/recipe.py): no PUMA code reads a recipe's name to
    decide what to do, and no function takes a `release: bool`."""
    wrong = [f"{path.relative_to(REPO)}:{line}" for path in sorted((REPO / "PUMA").rglob("*.py"))
             for line in recipe_branches(path.read_text(encoding="utf-8"))]
    assert wrong == []


def test_the_recipe_branch_finder_finds_each_kind():
    source = ("if recipe == 'improved': pass\n"
              "if config.recipe != 'release': pass\n"
              "if get_recipe(x).name == 'release': pass\n"
              "def f(release: bool = False): pass\n"
              "g(x, release=True)\n"
              "if config.prompts == 'release': pass\n"  # a setting's value: fine
              "def h(release_after: str | None = None): pass\n")
    assert recipe_branches(source) == [1, 2, 3, 4, 5]


def test_no_import_cycles_in_the_test_and_parity_tooling():
    assert cycles(import_graph(("devtools",))) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_test_tooling_inside_the_packages():
    modules = package_modules()
    tooling = [name for name in modules if TEST_TOOLING.search(name)]
    uses_pytest = [name for name, path in modules.items()
                   if re.search(r"^\s*(import|from) pytest\b", path.read_text(encoding="utf-8"), re.M)]
    assert tooling == [] and uses_pytest == []
    assert (REPO / "devtools" / "doubles" / "scripted_server.py").is_file()


README = REPO / "README.md"


def test_readme_is_a_front_page_whose_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links its docs"
    assert [link for link in local if not (REPO / link).exists()] == []


def _layout_paths() -> list[str]:
    """The paths the README's Layout block names, each joined to the folder it is indented under."""
    block = README.read_text(encoding="utf-8").split("## Layout", 1)[1].split("```")[1]
    paths, parents = [], []  # parents: (indent, folder) of the enclosing folders
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        name = line.split()[0]
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = "/".join([p for _, p in parents] + [name.rstrip("/")])
        paths.append(path)
        if name.endswith("/"):
            parents.append((indent, path))
    return paths


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout")
def test_readme_layout_matches_the_tracked_files():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    entries = {str(Path(*Path(f).parts[:depth])) for f in tracked for depth in range(1, len(Path(f).parts) + 1)}
    listed = _layout_paths()
    assert [path for path in listed if path not in entries] == []
    # every top-level folder, and every module and subpackage of the benchmark package, is listed
    wanted = {Path(f).parts[0] for f in tracked if len(Path(f).parts) > 1 and not f.startswith(".")}
    wanted |= {str(Path(*Path(f).parts[:2])) for f in tracked if f.startswith("PersonalWAB/")
               and Path(f).parts[1] != "__init__.py" and (f.endswith(".py") or len(Path(f).parts) > 2)}
    assert sorted(wanted - set(listed)) == []


def _pins(name: str) -> dict[str, str]:
    """Package name (normalised) -> pinned version of a requirements file."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (REPO / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"{name}: {line} is not pinned"
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def test_pyproject_declares_what_the_requirements_files_pin():
    """Each requirements file is the pinned install of one part of pyproject.toml's dependencies:
    requirements.txt of the core and the dev extra (it carries pytest for the quick start),
    requirements-gpu.txt of the gpu extra, requirements-dev.txt of the dev extra,
    requirements-model.txt of the model extra, requirements-serve.txt of the serve extra; every pin
    lies in the range pyproject declares, and every declared name is pinned somewhere."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {"core": project["dependencies"], **project["optional-dependencies"]}
    ranges = {group: {canonicalize_name(r.name): r.specifier for r in map(Requirement, specs)}
              for group, specs in declared.items()}
    files = {"requirements.txt": ("core", "dev"), "requirements-gpu.txt": ("gpu",), "requirements-dev.txt": ("dev",),
             "requirements-model.txt": ("model",), "requirements-serve.txt": ("serve",)}
    pinned: set[str] = set()
    for name, groups in files.items():
        for package, version in _pins(name).items():
            group = next((g for g in groups if package in ranges[g]), None)
            assert group is not None, f"{name} pins {package}, which pyproject.toml's {groups} do not declare"
            assert ranges[group][package].contains(version), \
                f"{name}: {package}=={version} is outside pyproject.toml's {ranges[group][package]}"
            pinned.add(package)
    assert set(ranges["core"]) <= set(_pins("requirements.txt")), "a core dependency requirements.txt does not pin"
    unpinned = {package for specs in ranges.values() for package in specs} - pinned
    assert not unpinned, f"declared in pyproject.toml but pinned in no requirements file: {sorted(unpinned)}"


def test_flags_are_made_only_by_the_settings_system():
    """One settings system: no command builds its own argparse parser (transformers' HfArgumentParser,
    which converts `--trainer_args` values as the trainer's own config does, parses no command line)."""
    makers = re.compile(r"\badd_argument\(|\bArgumentParser\(|add_subparsers\(")
    offenders = [path.relative_to(REPO).as_posix()
                 for folder in (*PACKAGES, "scripts", "devtools", "examples", "tests")
                 for path in sorted((REPO / folder).rglob("*.py"))
                 if path != REPO / "PersonalWAB/settings.py" and makers.search(path.read_text(encoding="utf-8"))]
    offenders += [name for name in ("run.py",) if makers.search((REPO / name).read_text(encoding="utf-8"))]
    assert offenders == []
