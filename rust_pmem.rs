// SPDX-License-Identifier: GPL-2.0

//! Persistent memory block driver.
//!
//! A driver on the nvdimm bus, like the C `nd_pmem`: it binds to io and pmem namespaces (an
//! unlabelled NVDIMM's whole region, or the namespaces `ndctl create-namespace` writes to the
//! labels) and makes one blk-mq disk per namespace, named after the C driver's disk with an `r`
//! in front: `rpmem<region>` or `rpmem<region>.<n>` for `pmem<region>[.<n>]`. Which of the two
//! drivers has a namespace is decided by binding: the first one loaded takes the namespaces that
//! are free, and sysfs (`driver_override`, `bind`/`unbind` of /sys/bus/nd/drivers/*) or
//! `ndctl disable-namespace`/`enable-namespace` move a namespace between them. The namespace's
//! range is also claimed in the iomem tree while the disk exists.
//!
//! Data path: reads use a machine-check safe copy, writes bypass the CPU cache
//! (`memcpy_flushcache`), flush and FUA flush the region like the C driver (`nvdimm_flush()`:
//! the persistent memory write barrier, then a write to each DIMM's flush hint address where
//! the platform has them). As in C, the disk has a write cache (flushes are passed down) and
//! advertises FUA only where the region has flush hints (`nvdimm_has_flush()`); the region is
//! flushed again when the namespace is unbound and at system shutdown. Discard and write-zeroes
//! zero the range durably.
//!
//! Asynchronous regions (virtio-pmem), whose flush is a request to the host that sleeps, are
//! refused at probe with a message: `queue_rq` must not sleep (it serves `REQ_NOWAIT`), and
//! without that request an `fsync()` would not be durable. The C `nd_pmem` serves them. Every
//! request completes inside `queue_rq` (or `queue_rqs`, which takes a task's plugged requests
//! at once and ends them in one batch) without allocating, locking or sleeping, so the queue
//! can honour `REQ_NOWAIT`; the `nowait` parameter decides whether the queue advertises
//! `BLK_FEAT_NOWAIT` (off by default, like the C patch this follows).
//!
//! DAX: a namespace in fsdax mode (`ndctl create-namespace -m fsdax`) is a pfn device whose
//! info block reserves room for the memory's `struct page`s. The driver binds that pfn device,
//! maps the data part with pages and gives the disk a DAX device, so that `mount -o dax` maps
//! file pages straight onto the persistent memory. Its block I/O path is the same as for raw
//! namespaces, on the data part.

use kernel::{
    block::{
        badblocks::BadBlocks,
        mq::{
            gen_disk::{GenDisk, GenDiskBuilder},
            Command, CompletionBatch, Operations, QueueError, Request, RequestList, TagSet,
        },
    },
    dax, debugfs, device,
    devres::Devres,
    driver,
    io::pmem::Mapping,
    nvdimm::{self, RegionFlush},
    page::PAGE_SIZE,
    prelude::*,
    revocable::RevocableGuard,
    str::CString,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        Arc,
    },
    ModuleMetadata,
};

module! {
    type: RustPmemModule,
    name: "rust_pmem",
    authors: ["rust-blk developers"],
    description: "Rust persistent memory block driver",
    license: "GPL v2",
    params: {
        nowait: bool {
            default: false,
            description: "Set BLK_FEAT_NOWAIT so io_uring submits inline (default: false)",
            perm: 0o444,
        },
    },
}

/// Bytes per sector, the unit of request positions.
const SECTOR_SIZE: u64 = 512;
/// Logical block size of the disks, as the C driver without a BTT.
const LOGICAL_BLOCK_SIZE: u32 = 512;
/// Physical block size: writes are atomic per 8 bytes, but a page is the natural unit.
const PHYSICAL_BLOCK_SIZE: u32 = 4096;
/// Tags per hardware queue. Requests complete inside `queue_rq`, but a plugged batch (io_uring
/// submits a whole ring at once) holds one tag per request until it is dispatched, and a
/// `REQ_NOWAIT` submission that finds no free tag fails with `EAGAIN` (io_uring then punts it to
/// a worker thread): leave room for several deep submitters per CPU.
const QUEUE_DEPTH: u32 = 256;
/// Largest discard or write-zeroes request: bounds the time one request zeroes memory.
const MAX_ZERO_SECTORS: u32 = 1 << 16;

