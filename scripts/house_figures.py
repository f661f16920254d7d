"""The figures of the package's structure that docs/architecture.md keeps targets for: exported
names, ``getattr`` calls, ``Any`` annotations, long functions and the tests' private imports.

    python scripts/house_figures.py            # the figures, one per line
    python scripts/house_figures.py --details  # and where each comes from

Counted from the source as text and syntax trees (nothing is imported or run).
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "voicelab"
LONG_FUNCTION_LINES = 80


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if ".venv" not in p.parts)


def exported_names() -> Counter[str]:
    """Names in each package's ``__all__`` (the public surface), by package."""
    counts: Counter[str] = Counter()
    for init in PACKAGE.rglob("__init__.py"):
        tree = ast.parse(init.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                if isinstance(node.value, ast.List | ast.Tuple):
                    counts[str(init.parent.relative_to(ROOT))] += len(node.value.elts)
    return counts


def getattr_calls(*, outside: str = "doubles") -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in _modules(PACKAGE):
        if outside in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "getattr":
                counts[str(path.relative_to(ROOT))] += 1
    return counts


def any_annotations() -> Counter[str]:
    """``Any`` written in annotations (parameters, returns, variables, type arguments)."""
    counts: Counter[str] = Counter()
    for path in _modules(PACKAGE):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            annotations: list[ast.expr | None] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                annotations += [a.annotation for a in (*arguments.posonlyargs, *arguments.args,
                                                       *arguments.kwonlyargs)]
                annotations += [arguments.vararg.annotation if arguments.vararg else None,
                                arguments.kwarg.annotation if arguments.kwarg else None,
                                node.returns]
            elif isinstance(node, ast.AnnAssign):
                annotations.append(node.annotation)
            for annotation in annotations:
                if annotation is None:
                    continue
                counts[str(path.relative_to(ROOT))] += sum(
                    1 for inner in ast.walk(annotation)
                    if (isinstance(inner, ast.Name) and inner.id == "Any")
                    or (isinstance(inner, ast.Constant) and isinstance(inner.value, str)
                        and "Any" in inner.value.replace("Anything", "")))
    return counts


def long_functions(limit: int = LONG_FUNCTION_LINES) -> list[tuple[str, int]]:
    found = []
    for path in _modules(PACKAGE):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.append((f"{path.relative_to(ROOT)}:{node.name}", length))
    return sorted(found, key=lambda item: -item[1])


def private_imports_in_tests() -> Counter[str]:
    """``from voicelab.x._y import ...`` (or ``import voicelab.x._y``) in the tests."""
    counts: Counter[str] = Counter()
    for path in _modules(ROOT / "tests"):
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [module] if module else [a.name for a in node.names] \
                if isinstance(node, ast.Import) else []
            for name in names:
                if name and name.startswith("voicelab") and any(
                        part.startswith("_") and not part.startswith("__")
                        for part in name.split(".")):
                    counts[name] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--details", action="store_true")
    details = parser.parse_args().details
    figures = {"exported names": exported_names(), "getattr calls outside doubles":
               getattr_calls(), "Any annotations": any_annotations(),
               "private imports in tests": private_imports_in_tests()}
    for title, counts in figures.items():
        print(f"{title}: {sum(counts.values())}")
        if details:
            for where, count in counts.most_common():
                print(f"  {count:5d}  {where}")
    long = long_functions()
    print(f"functions over {LONG_FUNCTION_LINES} lines: {len(long)}")
    if details:
        for where, length in long:
            print(f"  {length:5d}  {where}")


if __name__ == "__main__":
    main()
