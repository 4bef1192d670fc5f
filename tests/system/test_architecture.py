"""docs/ARCHITECTURE.md's layer table against the tree: every folder the table names
exists, every library folder is in the table, and no file of a layer includes a header of
a layer above it ("includes point down only"; actorflow/actorflow.h, the umbrella header
for programs, is the one exception the page states).

    test_architecture.py SOURCE_DIR
"""
import os
import re
import sys

LAYERS = ["wire", "engine", "ops", "actors", "net", "programs"]  # bottom to top
# Where each library layer's headers and sources live.
ROOTS = {
    "wire": ["schemas"],
    "engine": ["engine"],
    "ops": ["ops"],
    "actors": ["actors"],
    "net": ["net"],
}
INCLUDE_DIRS = {
    "engine": ["engine/include", "engine/src"],
    "ops": ["ops/include", "ops"],
    "actors": ["actors/include", "actors/src"],
    "net": ["net/include", "net/src"],
}
UMBRELLA = "actorflow/actorflow.h"
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def layer_table(root):
    text = open(os.path.join(root, "docs", "ARCHITECTURE.md")).read()
    m = re.search(r"## Layers[^\n]*\n+```\n(.*?)```", text, re.S)
    if not m:
        fail("docs/ARCHITECTURE.md has no ## Layers block")
        return {}
    table, current = {}, None
    path = re.compile(r"^[a-z_]+(/[a-z_]+)*/?$")

    def folders(words):
        out = []
        for w in words:
            if not path.match(w) or not os.path.isdir(os.path.join(root, w.split("/")[0])):
                break
            out.append(w.rstrip("/"))
        return out

    for line in m.group(1).splitlines():
        f = line.split()
        if f and f[0] in LAYERS:
            current = f[0]
            table[current] = folders(f[1:])
        elif current and f and f[0] == "\u2502":
            table[current] += folders(f[1:])
    return table


def layer_of_path(rel):
    for layer, roots in ROOTS.items():
        for r in roots:
            if rel == r or rel.startswith(r + "/"):
                return layer
    return None


def resolve(root, src, inc):
    """The file an #include names, searched as the build does (relative, then the layers'
    include directories, then the generated schema headers); None for system headers."""
    cands = [os.path.join(os.path.dirname(src), inc)]
    for dirs in INCLUDE_DIRS.values():
        cands += [os.path.join(root, d, inc) for d in dirs]
    cands.append(os.path.join(root, "schemas", os.path.basename(inc).replace(".capnp.h", ".capnp")))
    for c in cands:
        if os.path.isfile(c):
            return os.path.relpath(os.path.realpath(c), root)
    return None


def main():
    root = os.path.realpath(sys.argv[1])
    table = layer_table(root)
    for layer in LAYERS:
        if layer not in table:
            fail(f"the layer table has no row for {layer}")
    for layer, folders in table.items():
        if not folders:
            fail(f"the {layer} row names no folder")
        for d in folders:
            if not os.path.isdir(os.path.join(root, d)):
                fail(f"the {layer} row names {d}/, which is not a folder of the tree")
    named = {d.split("/")[0] for folders in table.values() for d in folders}
    for d in ["schemas", "engine", "ops", "actors", "net", "samples", "tools", "bench"]:
        if d not in named:
            fail(f"{d}/ is in the tree but in no row of the layer table")

    rank = {l: i for i, l in enumerate(LAYERS)}
    checked = 0
    for layer, roots in ROOTS.items():
        for r in roots:
            for dirpath, _, files in os.walk(os.path.join(root, r)):
                for name in files:
                    if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                        continue
                    src = os.path.join(dirpath, name)
                    rel_src = os.path.relpath(src, root)
                    if rel_src == "engine/include/" + UMBRELLA:
                        continue  # the page's one stated exception
                    for n, line in enumerate(open(src, errors="replace"), 1):
                        m = re.match(r'\s*#\s*include\s*[<"]([^>"]+)[>"]', line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if inc == UMBRELLA:
                            fail(f"{rel_src}:{n} includes {UMBRELLA}, the umbrella header for programs")
                            continue
                        target = resolve(root, src, inc)
                        if target is None:
                            continue
                        checked += 1
                        tl = layer_of_path(target)
                        if tl and rank[tl] > rank[layer]:
                            fail(f"{rel_src}:{n} ({layer}) includes {inc} ({tl}): includes point down only")
    print(f"{checked} includes of library files checked against the layer table", flush=True)
    # The environment's switches are read in one place (actorflow/environment.h).
    reader = os.path.join("engine", "src", "core", "environment.cpp")
    for r in ["engine", "ops", "actors", "net", "tools", "samples"]:
        for dirpath, _, files in os.walk(os.path.join(root, r)):
            for name in files:
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if rel == reader:
                    continue
                for n, line in enumerate(open(os.path.join(dirpath, name), errors="replace"), 1):
                    if re.search(r'getenv\s*\(\s*"AF_', line):
                        fail(f"{rel}:{n} reads an AF_ variable itself: add it to actorflow/environment.h")
    if checked < 500:
        fail(f"only {checked} includes were resolved: the checker no longer finds the headers")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
