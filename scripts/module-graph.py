#!/usr/bin/env python3
"""Prints the dependency graph between the crate's top-level modules (src/<module>.rs or
src/<module>/; under src/kubernetes/, each module is its own node, `kubernetes::<module>`),
read from `crate::<module>` paths in code (comments are skipped), and any cycle in it. Exits 1 when there is a cycle. tests/architecture.rs checks the same rules.

Usage: scripts/module-graph.py [--dot]
"""
import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)(?:::([a-z_][a-z0-9_]*))?")


def module_of(file: pathlib.Path) -> str:
    parts = file.relative_to(SRC).parts
    if len(parts) == 1:
        return parts[0][:-3]
    if parts[0] == "kubernetes":
        return "lib" if parts[1] == "mod.rs" else "kubernetes::" + parts[1].removesuffix(".rs")
    return parts[0]


def unit_named(first: str, second: str) -> str:
    return f"kubernetes::{second}" if first == "kubernetes" and second else first


def code_lines(text: str):
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("//"):
            continue
        yield line.split("//")[0] if "\"" not in line else line


def graph():
    edges = {}
    for file in sorted(SRC.rglob("*.rs")):
        module = module_of(file)
        if module in ("lib", "main"):
            continue
        targets = edges.setdefault(module, set())
        for line in code_lines(file.read_text()):
            for first, second in PATH.findall(line):
                target = unit_named(first, second)
                if target != module:
                    targets.add(target)
    return edges


def cycles(edges):
    found, stack, state = [], [], {}

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                found.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def main():
    edges = graph()
    if "--dot" in sys.argv:
        print("digraph portcullis {")
        for module, targets in sorted(edges.items()):
            for target in sorted(targets):
                print(f"  {module} -> {target};")
        print("}")
    else:
        for module, targets in sorted(edges.items()):
            print(f"{module} -> {', '.join(sorted(targets)) or '(nothing)'}")
    found = cycles(edges)
    for cycle in found:
        print("cycle: " + " -> ".join(cycle))
    if not found:
        print("no cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
