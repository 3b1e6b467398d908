#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where inside one function the instructions of an exact profile go, block by block.

Takes the same inputs as insn_profile.py (the guest log of run-bench.sh --insn-profile and the
plugin's dumps) and, for one configuration and every module function whose symbol contains
SUBSTRING, prints each translation block that ran: its offset in the function, its length in
instructions, how often it ran per I/O and the instructions per I/O it accounts for. With
--ko, the module's disassembly of each block follows (objdump -d --no-show-raw-insn), so the
blocks can be read against the source (a Rust symbol's offsets are those of the .ko's .text).

  insn_blocks.py LOG --dumps PREFIX --config rust_none --func try_queue [--ko rust_nvme_mq.ko]
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from insn_profile import parse_log  # noqa: E402


def disassembly(ko, symbol):
    """-> [(offset within the function, text)] of `symbol` in `ko`."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={symbol}", ko],
                         check=True, capture_output=True, text=True).stdout
    lines, start = [], None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <", line)
        if m:
            start = int(m.group(1), 16)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m and start is not None:
            lines.append((int(m.group(1), 16) - start, m.group(2)))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--dumps", required=True, help="the plugin's dump prefix (PREFIX.N files)")
    ap.add_argument("--config", required=True, help="configuration, e.g. rust_none")
    ap.add_argument("--func", required=True, help="substring of the module symbol(s)")
    ap.add_argument("--ko", help="the module the guest loaded, for the disassembly")
    args = ap.parse_args()

    marks, ios, ksyms = parse_log(args.log)
    dumps = sorted(Path(args.dumps).parent.glob(Path(args.dumps).name + ".*"),
                   key=lambda p: int(p.suffix[1:]))
    blocks, total_ios, funcs = {}, 0, {}
    for k, key in enumerate(marks):
        if key[0] != args.config:
            continue
        if 2 * k + 1 >= len(dumps):
            sys.exit(f"insn_blocks: no dump for window {k} ({key})")
        syms = sorted(ksyms.get(key, []))
        # The symbol's end: the next symbol of the module.
        ranges = [(a, syms[i + 1][0] if i + 1 < len(syms) else a + 0x10000, name)
                  for i, (a, name, _) in enumerate(syms) if args.func in name]
        if not ranges:
            sys.exit(f"insn_blocks: no module symbol contains '{args.func}' in {key}")
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
        sys.exit(f"insn_blocks: no window of configuration '{args.config}' in {args.log}")
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
