#!/usr/bin/env python3
"""List the functions of src/ longer than a limit (default 80 lines), longest first.

How it counts: a function is a line whose code (before any `//`) contains `fn NAME` followed by
`(` or `<`, and that opens a body `{` before any `;` (so trait declarations without a body are
skipped). Its length is the number of lines from the `fn` line to the line holding the brace
that closes that body, both included. Braces are counted outside string and char literals and
comments (line, block, raw strings are handled for the usual `r"..."` / `r#"..."#` forms).
Functions inside `#[cfg(test)]` modules and files named `tests.rs`, `*_test.rs` or under `tests/` are left
out: they are tests, not product code. Nested functions are counted on their own and also
inside their parent.

Usage: python3 bench/longfns.py [--limit N] [ROOT]   (ROOT defaults to src/)
Exits 0 always; it is a report, not a gate.
"""
import os
import re
import sys

FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)\s*[(<]")
IMPL = re.compile(r"^\s*impl\b(?:<[^>]*>)?\s*(?:[A-Za-z_:<>, ]+\s+for\s+)?([A-Za-z_][A-Za-z0-9_]*)")


def strip(text):
    """Replace comments and the insides of string/char literals with spaces, keep newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif re.match(r'b?r(#*)"', text[i:i + 6]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:i + 6])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)  # a lifetime
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    with open(path, encoding="utf-8") as f:
        code = strip(f.read()).split("\n")
    test_from = None
    for k, line in enumerate(code):
        if re.match(r"\s*#\[cfg\(test\)\]", line):
            # the item after it: a `mod` means the rest of the file is tests in this project
            for line2 in code[k + 1:k + 3]:
                if re.match(r"\s*(pub(\(\w+\))?\s+)?mod\s", line2):
                    test_from = k
                    break
            if test_from is not None:
                break
    impl = None
    for k, line in enumerate(code):
        if test_from is not None and k >= test_from:
            break
        m = IMPL.match(line)
        if m:
            impl = m.group(1)
        elif re.match(r"^\S", line) and not line.startswith("}"):
            impl = None if not line.startswith(("pub", "fn", "async", "const", "#")) else impl
        m = FN.search(line)
        if not m:
            continue
        # find the body's opening brace before any `;`
        depth, start, end = 0, None, None
        for j in range(k, len(code)):
            text = code[j] if j > k else code[j][m.start():]
            for ch in text:
                if start is None and ch == ";" and depth == 0:
                    end = -1
                    break
                if ch == "{":
                    if start is None:
                        start = j
                    depth += 1
                elif ch == "}" and start is not None:
                    depth -= 1
                    if depth == 0:
                        end = j
                        break
            if end is not None:
                break
        if end is None or end < 0:
            continue
        name = m.group(1)
        if impl and line.startswith("    ") and not line.startswith("        "):
            name = f"{impl}::{name}"
        yield name, k + 1, end - k + 1


def main():
    args = sys.argv[1:]
    limit = 80
    if "--limit" in args:
        i = args.index("--limit")
        limit = int(args[i + 1])
        del args[i:i + 2]
    root = args[0] if args else "src"
    rows = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not name.endswith(".rs") or name == "tests.rs" or name.endswith("_test.rs") or "/tests/" in path + "/":
                continue
            for fn, line, length in functions(path):
                if length > limit:
                    rows.append((length, f"{path}:{line}", fn))
    rows.sort(key=lambda r: (-r[0], r[1]))
    for length, where, fn in rows:
        print(f"{length:5}  {fn:40}  {where}")
    print(f"{len(rows)} functions over {limit} lines under {root}/")


if __name__ == "__main__":
    main()
