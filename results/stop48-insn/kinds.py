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
from pathlib import Path
from insn_profile import parse_log
log,dumps,config=sys.argv[1:4]; specs=sys.argv[4:]  # ko:substring
marks, ios, ksyms = parse_log(log)
dl = sorted(Path(dumps).parent.glob(Path(dumps).name + ".*"), key=lambda p: int(p.suffix[1:]))
res=collections.Counter(); tot=0
for spec in specs:
    ko,sub=spec.split(':')
    blocks, total, funcs = {}, 0, {}
    for k, key in enumerate(marks):
        if key[0] != config: continue
        syms = sorted(ksyms.get(key, []))
        ranges = [(a, syms[i+1][0] if i+1 < len(syms) else a+0x10000, name) for i,(a,name,_) in enumerate(syms) if sub in name]
        total += ios[key]
        for line in dl[2*k+1].read_text().splitlines():
            v,n,e=line.split(); a=int(v,16)
            for s,en,name in ranges:
                if s<=a<en:
                    funcs[name]=s; b=blocks.setdefault((name,a-s),[int(n),0]); b[1]+=int(e)
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