/// Where a request lands in the persistent memory, in bytes.
#[derive(Debug, PartialEq, Eq)]
struct ByteRange {
    offset: usize,
    len: usize,
}

impl ByteRange {
    /// The byte range of a request at `sector` covering `bytes`, if it fits in `size` bytes.
    fn of_request(sector: u64, bytes: u32, size: usize) -> Result<Self> {
        let offset = sector.checked_mul(SECTOR_SIZE).ok_or(ERANGE)?;
        let end = offset.checked_add(u64::from(bytes)).ok_or(ERANGE)?;
        if end > u64::try_from(size)? {
            return Err(ERANGE);
        }
        Ok(Self {
            offset: usize::try_from(offset)?,
            len: usize::try_from(bytes)?,
        })
    }
}

/// One persistent memory disk: the mapping its queue reads and writes.
struct PmemQueue {
    /// Revoked (unmapped) when the namespace is unbound; no request comes after that (the
    /// disk is removed first), so the check per request never fails in practice.
    mem: Arc<Devres<Mapping>>,
    /// `mem`'s size in bytes.
    size: usize,
    /// Known bad sectors: the region's poison found at probe, and what is written to
    /// /sys/block/<disk>/badblocks.
    bb: Arc<BadBlocks>,
    /// The disk's name, for messages.
    name: CString,
    /// Flushes the region: what makes writes durable.
    region: Arc<Devres<RegionFlush>>,
    /// Requests taken in batches (`queue_rqs`), shown in debugfs.
    batched: Arc<Atomic<u64>>,
}

impl PmemQueue {
    /// Carry out `rq` against the persistent memory.
    fn execute(&self, rq: &Request<PmemOps>) -> Result {
        match rq.command() {
            Command::Read => {
                let mut pos = self.range_of(rq)?.offset;
                // Never read known poison: fail without touching the media.
                if self.bb.is_bad(rq.sector(), sectors_of(rq)) {
                    return Err(EIO);
                }
                let mem = self.mem()?;
                rq.for_each_segment(|seg| {
                    seg.copy_from(&*mem, pos)?;
                    pos += seg.len();
                    Ok(())
                })
            }
            Command::Write => {
                let mut pos = self.range_of(rq)?.offset;
                self.clear_bad(rq)?;
                let mem = self.mem()?;
                rq.for_each_segment(|seg| {
                    seg.copy_to(&*mem, pos)?;
                    pos += seg.len();
                    Ok(())
                })?;
                if rq.is_fua() {
                    self.persist()?;
                }
                Ok(())
            }
            // A flush has no position (its sector is -1).
            Command::Flush => self.persist(),
            Command::Discard | Command::WriteZeroes => {
                let range = self.range_of(rq)?;
                self.clear_bad(rq)?;
                self.mem()?.zero(range.offset, range.len)?;
                self.persist()
            }
            Command::Other(_) => Err(EOPNOTSUPP),
        }
    }

    /// The mapping, for the duration of one request (an RCU read-side section, which the
    /// unmapping at unbind waits for); `ENXIO` once the namespace is unbound.
    #[inline]
    fn mem(&self) -> Result<RevocableGuard<'_, Mapping>> {
        self.mem.try_access().ok_or(ENXIO)
    }

    /// Make what was written durable: flush the region (which does not sleep).
    #[inline]
    fn persist(&self) -> Result {
        flush_region(&self.region)
    }

    /// Before new data is written over the sectors of `rq`, drop them from the bad block list.
    #[inline]
    fn clear_bad(&self, rq: &Request<PmemOps>) -> Result {
        let (sector, sectors) = (rq.sector(), sectors_of(rq));
        if self.bb.is_bad(sector, sectors) {
            return self.clear_bad_slow(sector, sectors);
        }
        Ok(())
    }

    /// The media itself is not asked to clear its poison (the C driver's
    /// `nvdimm_clear_poison()` may sleep in firmware calls, which `queue_rq` must not): the data
    /// written over it is what later reads get, and a read of still-poisoned media fails with
    /// `EIO` through the machine-check safe copy.
    #[cold]
    fn clear_bad_slow(&self, sector: u64, sectors: u64) -> Result {
        self.bb.clear(sector, sectors).map_err(|_| EIO)
    }

    /// The bytes `rq` covers; fails if any of them lies beyond the end of the memory.
    #[inline]
    fn range_of(&self, rq: &Request<PmemOps>) -> Result<ByteRange> {
        ByteRange::of_request(rq.sector(), rq.bytes(), self.size)
            .inspect_err(|_| self.warn_beyond_end(rq))
    }

    /// Report (once) a request that does not fit, kept out of the request path.
    #[cold]
    fn warn_beyond_end(&self, rq: &Request<PmemOps>) {
        kernel::pr_warn_once!(
            "{}: request beyond the end: sector {} + {} bytes\n",
            self.name.to_str().unwrap_or("rpmem"),
            rq.sector(),
            rq.bytes()
        );
    }
}

