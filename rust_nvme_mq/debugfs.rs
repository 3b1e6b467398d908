// SPDX-License-Identifier: GPL-2.0

//! debugfs: `/sys/kernel/debug/rust_nvme_mq/rnvme<C>/{queues,batched,lose_commands,
//! fail_resets,inject_status}`. The last three inject faults, for tests only.

use crate::{ctrl::Ctrl, queueset::COUNTER_COLUMNS};
use kernel::{
    debugfs::{Dir, File, Reader},
    prelude::*,
    str::CString,
    sync::{atomic::Relaxed, Arc},
    uaccess::UserSliceReader,
};

/// The counters of every queue, as a debugfs file.
struct StatsFile(Arc<Ctrl>);

impl core::fmt::Debug for StatsFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        writeln!(f, "{COUNTER_COLUMNS}")?;
        for line in self.0.queues.counters() {
            kernel::fmt::Display::fmt(&line, f)?;
            writeln!(f)?;
        }
        Ok(())
    }
}

/// The requests blk-mq handed over in batches, and those of them refused, as a debugfs file.
struct BatchedFile(Arc<Ctrl>);

impl core::fmt::Debug for BatchedFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let counts = &self.0.queues.batched;
        writeln!(
            f,
            "{} {}",
            counts.requests.load(Relaxed),
            counts.refused.load(Relaxed)
        )
    }
}

/// The fault injection knob, as a debugfs file.
struct LoseFile(Arc<Ctrl>);

impl core::fmt::Debug for LoseFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        writeln!(f, "{}", self.0.faults.lose.load(Relaxed))
    }
}

impl Reader for LoseFile {
    fn read_from_slice(&self, reader: &mut UserSliceReader) -> Result {
        self.0.faults.lose.read_from_slice(reader)
    }
}

/// The test-only knob that makes the next reset attempts fail, as a debugfs file.
struct FailResetsFile(Arc<Ctrl>);

impl core::fmt::Debug for FailResetsFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        writeln!(f, "{}", self.0.faults.fail_resets.load(Relaxed))
    }
}

impl Reader for FailResetsFile {
    fn read_from_slice(&self, reader: &mut UserSliceReader) -> Result {
        self.0.faults.fail_resets.read_from_slice(reader)
    }
}

/// The test-only knob that gives the next successful completions of every I/O queue another
/// status, as a debugfs file: write "STATUS COUNT" (STATUS as C's `NVME_SC_*`, with 0x4000 for
/// Do Not Retry; numbers in decimal or 0x hex); reads "COUNT STATUS" of each queue.
struct InjectFile(Arc<Ctrl>);

impl core::fmt::Debug for InjectFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (count, status) in self.0.queues.injecting() {
            writeln!(f, "{} {:#x}", count, status)?;
        }
        Ok(())
    }
}

/// A number in decimal or, with a `0x` prefix, hexadecimal.
fn parse_number(word: &str) -> Result<u32> {
    match word.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => word.parse(),
    }
    .map_err(|_| EINVAL)
}

impl Reader for InjectFile {
    fn read_from_slice(&self, reader: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 32];
        let len = reader.len();
        if len > buf.len() {
            return Err(EINVAL);
        }
        reader.read_slice(&mut buf[..len])?;
        let text = core::str::from_utf8(&buf[..len]).map_err(|_| EINVAL)?;
        let mut words = text.split_ascii_whitespace();
        let (Some(status), Some(count), None) = (words.next(), words.next(), words.next()) else {
            return Err(EINVAL);
        };
        let status = u16::try_from(parse_number(status)?).map_err(|_| EINVAL)?;
        if status >> 15 != 0 {
            return Err(EINVAL);
        }
        let count = parse_number(count)?;
        self.0.queues.inject(status, count);
        Ok(())
    }
}

/// The debugfs directory of a controller and its files, removed when dropped. A file that
/// cannot be created is left out.
pub(crate) struct CtrlDebugfs {
    _stats: Option<Pin<KBox<File<StatsFile>>>>,
    _batched: Option<Pin<KBox<File<BatchedFile>>>>,
    _lose: Option<Pin<KBox<File<LoseFile>>>>,
    _fail_resets: Option<Pin<KBox<File<FailResetsFile>>>>,
    _inject: Option<Pin<KBox<File<InjectFile>>>>,
    _dir: Dir,
}

impl CtrlDebugfs {
    pub(crate) fn new(ctrl: &Arc<Ctrl>) -> Result<Self> {
        let root = Dir::new(c"rust_nvme_mq");
        let name = CString::try_from_fmt(fmt!("rnvme{}", ctrl.index))?;
        let dir = root.subdir(&name);
        let stats = dir.read_only_file(c"queues", Ok::<_, Error>(StatsFile(ctrl.clone())));
        let batched = dir.read_only_file(c"batched", Ok::<_, Error>(BatchedFile(ctrl.clone())));
        let lose = dir.read_write_file(c"lose_commands", Ok::<_, Error>(LoseFile(ctrl.clone())));
        let fail_resets =
            dir.read_write_file(c"fail_resets", Ok::<_, Error>(FailResetsFile(ctrl.clone())));
        let inject =
            dir.read_write_file(c"inject_status", Ok::<_, Error>(InjectFile(ctrl.clone())));
        Ok(Self {
            _stats: KBox::pin_init(stats, GFP_KERNEL).ok(),
            _batched: KBox::pin_init(batched, GFP_KERNEL).ok(),
            _lose: KBox::pin_init(lose, GFP_KERNEL).ok(),
            _fail_resets: KBox::pin_init(fail_resets, GFP_KERNEL).ok(),
            _inject: KBox::pin_init(inject, GFP_KERNEL).ok(),
            _dir: dir,
        })
    }
}
