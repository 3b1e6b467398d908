#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The groups of docs/profile-exact.md "Stop 48": the by-line table of insn_blocks.py --lines
(lines-rust_none.txt) summed by what each line does, by the first rule that matches it (file,
line number of 69db91b, or text). A reading aid for that commit's sources, not a tool.

  groups.py lines-rust_none.txt [N: list each group's first N lines]
"""
import re,sys,collections
rules=[
 # compiler-generated: prologues/epilogues/spills at function entry lines or line 0
 (r":\d+  \}$|derive\(Clone|:0 |fn try_queue\(|fn queue_rq\(|fn reap\(|queue_rq_callback\(|operations.rs:275|handle_vector|ns.rs:76|queueset.rs:505|queue.rs:900|queue.rs:902|queueset.rs:730|dma.rs:59 |dma.rs:367|queue.rs:630|regs.rs:241|Ok\(Ok\(\)\)", "compiler: entry, exit, spills"),
 # the DMA mapping (kernel crate) and its Devres guard
 (r"dma.rs:53 ", "Devres check of each mapping (unbind safety)"),
 (r"dma.rs:58 |request.rs:207|dma.rs:33[69]|dma.rs:34[0-9]|dma.rs:3[56][0-9]|queue.rs:318|queue.rs:414", "DMA map/unmap (C: nvme_map_data/unmap + dma_map_page)"),
 (r"end_ok_batched|CompletionBatch::run|batch.rs", "end in a batch (C: blk_mq_add_to_batch + nvme_complete_batch)"),
 (r"done.iter_mut|\*entry = Some|queue.rs:883|queue.rs:897|queue.rs:889|let ended = match", "ends collected outside the queue lock (the done array)"),
 (r"cmd.rs:567", "command copied to the ring (C: memcpy 64 B) + range check"),
 (r"cmd.rs:599|cmd.rs:60[0-9]|cmd.rs:610|read_cqe", "completion entry read, checked projection (C: nvme_cqe_pending)"),
 (r"revocable.rs|regs.rs:2[34][0-9]|self.regs.ring|queue.rs:76[23]|queue.rs:81[34]", "doorbells: Devres check + bounds-checked MMIO write (C: writel)"),
 (r"request.rs:1[0-3][0-9]|cmd.rs:1[89][0-9]|cmd.rs:20[0-9]|cmd.rs:25[0-9]|request.rs:2[12][0-9]|prp.rs|transfer.rs|request.rs:210|request.rs:211|SlotDma|queue.rs:72[4-9]|queue.rs:73[0-9]", "command build, PRP/SGL choice (C: nvme_setup_rw/cmd, prep)"),
 (r"vector_cpus|online|queue.rs:583|queue.rs:602", "queue usable: vector's CPUs online (hotplug)"),
 (r"home|queueset.rs:19[0-9]|queueset.rs:22[0-9]|queueset.rs:23[0-9]|origin|qi == home|poll_home|is_polled|queueset.rs:24[0-9]|queueset.rs:34[0-9]|queueset.rs:48[0-9]|queue.rs:577", "choosing the queue: CPU map, origin, polled (C: hctx given)"),
 (r"free\.|queue.rs:40[0-9]|queue.rs:41[0-9]|slots.get_mut|slot.rq|self.rq = Some|retries = 0|lent|admits|queue.rs:59[0-9]|queue.rs:6[01][0-9]|queue.rs:65[0-9]|queue.rs:66[0-9]|queue.rs:67[0-9]|cmd.rs:191|set_cid", "own command ids and slots (overflow), lending counts"),
 (r"state.lock|lock_with|with_current|LocalInterruptDisabled|spinlock", "queue lock glue"),
 (r"sq_tail|cq_head|queue.rs:44[0-9]|queue.rs:45[0-9]|how.last|queue.rs:69[0-9]|unrung|give", "ring positions, batching of doorbells"),
 (r"ctrl.state|ctrl.rs:10[0-9]|ctrl.rs:34[0-9]|match raw|ns.rs:6[0-9]|passthru_err_log|is_driver_private|ns.rs:7[0-5]|Submission|queueset.rs:30[0-9]|queueset.rs:31[0-9]|queueset.rs:32[0-9]", "queue_rq: controller state, passthrough flags, submission args"),
 (r"ctrl.rs:100[0-9]|count.load|queue.rs:23[0-9]|inject", "fault injection checks (debugfs)"),
 (r"deferred|queue.rs:99[0-9]", "deferred ends (timeout race) check"),
 (r"admin|queueset.rs:72[0-9]", "interrupt handler: admin queue + queue loop"),
 (r"status_is_retryable|cmd.rs:75[0-9]|cmd.rs:78[0-9]|accepting|aborted_by|retry|queue.rs:79[0-9]|queue.rs:80[0-9]|consumed|queue.rs:78[0-9]", "completion: status, retry, reset checks"),
 (r"operations.rs|start_issued|queue_data|QueueError", "blk-mq callback glue (kernel crate)"),
 (r"stats", "counters"),
]
cat=collections.Counter(); members=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith('## by where'): break
    m=re.match(r"^\s+([\d.]+)  (.*)$",l)
    if not m: continue
    v=float(m[1]); key=m[2]
    for rx,c in rules:
        if re.search(rx,key): break
    else: c="other"
    cat[c]+=v; members[c].append((v,key))
tot=sum(cat.values())
for c,v in cat.most_common():
    print(f"{v:7.1f}  {c}")
    if len(sys.argv)>2:
        for vv,k in members[c][:int(sys.argv[2])]: print(f"           {vv:6.1f} {k}")
print(f"{tot:7.1f}  total")