/// Flush the region through `region`; `ENXIO` once the namespace is unbound (no request can
/// come then: the disk is gone first).
fn flush_region(region: &Devres<RegionFlush>) -> Result {
    region.try_access().ok_or(ENXIO)?.flush()
}

/// The number of sectors `rq` covers.
#[inline]
fn sectors_of(rq: &Request<PmemOps>) -> u64 {
    u64::from(rq.bytes()) / SECTOR_SIZE
}

/// The sectors of `pages` pages from page `pgoff` on.
fn page_sectors(pgoff: usize, pages: usize) -> (u64, u64) {
    let per_page = PAGE_SIZE as u64 / SECTOR_SIZE;
    (pgoff as u64 * per_page, pages as u64 * per_page)
}

/// Direct access (DAX) to the memory of an fsdax namespace.
struct PmemDax {
    mem: Arc<Devres<Mapping>>,
    bb: Arc<BadBlocks>,
}

impl dax::Operations for PmemDax {
    fn direct_access(&self, pgoff: usize, nr_pages: usize, mode: dax::AccessMode) -> Result<usize> {
        let nr_pages = nr_pages.max(1);
        let (sector, sectors) = page_sectors(pgoff, nr_pages);
        if !self.bb.is_bad(sector, sectors) {
            return Ok(nr_pages);
        }
        match mode {
            // Like the C driver: known poison is never mapped, ...
            dax::AccessMode::Access => Err(EHWPOISON),
            // ... except page by page, for a recovery write over it.
            dax::AccessMode::RecoveryWrite => Ok(1),
        }
    }

    fn zero_page_range(&self, pgoff: usize, nr_pages: usize) -> Result {
        let (sector, sectors) = page_sectors(pgoff, nr_pages);
        if self.bb.is_bad(sector, sectors) {
            self.bb.clear(sector, sectors).map_err(|_| EIO)?;
        }
        let mem = self.mem.try_access().ok_or(ENXIO)?;
        mem.zero(
            pgoff * PAGE_SIZE,
            nr_pages.checked_mul(PAGE_SIZE).ok_or(ERANGE)?,
        )?;
        mem.flush();
        Ok(())
    }

    fn recovery_write(&self, offset: usize, len: usize) -> Result {
        let first = offset as u64 / SECTOR_SIZE;
        let end = (offset as u64 + len as u64).div_ceil(SECTOR_SIZE);
        if !self.bb.is_bad(first, end - first) {
            return Ok(());
        }
        // Only whole pages can be recovered, as in the C driver. The media's poison is not
        // cleared (see `PmemQueue::clear_bad_slow`).
        if offset % PAGE_SIZE != 0 || len % PAGE_SIZE != 0 {
            return Err(EIO);
        }
        self.bb.clear(first, end - first).map_err(|_| EIO)
    }
}

/// blk-mq operations of the persistent memory disks.
struct PmemOps;

#[vtable]
impl Operations for PmemOps {
    type QueueData = KBox<PmemQueue>;

    fn queue_rq(
        queue: &PmemQueue,
        rq: ARef<Request<Self>>,
        _is_last: bool,
    ) -> Result<(), QueueError<Self>> {
        let status = queue.execute(&rq);
        // We hold the only reference to the request, so ending it cannot fail.
        Request::end(rq, status).map_err(|rq| QueueError::new(rq, EIO))
    }

