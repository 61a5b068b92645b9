#!/usr/bin/env python3
"""Holds the domain crate to ARCHITECTURE.md's layering, reading `use crate::…` and `super::…`
paths of shared/src (tests, `#[cfg(test)]` modules included, are left out: they may reach across).

Fails, naming the file and the import, when:
- a top-level module of the crate has no layer in the table below (ARCHITECTURE.md's): a new
  module is placed on purpose, never passed over;
- a file imports a layer above its own;
- anything outside the top layer imports `crate::app`;
- files reach each other in a cycle that spans more than one folder or more than 4 files;
- a store key string (`"ORG#…"`, `GSI1SK`, …) appears outside `store/`, in the crate or the tests.

Run: python3 tests/layering.py (tests/run does).
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "shared", "src")

# Layer of each top-level module of the domain crate, from the top down. A file may import its
# own layer and those below it.
LAYERS = {
    "app": 7, "lambda": 7, "jobs": 7, "bootstrap": 7,
    # The console calls every family's domain functions, so it sits above them and below app.
    "web": 6,
    "registry": 5, "agents": 5, "broker": 5, "state_versions": 5, "runs": 5,
    "accounts": 4,
    "auth": 3, "api": 3,
    "state": 2,
    "config": 1, "seal": 1, "blobs": 1, "store": 1, "aws": 1, "vcs": 1, "archive": 1, "ids": 1,
    "names": 1, "lazy": 1, "owner_only": 1, "errors": 1, "identity": 1, "https": 1, "links": 1, "openpgp": 1,
}
# Files placed apart from their folder's layer, with the reason.
FILE_LAYERS = {
    # The agent pool record and attach/detach: over the store alone, so that a workspace (accounts)
    # can join a pool in its own transaction without the agents family's rules.
    "agents/pool.rs": 2,
}
TOP = {"app", "lambda", "jobs", "bootstrap", "lib"}
MAX_CYCLE_FILES = 4

KEY_STRING = re.compile(r'"[A-Z][A-Z0-9_]*#|\bGSI[12](PK|SK)\b')


def module_files():
    """Maps each module path (tuple of names) to its file, relative to SRC."""
    modules = {}
    for folder, _, files in os.walk(SRC):
        for name in files:
            if not name.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(folder, name), SRC)
            parts = rel[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib"):
                parts = parts[:-1]
            modules[tuple(parts)] = rel
    return modules


def without_tests(text):
    """The file's text without `#[cfg(test)]` modules (they end at the file's end here)."""
    cut = re.search(r"^\s*#\[cfg\((all\()?test", text, re.M)
    return text[: cut.start()] if cut else text


def use_paths(text, children):
    """Every `crate::a::b` / `super::a` path the code names, with `use` groups expanded, and
    calls into the file's own child modules (`tokens::removal(…)` in a mod.rs; a `pub use` that
    only re-exports a child is a façade, not a dependency)."""
    paths = []
    for match in re.finditer(r"\buse\s+((?:crate|super|self)::[^;]+);", text):
        paths.extend(expand(match.group(1).replace("\n", " ")))
    for match in re.finditer(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", text):
        paths.append(match.group(1))
    code = re.sub(r"^\s*(pub(\([\w:]+\))?\s+)?use\s[^;]+;", "", text, flags=re.M)
    for match in re.finditer(r"(?<![\w:])(\w+)::", code):
        if match.group(1) in children:
            paths.append("self::" + match.group(1))
    return paths


def expand(tree):
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [tree.split(" as ")[0]]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    items, depth, current = [], 0, ""
    for char in inner:
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += char == "{"
        depth -= char == "}"
        current += char
    items.append(current)
    out = []
    for item in filter(None, items):
        out.extend(expand(prefix + item) if item != "self" else [prefix.rstrip(":")])
    return out


def resolve(path, here, modules):
    """The file a path names: the longest module prefix of it that exists."""
    parts = path.split("::")
    if parts[0] == "crate":
        base = []
    else:
        base = list(here)
        for part in parts:
            if part == "super":
                base = base[:-1]
            elif part == "self":
                pass
            else:
                break
    names = [p for p in parts if p not in ("crate", "super", "self")]
    for end in range(len(names), -1, -1):
        candidate = tuple(base + names[:end])
        if candidate in modules and candidate != ():
            return modules[candidate]
    return None


def layer(rel):
    if rel in FILE_LAYERS:
        return FILE_LAYERS[rel]
    return LAYERS.get(rel.split(os.sep)[0].removesuffix(".rs"))


def cycles(graph):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    sys.setrecursionlimit(10000)
    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def main():
    modules = module_files()
    here_of = {rel: key for key, rel in modules.items()}
    graph, problems = {}, []
    for rel in sorted(here_of):
        if rel != "lib.rs" and layer(rel) is None:
            problems.append(f"{rel}: its module has no layer in tests/layering.py's table (ARCHITECTURE.md's)")
        text = without_tests(open(os.path.join(SRC, rel), encoding="utf-8").read())
        own_module = here_of[rel]
        # `super` in foo/bar.rs is foo; in foo/mod.rs it is foo's parent: one step up either way.
        children = {key[-1] for key in modules if key[:-1] == own_module and len(key) == len(own_module) + 1}
        for path in use_paths(text, children):
            target = resolve(path, own_module, modules)
            if target is None or target == rel:
                continue
            graph.setdefault(rel, set()).add(target)
            if target.split(os.sep)[0].removesuffix(".rs") == "app" and rel.split(os.sep)[0].removesuffix(".rs") not in TOP:
                problems.append(f"{rel} imports {path}: only app/, lambda.rs and jobs.rs may import crate::app")
            mine, theirs = layer(rel), layer(target)
            if mine is not None and theirs is not None and theirs > mine:
                problems.append(f"{rel} (layer {mine}) imports {path} from {target} (layer {theirs}): import only downward")
    for component in cycles(graph):
        folders = {os.path.dirname(rel) for rel in component}
        if len(folders) > 1 or len(component) > MAX_CYCLE_FILES:
            problems.append(f"import cycle of {len(component)} files across {sorted(folders)}: {', '.join(component)}")
        else:
            print(f"layering: note: a cycle inside one folder (ARCHITECTURE.md says why): {', '.join(component)}")
    for folder in (SRC, os.path.join(ROOT, "tests"), os.path.join(ROOT, "bench")):
        for base, _, files in os.walk(folder):
            for name in files:
                path = os.path.join(base, name)
                rel = os.path.relpath(path, ROOT)
                # The store's own code and its contract tests are where key strings belong.
                if not name.endswith(".rs") or rel.startswith(os.path.join("shared", "src", "store")):
                    continue
                if "store_contract" in name:
                    continue
                for number, line in enumerate(open(path, encoding="utf-8"), 1):
                    if KEY_STRING.search(line) and not line.lstrip().startswith("//"):
                        problems.append(f"{rel}:{number}: a store key string outside store/: {line.strip()}")
    for problem in problems:
        print(f"layering: {problem}")
    edges = sum(len(targets) for targets in graph.values())
    print(f"layering: {len(here_of)} files, {edges} imports, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
