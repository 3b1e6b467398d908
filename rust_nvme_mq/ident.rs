// SPDX-License-Identifier: GPL-2.0

//! Namespace identity: the identifiers of a namespace (EUI-64, NGUID, UUID, command set) and
//! the disk attributes that show them, `/sys/block/rnvme<C>n<N>/{wwid,uuid,nguid,eui,csi,nsid,
//! metadata_bytes}`, with the C driver's values and formats (`drivers/nvme/host/sysfs.c`):
//! udev's `/dev/disk/by-id` rules, `lsblk -o WWN` and multipath tools read them.
//!
//! The identifiers come from the Namespace Identification Descriptor list (Identify CNS 03h),
//! and what it lacks from Identify Namespace (EUI64 and NGUID fields), as C's
//! `nvme_identify_ns_descs()` and `nvme_ns_info_from_identify()` take them.

use crate::cmd::NsDescList;
use kernel::{dma::CoherentView, fmt::Write, io::io_read, prelude::*, str::Formatter};

/// Namespace Identification Descriptor types, and their identifier lengths.
const NIDT_EUI64: u8 = 1;
const NIDT_NGUID: u8 = 2;
const NIDT_UUID: u8 = 3;
const NIDT_CSI: u8 = 4;
/// A descriptor's header: type, length, two reserved bytes.
const DESC_HEADER: usize = 4;

/// The identifiers of a namespace (C's `struct nvme_ns_ids`); zero: none.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NsIds {
    pub(crate) eui64: [u8; 8],
    pub(crate) nguid: [u8; 16],
    pub(crate) uuid: [u8; 16],
    pub(crate) csi: u8,
}

impl NsIds {
    /// The identifiers of a Namespace Identification Descriptor list. A descriptor of a known
    /// type with the wrong length ends the list (C fails the namespace there; here it keeps
    /// the identifiers read so far, with a warning); unknown types are skipped.
    pub(crate) fn from_descriptors(list: CoherentView<'_, NsDescList>) -> Result<Self> {
        let byte = |i: usize| -> Result<u8> { Ok(io_read!(list, .0[try: i])) };
        let mut ids = Self::default();
        let mut pos = 0;
        while pos + DESC_HEADER <= size_of::<NsDescList>() {
            let (nidt, nidl) = (byte(pos)?, usize::from(byte(pos + 1)?));
            if nidl == 0 {
                break;
            }
            let id = pos + DESC_HEADER;
            let end = id + nidl;
            if end > size_of::<NsDescList>() {
                break;
            }
            let target: &mut [u8] = match nidt {
                NIDT_EUI64 => &mut ids.eui64,
                NIDT_NGUID => &mut ids.nguid,
                NIDT_UUID => &mut ids.uuid,
                NIDT_CSI => core::slice::from_mut(&mut ids.csi),
                _ => &mut [],
            };
            if !target.is_empty() {
                if target.len() != nidl {
                    pr_warn!("namespace descriptor {} has length {}\n", nidt, nidl);
                    break;
                }
                for (k, b) in target.iter_mut().enumerate() {
                    *b = byte(id + k)?;
                }
            }
            pos = end;
        }
        Ok(ids)
    }

    /// Take the EUI-64 and NGUID of Identify Namespace where the descriptors gave none.
    pub(crate) fn fill(&mut self, eui64: [u8; 8], nguid: [u8; 16]) {
        if is_zero(&self.eui64) {
            self.eui64 = eui64;
        }
        if is_zero(&self.nguid) {
            self.nguid = nguid;
        }
    }
}

/// What the disk attributes of a namespace show: its identifiers, its id, and the
/// controller's vendor, serial and model (the `wwid` of a namespace without identifiers).
pub(crate) struct Identity {
    pub(crate) ids: NsIds,
    pub(crate) nsid: u32,
    pub(crate) vid: u16,
    pub(crate) serial: [u8; 20],
    pub(crate) model: [u8; 40],
}

/// The disk attributes, in the C driver's order (its `nuse`, which reads Identify Namespace
/// at each read, is not provided). The last one, `passthru_err_log_enabled`, is the
/// namespace's setting, not an identity: shown and written by `ns.rs`.
pub(crate) const DISK_ATTRIBUTES: &[&CStr] = &[
    c"wwid",
    c"uuid",
    c"nguid",
    c"eui",
    c"csi",
    c"nsid",
    c"metadata_bytes",
    c"passthru_err_log_enabled",
];
const WWID: usize = 0;
const UUID: usize = 1;
const NGUID: usize = 2;
const EUI: usize = 3;
const CSI: usize = 4;
const NSID: usize = 5;
const METADATA_BYTES: usize = 6;
/// The index of `passthru_err_log_enabled` in [`DISK_ATTRIBUTES`].
pub(crate) const PASSTHRU_ERR_LOG: usize = 7;