    /// A task's plugged requests at once: carried out one after the other, and those that
    /// succeed ended together (their tags freed at once), as a completion handler's batch.
    fn queue_rqs(queue: &PmemQueue, list: &mut RequestList<'_, Self>) {
        let mut requests = 0;
        CompletionBatch::run(|batch| {
            while let Some(rq) = list.pop() {
                requests += 1;
                // We hold the only reference to the request, so ending it cannot fail.
                let _ = match queue.execute(&rq) {
                    Ok(()) => Request::end_ok_batched(rq, batch),
                    Err(e) => Request::end(rq, Err(e)),
                };
            }
        });
        queue.batched.add(requests, Relaxed);
    }

    fn commit_rqs(_queue: &PmemQueue) {}

    fn complete(rq: ARef<Request<Self>>) {
        // Requests complete in `queue_rq`; nothing is ever completed asynchronously.
        let _ = Request::end(rq, Ok(()));
    }
}

/// A namespace bound to the driver: its disk, removed when the namespace is unbound, after
/// which the region is flushed, as the C driver does at remove.
struct PmemDisk {
    disk: Option<GenDisk<PmemOps>>,
    region: Arc<Devres<RegionFlush>>,
    _debugfs: BatchDebugfs,
}

/// How many requests a disk took in batches, as a debugfs file.
struct BatchedFile(Arc<Atomic<u64>>);

impl core::fmt::Debug for BatchedFile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        writeln!(f, "{}", self.0.load(Relaxed))
    }
}

/// `/sys/kernel/debug/rust_pmem-<disk>/batched`, removed when dropped; left out if it cannot
/// be created.
struct BatchDebugfs {
    /// The count the disk's queue adds to.
    count: Arc<Atomic<u64>>,
    _file: Option<Pin<KBox<debugfs::File<BatchedFile>>>>,
    _dir: debugfs::Dir,
}

impl BatchDebugfs {
    fn new(disk: &CStr) -> Result<Self> {
        let count = Arc::new(Atomic::new(0), GFP_KERNEL)?;
        let name = CString::try_from_fmt(fmt!("rust_pmem-{}", disk.to_str()?))?;
        let dir = debugfs::Dir::new(&name);
        let file = dir.read_only_file(c"batched", Ok::<_, Error>(BatchedFile(count.clone())));
        Ok(Self {
            count,
            _file: KBox::pin_init(file, GFP_KERNEL).ok(),
            _dir: dir,
        })
    }
}

impl PmemDisk {
    /// Flush the region (remove, shutdown); a failure is only reported.
    fn flush(&self) {
        if let Err(e) = flush_region(&self.region) {
            pr_warn!("flushing the region failed ({:?})\n", e);
        }
    }
}

impl Drop for PmemDisk {
    fn drop(&mut self) {
        // Remove the disk first: its last requests are done then.
        drop(self.disk.take());
        self.flush();
    }
}

/// The nvdimm namespace driver: one disk per bound namespace.
struct RustPmemDriver;

impl nvdimm::Driver for RustPmemDriver {
    type Data<'bound> = PmemDisk;

    fn probe<'bound>(
        ns: &'bound nvdimm::Namespace<device::Core<'_>>,
    ) -> impl PinInit<PmemDisk, Error> + 'bound {
        create_disk(ns, module_parameters::nowait.value())
    }

    fn probe_fsdax<'bound>(
        pfn: &'bound nvdimm::Pfn<device::Core<'_>>,
    ) -> impl PinInit<PmemDisk, Error> + 'bound {
        create_fsdax_disk(pfn, module_parameters::nowait.value())
    }

    fn shutdown<'bound>(_dev: &'bound device::Device<device::Core<'_>>, this: Pin<&PmemDisk>) {
        this.flush();
    }
}

