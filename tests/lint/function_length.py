#!/usr/bin/env python3
"""function_length.py [--max N] [ROOT]: no function over 100 lines (docs/DESIGN.md §10).

Checks every file git tracks under ROOT (default: the current directory; outside
a git checkout, the files there but for hidden and build folders and venvs):

  Python (*.py): each def and async def, nested ones included, from its def line
  to its last line (decorators not counted), by the ast module.

  C and CUDA (*.c, *.h, *.cu): each function body, from its line starting `{`
  to the next line starting `}`, both counted.  The sources are formatted with
  the committed .clang-format (Linux braces), which puts a function's braces,
  and no other, at the start of a line; a C++ `namespace` brace and the `}`
  of an `extern "C" {` are told apart.  A line starting `{` inside a function,
  or a definition at file level with its `{` at the end of a line (a file not
  formatted so), is reported, so no function escapes the count.

Prints FILE:LINE: FUNCTION is N lines (max 100) for each offender, and exits 1
when there is one.  Python 3 standard library only.
"""

import argparse
import ast
import os
import re
import subprocess
import sys

MAX_LINES = 100
# A definition at file level whose brace ends its declarator's line (no '=': not
# an initializer).
ATTACHED = re.compile(r"[A-Za-z_][^=;]*\)[^=;(]*\{\s*$")
ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)")


def python_functions(path, text):
    """(line, name, length) of every def in a Python file."""
    tree = ast.parse(text, filename=path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.lineno, node.name, node.end_lineno - node.lineno + 1


def c_name(lines, brace):
    """(index of its first line, name) of the function whose body opens at
    lines[brace]: its declarator starts on the last line above the brace that is
    not indented, and the name is the identifier before its first '('
    (START_TEST(name) gives name)."""
    k = brace - 1
    while k > 0 and (not lines[k].strip() or lines[k][0] in " \t"):
        k -= 1
    decl = " ".join(line.strip() for line in lines[k:brace])
    decl = ATTRIBUTE.sub("", decl)
    m = re.search(r"(\w+)\s*\(\s*(\w*)", decl)
    if not m:
        return k, decl or "?"
    return k, m.group(2) if m.group(1) == "START_TEST" else m.group(1)


def c_functions(path, text):
    """(line, name, length) of every function in a C or CUDA file (line: its
    declarator's, length: its body's); raises ValueError where the layout is not
    the one this reads."""
    lines = text.split("\n")
    start = None
    for i, line in enumerate(lines):
        if line.startswith("{"):
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            if prev.startswith("namespace"):
                continue
            if start is not None:
                raise ValueError("%s:%d: a line starting '{' inside the function from line %d: "
                                 "format the file with clang-format" % (path, i + 1, start + 1))
            start = i
        elif start is None and ATTACHED.match(ATTRIBUTE.sub("", line)):
            raise ValueError("%s:%d: a function's '{' not on a line of its own: format the "
                             "file with clang-format" % (path, i + 1))
        elif line.startswith("}") and start is not None:
            first, name = c_name(lines, start)
            yield first + 1, name, i - start + 1
            start = None
    if start is not None:
        raise ValueError("%s:%d: no line starting '}' closes this function" % (path, start + 1))


SUFFIXES = (".py", ".c", ".h", ".cu")


def tracked(root):
    """The files git tracks under root, relative to it; outside a git checkout
    (a release tarball), the files under root but for hidden folders, build
    folders and virtual environments."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--"] +
                             ["*" + s for s in SUFFIXES], check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        return sorted(p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not any(
            os.path.exists(os.path.join(d, x, m)) for m in ("meson-private", "pyvenv.cfg"))]
        found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(SUFFIXES)]
    return sorted(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max", type=int, default=MAX_LINES, help="most lines a function may have")
    ap.add_argument("root", nargs="?", default=".", help="the checkout to check")
    args = ap.parse_args()
    bad = 0
    count = 0
    for rel in tracked(args.root):
        path = os.path.join(args.root, rel)
        if not os.path.isfile(path):  # deleted but not yet committed
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        scan = python_functions if rel.endswith(".py") else c_functions
        try:
            for line, name, n in scan(rel, text):
                count += 1
                if n > args.max:
                    print("%s:%d: %s is %d lines (max %d)" % (rel, line, name, n, args.max))
                    bad += 1
        except (SyntaxError, ValueError) as e:
            print("function_length: %s" % e)
            bad += 1
    print("function_length: %d functions, %d over %d lines or unreadable" % (count, bad, args.max))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
