#!/usr/bin/env bash
# Host test: the drivers' structure - rust_nvme_mq's modules import one another without a
# cycle, its crate doc's module table lists exactly its modules in an order that the imports
# respect, and no function of either driver is longer than a screen.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/../../scripts/lib.sh"

MAX_FN_LINES=50

usage() {
    cat <<USAGE
Usage: $0 [--help]

Reads the drivers' sources (no kernel needed) and prints "PASS name" / "FAIL name" per check,
with what is wrong on failure:
  nvme_imports_acyclic      the module graph of rust_nvme_mq (rust_nvme_mq.rs and
                            rust_nvme_mq/*.rs), rebuilt from 'use crate::...' trees, 'crate::x::'
                            paths in code and 'super::' outside an inline module (the crate
                            root: a module naming the root's own items depends on it, which
                            declares every module), has no cycle; prints every elementary cycle
  nvme_module_table         the crate doc's "# Structure" table names each module file exactly
                            once, and each module uses only modules of rows above its own
  drivers_functions_short   no function (fn to its closing brace) of rust_pmem.rs or
                            rust_nvme_mq is over $MAX_FN_LINES lines; prints each one that is
Comments, strings and character literals are skipped when parsing. Takes well under 1 s.
USAGE
}
help_or_no_args "$@"

TOP=$(cd "$(dirname "$0")/../.." && pwd)

# The checks (Python: the graph search is easier there than in shell). The heredoc is quoted:
# nothing in it is expanded.
status=0
MAX_FN_LINES=$MAX_FN_LINES python3 - "$TOP" <<'PY' || status=$?
import os, re, signal, sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)
top = sys.argv[1]
max_lines = int(os.environ["MAX_FN_LINES"])
root_file = os.path.join(top, "rust_nvme_mq.rs")
mod_dir = os.path.join(top, "rust_nvme_mq")
ROOT = "(crate root)"


def strip(text):
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    def blank(s):
        return re.sub(r"[^\n]", " ", s)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j])); i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j): depth += 1; j += 2
                elif text.startswith("*/", j): depth -= 1; j += 2
                else: j += 1
            out.append(blank(text[i:j])); i = j
        elif re.match(r'(?:b|c)?r(#*)"', text[i:i + 8]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(?:b|c)?r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(blank(text[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(blank(text[i:j + 1])); i = j + 1
        elif c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])'", text[i:])
            if m:
                out.append(blank(m.group(0))); i += m.end()
            else:  # a lifetime or a label
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return "".join(out)


def use_heads(tree):
    """The first path segment of each branch of a use tree ('a::b', '{a::x, b}', 'a')."""
    tree = tree.strip()
    if not tree.startswith("{"):
        return [re.match(r"\w+|\*", tree).group(0)]
    heads, depth, cur = [], 0, ""
    for ch in tree[1:-1] + ",":
        if ch == "{": depth += 1
        if ch == "}": depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                heads.append(re.match(r"\w+|\*", cur.strip()).group(0))
            cur = ""
        else:
            cur += ch
    return heads


def use_trees(code, prefix):
    """Each 'use PREFIX::TREE;' of the code: (line, TREE)."""
    for m in re.finditer(r"(?<![\w$])use\s+" + prefix + r"\s*::\s*", code):
        j, depth = m.end(), 0
        while j < len(code) and not (code[j] == ";" and depth == 0):
            depth += code[j] == "{"
            depth -= code[j] == "}"
            j += 1
        yield code.count("\n", 0, m.start()) + 1, code[m.end():j]


def brace_depths(code):
    """depth[i]: the brace depth at character i."""
    depth, d = [], 0
    for ch in code:
        if ch == "}": d -= 1
        depth.append(d)
        if ch == "{": d += 1
    return depth


modules = sorted(f[:-3] for f in os.listdir(mod_dir) if f.endswith(".rs"))
root_code = strip(open(root_file).read())
declared = re.findall(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", root_code)
names = set(declared)

# edges[a][b]: where module a uses module b (file:line, for the message).
edges = {m: {} for m in modules + [ROOT]}
for m in declared:
    edges[ROOT][m] = "rust_nvme_mq.rs: mod %s" % m
for m in modules:
    rel = "rust_nvme_mq/%s.rs" % m
    code = strip(open(os.path.join(mod_dir, m + ".rs")).read())
    depth = brace_depths(code)
    def dep(target, pos_line):
        if target in ("self", "super", "crate"):
            return
        target = target if target in names else ROOT
        if target != m:
            edges[m].setdefault(target, "%s:%d" % (rel, pos_line))
    for line, tree in use_trees(code, "crate"):
        for h in use_heads(tree):
            dep(h if h != "*" else ROOT, line)
    for mt in re.finditer(r"(?<![\w$])crate\s*::\s*(\w+)", code):
        dep(mt.group(1), code.count("\n", 0, mt.start()) + 1)
    # super:: outside an inline module is the crate root; inside one (tests) it is this
    # module itself.
    inline = []
    for mm in re.finditer(r"(?<![\w$])mod\s+\w+\s*\{", code):
        k = mm.end() - 1
        while k < len(code) and not (code[k] == "}" and depth[k] == depth[mm.end() - 1]):
            k += 1
        inline.append((mm.start(), k))
    for mt in re.finditer(r"(?<![\w$])super\s*::\s*(\w+|\{|\*)", code):
        if not any(a <= mt.start() <= b for a, b in inline):
            dep(mt.group(1) if mt.group(1) in names else ROOT,
                code.count("\n", 0, mt.start()) + 1)

# Every elementary cycle (Johnson's idea without the blocking refinement: the graph is small):
# each cycle is found once, from its smallest node. The crate root declares every module, so
# a module that uses it closes a cycle: one "m -> (crate root) -> m" each, and the search
# itself leaves the root out.
cycles = [[m, ROOT, m] for m in modules if ROOT in edges[m]]
edges[ROOT] = {}
order = sorted(edges)
def search(start, node, path, on_path):
    for nxt in sorted(edges[node]):
        if nxt == start:
            cycles.append(path + [start])
        elif nxt > start and nxt not in on_path:
            on_path.add(nxt)
            search(start, nxt, path + [nxt], on_path)
            on_path.discard(nxt)
for s in order:
    search(s, s, [s], {s})

if cycles:
    print("FAIL nvme_imports_acyclic")
    print("    | %d elementary import cycles among rust_nvme_mq's modules:" % len(cycles))
    for c in cycles:
        hops = " -> ".join(c)
        where = ", ".join(edges[a].get(b, "rust_nvme_mq.rs") for a, b in zip(c, c[1:]))
        print("    | %s   (%s)" % (hops, where))
else:
    print("PASS nvme_imports_acyclic")

# The module table: rows '//! | `a`, `b` | ...' after '//! # Structure'.
doc = [l[3:] for l in open(root_file).read().splitlines() if l.startswith("//!")]
problems, rows = [], []
try:
    start = next(i for i, l in enumerate(doc) if l.strip() == "# Structure")
except StopIteration:
    start = None
    problems.append("no '# Structure' section in rust_nvme_mq.rs's crate doc")
if start is not None:
    for l in doc[start + 1:]:
        if l.startswith("#"):
            break
        cells = l.strip().split("|")
        if len(cells) >= 3 and l.strip().startswith("|"):
            mods = re.findall(r"`(\w+)`", cells[1])
            if mods:
                rows.append(mods)
row_of = {}
for r, mods in enumerate(rows):
    for mname in mods:
        if mname in row_of:
            problems.append("module '%s' is listed twice" % mname)
        row_of[mname] = r
for mname in modules:
    if mname not in row_of:
        problems.append("module '%s' (rust_nvme_mq/%s.rs) is missing from the table" % (mname, mname))
for mname in row_of:
    if mname not in modules:
        problems.append("the table lists '%s', which has no file rust_nvme_mq/%s.rs" % (mname, mname))
for a in modules:
    for b, where in sorted(edges[a].items()):
        if b == ROOT:
            problems.append("'%s' uses the crate root (%s)" % (a, where))
        elif a in row_of and b in row_of and row_of[b] >= row_of[a]:
            problems.append("'%s' uses '%s', which is not listed before it (%s)" % (a, b, where))
if problems:
    print("FAIL nvme_module_table")
    for p in problems:
        print("    | " + p)
else:
    print("PASS nvme_module_table")

# Function lengths: from the line of 'fn' to the line of the body's closing brace.
files = [os.path.join(top, "rust_pmem.rs"), root_file] + \
    [os.path.join(mod_dir, m + ".rs") for m in modules]
long_fns = []
for path in files:
    code = strip(open(path).read())
    for mt in re.finditer(r"(?<![\w$])fn\s+(\w+)", code):
        j, paren = mt.end(), 0
        while j < len(code):
            ch = code[j]
            if ch in "([": paren += 1
            elif ch in ")]": paren -= 1
            elif ch == ";" and paren == 0: j = -1; break  # a declaration without a body
            elif ch == "{" and paren == 0: break
            j += 1
        if j < 0 or j >= len(code):
            continue
        d, k = 0, j
        while k < len(code):
            if code[k] == "{": d += 1
            elif code[k] == "}":
                d -= 1
                if d == 0: break
            k += 1
        first = code.count("\n", 0, mt.start()) + 1
        last = code.count("\n", 0, k) + 1
        if last - first + 1 > max_lines:
            long_fns.append((os.path.relpath(path, top), first, mt.group(1), last - first + 1))
if long_fns:
    print("FAIL drivers_functions_short")
    for path, line, name, count in long_fns:
        print("    | %s:%d: fn %s is %d lines (at most %d)" % (path, line, name, count, max_lines))
else:
    print("PASS drivers_functions_short")
PY
# 141: the reader of the output went away (SIGPIPE); anything else is a crash of the checks.
[[ $status == 0 || $status == 141 ]] || die "the checks failed to run (python3 exit $status)"