/// What the region needs for durable writes: its flush handle and whether to advertise FUA.
/// Fails for asynchronous regions (virtio-pmem), with a message.
fn region_persistence(
    dev: &device::Device,
    flush: Result<Devres<RegionFlush>>,
    needs_flush: Option<bool>,
) -> Result<(Arc<Devres<RegionFlush>>, bool)> {
    let flush = flush.inspect_err(|e| {
        if *e == EOPNOTSUPP {
            dev_err!(
                dev,
                "asynchronous region (virtio-pmem): its flush is a request to the host, which this driver cannot send; not binding (the C nd_pmem driver serves it)\n"
            );
        }
    })?;
    // Like the C driver: FUA only where writes need a flush to be durable; where that cannot be
    // told, no FUA, and a warning.
    if needs_flush.is_none() {
        dev_warn!(dev, "unable to guarantee persistence of writes\n");
    }
    Ok((Arc::new(flush, GFP_KERNEL)?, needs_flush == Some(true)))
}

/// Report that `range` is claimed already.
fn report_busy(dev: &device::Device, range: kernel::io::pmem::Range) {
    dev_err!(
        dev,
        "persistent memory {:#x}+{:#x} is in use by another driver\n",
        range.start(),
        range.size()
    );
}

/// Create the disk of `ns`: `rpmem<region>[.<n>]`, the C driver's `pmem<region>[.<n>]` with an
/// `r` in front.
fn create_disk(ns: &nvdimm::Namespace<device::Core<'_>>, nowait: bool) -> Result<PmemDisk> {
    let dev: &device::Device<device::Core<'_>> = ns.as_ref();
    let range = ns.range();
    let name = CString::try_from_fmt(fmt!("r{}", ns.disk_name()?.to_str()?))?;
    let (region, fua) = region_persistence(dev, ns.region_flush(), ns.needs_flush())?;
    let mem = ns.map(CString::try_from(dev.name())?).inspect_err(|e| {
        if *e == EBUSY {
            report_busy(dev, range);
        }
    })?;
    let bb = Arc::pin_init(BadBlocks::new(), GFP_KERNEL)?;
    ns.populate_badblocks(&bb);
    let mem = Arc::new(mem, GFP_KERNEL)?;
    build_disk(
        dev,
        DiskParts {
            name,
            mem,
            bb,
            dax: None,
            region,
            fua,
            nowait,
        },
    )
}

/// Create the disk of the fsdax namespace of `pfn`, with a DAX device; named like the disk of
/// the raw namespace, as the C driver does.
fn create_fsdax_disk(pfn: &nvdimm::Pfn<device::Core<'_>>, nowait: bool) -> Result<PmemDisk> {
    let dev: &device::Device<device::Core<'_>> = pfn.as_ref();
    let range = pfn.namespace_range();
    let name = CString::try_from_fmt(fmt!("r{}", pfn.disk_name()?.to_str()?))?;
    let (region, fua) = region_persistence(dev, pfn.region_flush(), pfn.needs_flush())?;
    let mem = pfn
        .map_pages(CString::try_from(dev.name())?)
        .inspect_err(|e| {
            if *e == EBUSY {
                report_busy(dev, range);
            }
        })?;
    let mem = Arc::new(mem, GFP_KERNEL)?;
    let bb = Arc::pin_init(BadBlocks::new(), GFP_KERNEL)?;
    pfn.populate_badblocks(&bb, mem.access(dev)?);
    let mut dax = dax::Device::new(
        dev,
        mem.clone(),
        PmemDax {
            mem: mem.clone(),
            bb: bb.clone(),
        },
    )?;
    // Stores flushed from the CPU cache are durable on such a region: MAP_SYNC is allowed.
    if pfn.is_sync() {
        dax.set_synchronous();
    }
    // Like the C driver: `fsync()`/`msync()` of DAX mappings write the CPU caches back when
    // they are outside the persistence domain.
    dax.set_write_cache(pfn.has_cache());
    build_disk(
        dev,
        DiskParts {
            name,
            mem,
            bb,
            dax: Some(dax),
            region,
            fua,
            nowait,
        },
    )
}

/// What a disk is made of.
struct DiskParts {
    name: CString,
    mem: Arc<Devres<Mapping>>,
    bb: Arc<BadBlocks>,
    /// The DAX device of an fsdax namespace.
    dax: Option<dax::Device>,
    /// How to flush the region, and whether writes need it to be durable (FUA and a write
    /// cache).
    region: Arc<Devres<RegionFlush>>,
    fua: bool,
    nowait: bool,
}

