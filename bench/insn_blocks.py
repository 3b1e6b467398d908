#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where inside one function the instructions of an exact profile go, block by block.

Takes the same inputs as insn_profile.py (the guest log of run-bench.sh --insn-profile and the
plugin's dumps) and, for one configuration and every module function whose symbol contains
SUBSTRING, prints each translation block that ran: its offset in the function, its length in
instructions, how often it ran per I/O and the instructions per I/O it accounts for. With
--ko, the module's disassembly of each block follows (llvm-objdump -d --no-show-raw-insn), so the
blocks can be read against the source (a Rust symbol's offsets are those of the .ko's .text).

  insn_blocks.py LOG --dumps PREFIX --config rust_none --func try_queue [--ko rust_nvme_mq.ko]

With --lines DEBUG_KO (and --ko), the instructions are summed by source line instead: DEBUG_KO
is the same module built with debug information (the same sources, `make -C $KBUILD M=DIR
LLVM=-22 KRUSTFLAGS=-g modules` in a copy of the tree), whose code must be the same as --ko's
(checked, function by function). Each instruction counts for the driver's own line that led to
it (the innermost frame of its inline chain in the driver's sources; a kernel-crate function
the module instantiates counts for its own outermost line), and, in a second table, for where
it comes from (the innermost frame's file: the driver, the kernel crate, core).

  insn_blocks.py LOG --dumps PREFIX --config rust_none --func rust_nvme_mq \\
      --ko rust_nvme_mq.ko --lines /tmp/g/rust_nvme_mq.ko
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from insn_profile import parse_log  # noqa: E402

# The LLVM tools setup-host.sh installs with the toolchain (scripts/lib.sh's RBLK_LLVM).
OBJDUMP = "llvm-objdump-22"
SYMBOLIZER = "llvm-symbolizer-22"
PREFIXES = ("lock", "rep", "repne", "repe", "notrack")


def disassembly(ko, symbol):
    """-> [(offset within the function, text)] of `symbol` in `ko`."""
    return disassemble(ko, symbol)[1]


def disassemble(ko, symbol, relocs=False, objdump=OBJDUMP):
    """-> (the address of `symbol` in `ko`, or None if it has none; [(offset within it, text)]),
    one entry per instruction (a prefix printed on a line of its own joins its instruction).
    With `relocs`, an instruction a relocation applies to has the relocation's target appended."""
    out = subprocess.run([objdump, "-dr" if relocs else "-d", "--no-show-raw-insn",
                          f"--disassemble-symbols={symbol}", ko],
                         check=True, capture_output=True, text=True).stdout
    lines, start, prefix = [], None, None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <", line)
        if m:
            start = int(m.group(1), 16)
            continue
        # A relocation has a line of its own, "offset: R_X86_64_... target", after its
        # instruction: not an instruction.
        m = re.match(r"^\s+[0-9a-f]+:\s+R_X86_64_\S+\s+(\S+)", line)
        if m:
            if lines:
                off, text = lines[-1]
                lines[-1] = (off, f"{text}   <{m.group(1)}>")
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m and start is not None:
            off, text = int(m.group(1), 16) - start, m.group(2).strip()
            # llvm-objdump prints a prefix (lock, rep) on a line of its own: one instruction.
            if text in PREFIXES:
                prefix = (off, text)
                continue
            if prefix:
                off, text = prefix[0], f"{prefix[1]} {text}"
                prefix = None
            lines.append((off, text))
    return start, lines


def normalized(lines):
    """The instructions of a disassembly without addresses, to compare two builds."""
    return [re.sub(r"[0-9a-f]+ <[^>]*>|0x[0-9a-f]+\(%rip\)", "", t) for _, t in lines]


DRIVER_FILES = re.compile(r"(/rust_nvme_mq/[^/]+\.rs|/rust_nvme_mq\.rs|/rust_pmem\.rs)$")


def inline_chains(ko, start, offs):
    """-> {offset: [(file, line, function)], innermost frame first} of the instructions at
    offsets `offs` of the function at `start` in `ko`."""
    res = subprocess.run([SYMBOLIZER, f"--obj={ko}", "--inlines", "--functions=linkage"],
                         input="".join(f"0x{start + o:x}\n" for o in offs),
                         check=True, capture_output=True, text=True).stdout
    chains = {}
    for off, block in zip(offs, res.strip("\n").split("\n\n")):
        lines = block.splitlines()
        frames = []
        for fn, loc in zip(lines[0::2], lines[1::2]):
            path, line = (loc.rsplit(":", 2) + ["0"])[:2]
            frames.append((path, int(line) if line.isdigit() else 0, fn))
        chains[off] = frames
    return chains


def where(frames):
    """(the driver line an instruction counts for, the file it comes from)."""
    own = next((f for f in frames if DRIVER_FILES.search(f[0])), frames[-1])
    path, line, _ = own
    text = ""
    try:
        text = Path(path).read_text().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        pass
    short = "/".join(path.split("/")[-2:])
    origin = frames[0][0]
    if DRIVER_FILES.search(origin):
        group = "driver"
    else:
        group = "/".join(origin.split("/")[-3:])
    return f"{short}:{line}  {text[:70]}", group


def by_lines(funcs, blocks, total_ios, ko, debug_ko):
    """Print the instructions per I/O of `funcs` by driver source line and by origin."""
    per_line, per_origin = {}, {}
    for name in sorted(funcs):
        dis = disassembly(ko, name)
        start, debug_dis = disassemble(debug_ko, name)
        if normalized(dis) != normalized(debug_dis):
            sys.exit(f"insn_blocks: {name} differs between {ko} and {debug_ko}: "
                     "build the debug copy from the same sources and compiler")
        chains = inline_chains(debug_ko, start, [o for o, _ in debug_dis])
        for (nm, off), (n, e) in blocks.items():
            if nm != name:
                continue
            for o, _ in [d for d in dis if d[0] >= off][:n]:
                line, origin = where(chains.get(o, [("?", 0, "?")]))
                per_line[line] = per_line.get(line, 0) + e / total_ios
                per_origin[origin] = per_origin.get(origin, 0) + e / total_ios
    total = sum(per_line.values())
    print(f"## {len(funcs)} functions: {total:,.1f} instructions per I/O, by driver line\n")
    for line, v in sorted(per_line.items(), key=lambda x: -x[1]):
        if v >= 0.5:
            print(f"{v:7.1f}  {line}")
    print("\n## by where the instruction comes from (innermost inlined frame)\n")
    for origin, v in sorted(per_origin.items(), key=lambda x: -x[1]):
        if v >= 0.5:
            print(f"{v:7.1f}  {origin}")


def collect_blocks(log, dumps_prefix, config, substring):
    """-> ({(symbol, offset): [instructions, executions]}, I/Os, {symbol: address}): the
    translation blocks of the module functions whose symbol contains `substring` that ran in
    the windows of `config`, summed over them (also for other scripts, e.g. a stop's
    results/*/kinds.py)."""
    marks, ios, ksyms = parse_log(log)
    dumps = sorted(Path(dumps_prefix).parent.glob(Path(dumps_prefix).name + ".*"),
                   key=lambda p: int(p.suffix[1:]))
    blocks, total_ios, funcs = {}, 0, {}
    for k, key in enumerate(marks):
        if key[0] != config:
            continue
        if 2 * k + 1 >= len(dumps):
            sys.exit(f"insn_blocks: no dump for window {k} ({key})")
        syms = sorted(ksyms.get(key, []))
        # The symbol's end: the next symbol of the module.
        ranges = [(a, syms[i + 1][0] if i + 1 < len(syms) else a + 0x10000, name)
                  for i, (a, name, _) in enumerate(syms) if substring in name]
        if not ranges:
            sys.exit(f"insn_blocks: no module symbol contains '{substring}' in {key}")
        total_ios += ios[key]
        for line in dumps[2 * k + 1].read_text().splitlines():
            vaddr, n, execs = line.split()
            addr = int(vaddr, 16)
            for start, end, name in ranges:
                if start <= addr < end:
                    funcs[name] = start
                    b = blocks.setdefault((name, addr - start), [int(n), 0])
                    b[1] += int(execs)
    if not total_ios:
        sys.exit(f"insn_blocks: no window of configuration '{config}' in {log}")
    return blocks, total_ios, funcs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--dumps", required=True, help="the plugin's dump prefix (PREFIX.N files)")
    ap.add_argument("--config", required=True, help="configuration, e.g. rust_none")
    ap.add_argument("--func", required=True, help="substring of the module symbol(s)")
    ap.add_argument("--ko", help="the module the guest loaded, for the disassembly")
    ap.add_argument("--lines", metavar="DEBUG_KO",
                    help="the same module built with debug information: sum by source line")
    args = ap.parse_args()
    if args.lines and not args.ko:
        sys.exit("insn_blocks: --lines needs --ko, the module the guest loaded")

    blocks, total_ios, funcs = collect_blocks(args.log, args.dumps, args.config, args.func)
    if args.lines:
        by_lines(funcs, blocks, total_ios, args.ko, args.lines)
        return
    for name in sorted(funcs):
        own = sorted((off, v) for (nm, off), v in blocks.items() if nm == name)
        total = sum(n * e for _, (n, e) in own) / total_ios
        print(f"## {name}: {total:,.1f} instructions per I/O\n")
        dis = disassembly(args.ko, name) if args.ko else []
        for off, (n, e) in own:
            if e < total_ios / 1000:
                continue  # run a few times only (the plugin splits blocks it saw once)
            print(f"+0x{off:x}: {n} insns x {e / total_ios:.3f} per I/O = {n * e / total_ios:.1f}")
            if dis:
                body = [t for o, t in dis if o >= off][:n]
                print("".join(f"      {t}\n" for t in body), end="")
        print()


if __name__ == "__main__":
    main()