/// C's form of a boolean attribute (`passthru_err_log_enabled`).
pub(crate) fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

impl Identity {
    /// Whether attribute `index` of [`DISK_ATTRIBUTES`] shows (C hides the identifiers a
    /// namespace does not have: `uuid` without a UUID or NGUID, `nguid`, `eui`).
    pub(crate) fn visible(&self, index: usize) -> bool {
        let ids = &self.ids;
        match index {
            UUID => !is_zero(&ids.uuid) || !is_zero(&ids.nguid),
            NGUID => !is_zero(&ids.nguid),
            EUI => !is_zero(&ids.eui64),
            _ => index < DISK_ATTRIBUTES.len(),
        }
    }

    /// Write attribute `index` into `buf`; returns its length.
    pub(crate) fn show(&self, index: usize, buf: &mut [u8]) -> Result<usize> {
        let mut f = Formatter::new(buf);
        let ids = &self.ids;
        match index {
            WWID => self.write_wwid(&mut f),
            // C shows the NGUID (with a warning once) when there is no UUID.
            UUID if is_zero(&ids.uuid) => writeln!(f, "{}", Uuid(&ids.nguid)),
            UUID => writeln!(f, "{}", Uuid(&ids.uuid)),
            NGUID => writeln!(f, "{}", Uuid(&ids.nguid)),
            EUI => writeln!(f, "{}", Spaced(&ids.eui64)),
            CSI => writeln!(f, "{}", ids.csi),
            NSID => writeln!(f, "{}", self.nsid),
            // The driver serves only formats without metadata.
            METADATA_BYTES => writeln!(f, "0"),
            _ => return Err(EINVAL),
        }
        .map_err(|_| EINVAL)?;
        Ok(f.bytes_written())
    }

    /// C's `wwid_show()`: the first identifier the namespace has, else one made of the
    /// controller's vendor, serial and model (trailing spaces and NULs cut) and the nsid.
    fn write_wwid(&self, f: &mut Formatter<'_>) -> core::fmt::Result {
        let ids = &self.ids;
        if !is_zero(&ids.uuid) {
            writeln!(f, "uuid.{}", Uuid(&ids.uuid))
        } else if !is_zero(&ids.nguid) {
            writeln!(f, "eui.{}", Hex(&ids.nguid))
        } else if !is_zero(&ids.eui64) {
            writeln!(f, "eui.{}", Hex(&ids.eui64))
        } else {
            writeln!(
                f,
                "nvme.{:04x}-{}-{}-{:08x}",
                self.vid,
                Hex(trimmed(&self.serial)),
                Hex(trimmed(&self.model)),
                self.nsid
            )
        }
    }
}

fn is_zero(id: &[u8]) -> bool {
    id.iter().all(|&b| b == 0)
}

/// `id` without trailing spaces and NULs.
fn trimmed(id: &[u8]) -> &[u8] {
    let len = id
        .iter()
        .rposition(|&b| b != b' ' && b != 0)
        .map_or(0, |i| i + 1);
    &id[..len]
}

/// Bytes as lowercase hex without separators (`%*phN`).
struct Hex<'a>(&'a [u8]);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// Bytes as lowercase hex separated by spaces (`%*ph`).
struct Spaced<'a>(&'a [u8]);

impl core::fmt::Display for Spaced<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            write!(f, "{}{b:02x}", if i == 0 { "" } else { " " })?;
        }
        Ok(())
    }
}

/// 16 bytes as a UUID, in order (`%pU`): 8-4-4-4-12 lowercase hex digits.
struct Uuid<'a>(&'a [u8; 16]);

impl core::fmt::Display for Uuid<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.0;
        write!(
            f,
            "{}-{}-{}-{}-{}",
            Hex(&b[0..4]),
            Hex(&b[4..6]),
            Hex(&b[6..8]),
            Hex(&b[8..10]),
            Hex(&b[10..16])
        )
    }
}

/// For messages: the identifiers, as `nvme list -v` would name them.
impl core::fmt::Display for NsIds {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "uuid {} nguid {} eui64 {}",
            Uuid(&self.uuid),
            Hex(&self.nguid),
            Hex(&self.eui64)
        )
    }
}
