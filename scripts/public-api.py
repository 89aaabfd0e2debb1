#!/usr/bin/env python3
"""The public API of every library product, one declaration a line, against docs/api/public-api.txt,
and a doc comment on each.

    scripts/public-api.py check   # exit 1, with a diff, when the surface differs from the file
    scripts/public-api.py update  # rewrite the file from the build
    scripts/public-api.py graphs DIR  # each module's symbol graph in DIR/MODULE/ (for docc)

Reads the symbol graphs swift-symbolgraph-extract makes from the debug build's modules
(`swift build` first), at public access only: what a service that depends on Decide can name.
The file is the surface under review. A change to it, a type made public or a signature
changed, shows in the diff of the commit that makes it (docs/architecture.md, "The public
surface").
"""
import difflib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ["DecideCore", "Decide", "DecideUV", "DecideSimulation", "DecideTesting"]
GOLDEN = os.path.join(ROOT, "docs", "api", "public-api.txt")
# The C modules the Swift modules import, found by their module maps.
C_MODULE_DIRS = ["Sources/CSQLite", "Sources/CDecideHints/include", "Sources/CDecideLock/include", "Sources/CDecideClock/include", "Sources/CDecideMemory/include", "Sources/CLibUV", "Sources/CJemalloc"]


def extractor():
    swift = shutil.which("swift")
    if swift is None:
        sys.exit("public-api: swift is not on the PATH")
    tool = os.path.join(os.path.dirname(os.path.realpath(swift)), "swift-symbolgraph-extract")
    if not os.path.exists(tool):
        sys.exit(f"public-api: {tool} not found beside swift")
    return tool


def declaration(symbol):
    text = "".join(fragment["spelling"] for fragment in symbol.get("declarationFragments", []))
    return " ".join(text.split())


def undocumented_in(graph, module):
    """Public declarations written in our sources without a doc comment (synthesized and
    inherited ones, which have no location of ours, are not counted)."""
    found = []
    for symbol in graph["symbols"]:
        uri = symbol.get("location", {}).get("uri", "")
        if "/Sources/" not in uri or symbol.get("docComment") or symbol.get("sourceOrigin"):
            continue
        line = symbol["location"]["position"]["line"] + 1
        found.append(f"Sources/{uri.split('/Sources/', 1)[1]}:{line}: {module} {'.'.join(symbol['pathComponents'])}")
    return found


def extract(module, out):
    """Writes `module`'s public symbol graph into the directory `out`; returns its path."""
    modules_dir = os.path.join(ROOT, ".build", "debug", "Modules")
    if not os.path.isdir(modules_dir):
        sys.exit("public-api: no debug build in .build (run `swift build` first)")
    command = [extractor(), "-module-name", module, "-I", modules_dir, "-target", f"{platform.machine()}-unknown-linux-gnu",
               "-minimum-access-level", "public", "-output-dir", out]
    for directory in C_MODULE_DIRS:
        command += ["-I", os.path.join(ROOT, directory)]
    result = subprocess.run(command, capture_output=True, text=True)
    path = os.path.join(out, f"{module}.symbols.json")
    if result.returncode != 0 or not os.path.exists(path):
        sys.exit(f"public-api: symbol graph of {module} failed:\n{result.stderr}")
    return path


def surface():
    lines = []
    undocumented = []
    with tempfile.TemporaryDirectory() as out:
        for module in MODULES:
            graph = json.load(open(extract(module, out)))
            undocumented += undocumented_in(graph, module)
            for symbol in graph["symbols"]:
                owner = ".".join(symbol["pathComponents"][:-1])
                lines.append(f"{module} {owner + ': ' if owner else ''}{declaration(symbol)}")
    return sorted(set(lines)), sorted(undocumented)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "check"
    if mode == "graphs":
        # `graphs DIR`: each module's symbol graph in DIR/MODULE/, for docc (`make docs`).
        for module in MODULES:
            out = os.path.join(sys.argv[2], module)
            os.makedirs(out, exist_ok=True)
            extract(module, out)
        return
    current, undocumented = surface()
    if mode == "update":
        os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
        with open(GOLDEN, "w") as file:
            file.write("\n".join(current) + "\n")
        print(f"public-api: wrote {len(current)} declarations to {os.path.relpath(GOLDEN, ROOT)}")
        return
    if mode != "check":
        sys.exit("usage: public-api.py check|update|graphs DIR")
    if undocumented:
        print("\n".join(undocumented))
        sys.exit(f"public-api: {len(undocumented)} public declarations above have no doc comment; every public "
                 "declaration says what it is and what it guarantees")
    recorded = open(GOLDEN).read().splitlines() if os.path.exists(GOLDEN) else []
    if recorded == current:
        print(f"public-api: {len(current)} public declarations, each documented, as docs/api/public-api.txt records them")
        return
    sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(
        recorded, current, "docs/api/public-api.txt", "the build", lineterm=""))
    sys.exit("public-api: the public API differs from docs/api/public-api.txt (diff above). If the change is "
             "meant, run `make api` and commit the file with it.")


if __name__ == "__main__":
    main()
