#!/usr/bin/env python3
"""Checks the one-way library graph of src/ without compiling (ctest build.layering).

Two checks against ALLOWED below (the graph drawn in src/CMakeLists.txt):
  - every `#include "<module>/..."` in src/<m>/ names <m> or a module in the closure of ALLOWED[m];
  - every aerie_<module> named in target_link_libraries of src/<m>/CMakeLists.txt is allowed for <m>.
The build enforces the first on its own (per-library include roots); this names every offender at once
and also catches a new link added only to make a wrong-way include compile.
Usage: check_layering.py [repo root]. Exit status 1 with one line per violation.
"""
import pathlib
import re
import sys

# library -> the libraries it may link directly (and so include, with their closure).
ALLOWED = {
    "core": [],
    "io": ["core"],
    "tokenizer": ["io", "core"],
    "jinja": ["core"],
    "ops": ["core"],
    "quant": ["ops", "io", "core"],
    "dist": ["core"],
    "sample": ["core"],
    "grammar": ["sample", "core"],
    "kv": ["core"],
    "models": ["quant", "ops", "dist", "io", "kv", "core"],
    "spec": ["models", "sample", "io", "kv", "ops", "core"],
    "sched": ["kv", "sample", "core"],
    "engine": ["sched", "spec", "models", "sample", "kv", "core"],
    "server": ["engine", "models", "tokenizer", "jinja", "grammar", "core"],
    "cli": ["engine", "server", "tokenizer", "models", "io", "sample", "core"],
    "capi": ["engine", "tokenizer", "jinja", "grammar", "core"],
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([A-Za-z_]+)/')
LINK = re.compile(r"target_link_libraries\s*\(\s*aerie_(\w+)([^)]*)\)", re.S)


def closure(module):
    seen, stack = set(), list(ALLOWED[module])
    while stack:
        dep = stack.pop()
        if dep not in seen:
            seen.add(dep)
            stack.extend(ALLOWED[dep])
    return seen


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    src = root / "src"
    errors = []
    modules = sorted(p.name for p in src.iterdir() if (p / "CMakeLists.txt").exists())
    for module in modules:
        if module not in ALLOWED:
            errors.append(f"src/{module}: a library missing from ALLOWED in tools/check_layering.py")
            continue
        visible = closure(module) | {module}
        for path in sorted((src / module).rglob("*")):
            if path.suffix not in (".h", ".cpp", ".inc"):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                match = INCLUDE.match(line)
                if match and match.group(1) in ALLOWED and match.group(1) not in visible:
                    errors.append(f"{path.relative_to(root)}:{number}: {module} includes {match.group(1)}/")
        cmake = (src / module / "CMakeLists.txt").read_text()
        for match in LINK.finditer(cmake):
            if match.group(1) != module:
                continue
            for dep in re.findall(r"\baerie_(\w+)", match.group(2)):
                if dep in ALLOWED and dep not in visible:
                    errors.append(f"src/{module}/CMakeLists.txt: aerie_{module} links aerie_{dep}")
    for error in errors:
        print(error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
