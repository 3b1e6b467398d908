#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Instructions per I/O of some module functions by kind: push/pop/ret and frame set-up, stack
memory (spills, reloads, locals addressed through %rsp), calls, and the rest. Needs no debug
information, so it compares C's modules with Rust's:

  kinds.py LOG DUMP_PREFIX CONFIG KO:SYMBOL_SUBSTRING [KO:SUBSTRING ...]
"""
import sys, collections
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'bench'))
import insn_blocks as ib
log, dumps, config = sys.argv[1:4]; specs = sys.argv[4:]  # ko:substring
res = collections.Counter()
for spec in specs:
    ko, sub = spec.split(':')
    blocks, total, funcs = ib.collect_blocks(log, dumps, config, sub)
    for name in funcs:
        dis=ib.disassembly(ko,name)
        if not dis: continue
        for (nm,off),(n,e) in blocks.items():
            if nm!=name: continue
            for o,t in [d for d in dis if d[0]>=off][:n]:
                op=t.split()[0]
                if (op.startswith(('push','pop','ret')) and not op.startswith(('pushf','popf'))) or (op.startswith(('sub','add')) and t.split('#')[0].strip().endswith('%rsp')): k='push/pop/ret/frame'
                elif '(%rsp)' in t: k='stack memory (spill, reload, locals)'
                elif op.startswith('call') or op.startswith('jmp') and '*' in t: k='calls'
                else: k='other'
                res[(name[:60],k)]+=e/total
byk=collections.Counter()
for (n,k),v in res.items(): byk[k]+=v
for k,v in byk.most_common(): print(f"{v:7.1f} {k}")
print(f"{sum(byk.values()):7.1f} total over {len(set(n for n,k in res))} functions")
