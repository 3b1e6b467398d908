#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where inside one module function the counted instructions go: its disassembly, each
instruction with how many times per I/O it ran.

Reads what `scripts/run-bench.sh --insn-profile` leaves (the log with its INSNMARK, BENCH and
KSYM lines, and the plugin's dumps; see insn_profile.py) and the module the guest ran. A
translation block's count is spread over the instructions it holds, so a branch that is never
taken shows as a drop in the count of the instructions after it. QEMU can translate one address
more than once with different lengths (after a TLB flush, say): every translation is summed.

Example, the submission path of rust_nvme_mq in the `rust_none` window:
  bench/insn_hot.py RESULTS/insn-nvme.log --dumps RESULTS/insn-nvme.dump --config rust_none \\
      --function QueueSet9try_queue --module out/modules-<build>/rust_nvme_mq.ko
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from insn_blocks import disassemble  # noqa: E402
from insn_profile import parse_log  # noqa: E402


def window_blocks(dump, start, end):
    """-> {offset from start: [(instructions, executions)]} of the blocks in [start, end)."""
    blocks = {}
    for line in Path(dump).read_text().splitlines():
        vaddr, n, execs = line.split()
        addr = int(vaddr, 16)
        if start <= addr < end:
            blocks.setdefault(addr - start, []).append((int(n), int(execs)))
    return blocks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", help="the --insn-profile run's log (RESULTS/insn-PART.log)")
    ap.add_argument("--dumps", required=True, help="the plugin's dump prefix (PREFIX.N files)")
    ap.add_argument("--config", required=True, help="the window, e.g. rust_none")
    ap.add_argument("--round", type=int, default=1)
    ap.add_argument("--function", required=True, help="a unique part of the symbol's name")
    ap.add_argument("--module", required=True, help="the .ko the guest loaded for that window")
    ap.add_argument("--min", type=float, default=0.05, help="hide instructions run fewer times per I/O")
    ap.add_argument("--objdump", default="llvm-objdump-22")
    args = ap.parse_args()

    marks, ios, ksyms = parse_log(args.log)
    key = (args.config, args.round)
    if key not in marks or not ios.get(key):
        sys.exit(f"insn_hot: no window {args.config} round {args.round} with an I/O count in {args.log}")
    syms = sorted(ksyms.get(key, []))
    hits = [i for i, s in enumerate(syms) if args.function in s[1]]
    if len(hits) != 1:
        names = ", ".join(syms[i][1] for i in hits) or "none"
        sys.exit(f"insn_hot: '{args.function}' names {len(hits)} symbols of the window ({names})")
    i = hits[0]
    start, symbol = syms[i][0], syms[i][1]
    end = syms[i + 1][0] if i + 1 < len(syms) else start + 0x100000
    dump = f"{args.dumps}.{2 * marks.index(key) + 1}"
    blocks = window_blocks(dump, start, end)
    base, insts = disassemble(args.module, symbol, relocs=True, objdump=args.objdump)
    if base is None:
        sys.exit(f"insn_hot: {symbol} is not in {args.module} (another build of the module?)")
    index = {off: k for k, (off, _) in enumerate(insts)}
    runs = [0] * len(insts)
    for off, translations in blocks.items():
        if off not in index:
            print(f"insn_hot: a block starts at +{off:x}, not at an instruction of {symbol}: "
                  "is --module the build the guest ran?", file=sys.stderr)
            continue
        for n, execs in translations:
            for k in range(index[off], min(index[off] + n, len(insts))):
                runs[k] += execs
    nio = ios[key]
    print(f"{symbol}: {sum(runs) / nio:.1f} instructions per I/O ({nio} I/Os)")
    for (off, text), r in zip(insts, runs):
        if r / nio >= args.min:
            print(f"{r / nio:6.2f} {off:5x}  {text}")


if __name__ == "__main__":
    main()