/// The disk's limits and features, for `capacity_sectors` sectors.
fn disk_builder(parts: &DiskParts, capacity_sectors: u64) -> Result<GenDiskBuilder> {
    Ok(GenDiskBuilder::new()
        .badblocks(parts.bb.clone())
        .capacity_sectors(capacity_sectors)
        .logical_block_size(LOGICAL_BLOCK_SIZE)?
        .physical_block_size(PHYSICAL_BLOCK_SIZE)?
        .write_cache(parts.fua)
        .synchronous(true)
        .nowait(parts.nowait)
        // Like the bio-based C driver: no I/O statistics (a clock read and per-CPU counters per
        // request) and no merge attempt per bio; both can be turned on in sysfs (`iostats`,
        // `nomerges`).
        .io_stat(false)
        .merges(false)
        .max_hw_sectors(u32::MAX)
        .max_discard_sectors(MAX_ZERO_SECTORS)
        .max_write_zeroes_sectors(MAX_ZERO_SECTORS))
}

/// Make the disk of `parts`.
fn build_disk(dev: &device::Device<device::Core<'_>>, parts: DiskParts) -> Result<PmemDisk> {
    let (range, size) = parts.mem.access(dev).map(|m| (m.range(), m.size()))?;
    let capacity_sectors = u64::try_from(size)? / SECTOR_SIZE;
    let nr_hw_queues = kernel::cpu::nr_cpu_ids();
    let tagset = Arc::pin_init(TagSet::new(nr_hw_queues, QUEUE_DEPTH, 1), GFP_KERNEL)?;
    let (has_dax, fua, nowait) = (parts.dax.is_some(), parts.fua, parts.nowait);
    let mut builder = disk_builder(&parts, capacity_sectors)?.parent(dev);
    let DiskParts {
        name,
        mem,
        bb,
        dax,
        region,
        ..
    } = parts;
    let debugfs = BatchDebugfs::new(&name)?;
    let queue = KBox::new(
        PmemQueue {
            mem,
            size,
            bb,
            name: CString::try_from(&*name)?,
            region: region.clone(),
            batched: debugfs.count.clone(),
        },
        GFP_KERNEL,
    )?;
    if let Some(dax) = dax {
        builder = builder.dax(dax);
    }
    let disk =
        builder.build_owned::<RustPmemModule, _>(fmt!("{}", name.to_str()?), tagset, queue)?;
    dev_info!(
        dev,
        "{}: {:#x}+{:#x} ({} MiB), nowait={}, dax={}, fua={}\n",
        name.to_str()?,
        range.start(),
        range.size(),
        range.size() >> 20,
        nowait,
        has_dax,
        fua
    );
    Ok(PmemDisk {
        disk: Some(disk),
        region,
        _debugfs: debugfs,
    })
}

/// The module: registers the namespace driver.
#[pin_data]
struct RustPmemModule {
    #[pin]
    _driver: driver::Registration<nvdimm::Adapter<RustPmemDriver>>,
}

impl kernel::InPlaceModule for RustPmemModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            _driver <- driver::Registration::new(<Self as ModuleMetadata>::NAME, module),
        })
    }
}

#[kunit_tests(rust_pmem)]
mod tests {
    use super::*;

    const SIZE: usize = 1 << 20;

    #[test]
    fn range_inside() {
        assert_eq!(
            ByteRange::of_request(8, 4096, SIZE),
            Ok(ByteRange {
                offset: 4096,
                len: 4096
            })
        );
    }

    #[test]
    fn range_up_to_the_end() {
        let last = (SIZE as u64 - 4096) / SECTOR_SIZE;
        assert!(ByteRange::of_request(last, 4096, SIZE).is_ok());
    }

    #[test]
    fn range_beyond_the_end() {
        let last = (SIZE as u64 - 4096) / SECTOR_SIZE;
        assert_eq!(ByteRange::of_request(last + 1, 4096, SIZE), Err(ERANGE));
        assert_eq!(ByteRange::of_request(u64::MAX, 512, SIZE), Err(ERANGE));
    }
}
