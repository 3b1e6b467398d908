// SPDX-License-Identifier: GPL-2.0

//! debugfs: `/sys/kernel/debug/rust_nvme_mq/rnvme<C>/{queues,lose_commands,fail_resets}`.
//! The last two inject faults, for tests only.

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

/// The debugfs directory of a controller and its files, removed when dropped. A file that
/// cannot be created is left out.
pub(crate) struct CtrlDebugfs {
    _stats: Option<Pin<KBox<File<StatsFile>>>>,
    _lose: Option<Pin<KBox<File<LoseFile>>>>,
    _fail_resets: Option<Pin<KBox<File<FailResetsFile>>>>,
    _dir: Dir,
}

impl CtrlDebugfs {
    pub(crate) fn new(ctrl: &Arc<Ctrl>) -> Result<Self> {
        let root = Dir::new(c"rust_nvme_mq");
        let name = CString::try_from_fmt(fmt!("rnvme{}", ctrl.index))?;
        let dir = root.subdir(&name);
        let stats = dir.read_only_file(c"queues", Ok::<_, Error>(StatsFile(ctrl.clone())));
        let lose = dir.read_write_file(c"lose_commands", Ok::<_, Error>(LoseFile(ctrl.clone())));
        let fail_resets =
            dir.read_write_file(c"fail_resets", Ok::<_, Error>(FailResetsFile(ctrl.clone())));
        Ok(Self {
            _stats: KBox::pin_init(stats, GFP_KERNEL).ok(),
            _lose: KBox::pin_init(lose, GFP_KERNEL).ok(),
            _fail_resets: KBox::pin_init(fail_resets, GFP_KERNEL).ok(),
            _dir: dir,
        })
    }
}
