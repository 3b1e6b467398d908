// SPDX-License-Identifier: GPL-2.0

//! The sysfs attributes of a controller's device, `/sys/class/rnvme/rnvme<C>` (which is also
//! `/sys/block/rnvme<C>n<N>/device`): the C driver's controller attributes
//! (`/sys/class/nvme/nvme<C>/`, drivers/nvme/host/sysfs.c), with its formats, that mean
//! something for a PCIe controller.

use crate::{ctrl::CtrlState, ident::on_off, ns::Namespaces};
use kernel::{
    fmt::Write,
    prelude::*,
    str::{kstrtobool_bytes, Formatter},
    sync::atomic::Relaxed,
};

/// The readable attributes, in the C driver's order; `passthru_err_log_enabled` is written
/// too ([`WRITE_ATTRIBUTES`]). Not provided: C's `admin_timeout` and `io_timeout` (here
/// module parameters), and what C hides for a PCIe controller (`delete_controller`, the
/// fabrics ones).
pub(crate) const ATTRIBUTES: &[&CStr] = &[
    c"model",
    c"serial",
    c"firmware_rev",
    c"cntlid",
    c"transport",
    c"subsysnqn",
    c"address",
    c"state",
    c"numa_node",
    c"queue_count",
    c"sqsize",
    c"kato",
    c"cntrltype",
    c"dctype",
    c"quirks",
    c"passthru_err_log_enabled",
];

/// The attributes that take writes: `echo 1 >` the write-only ones resets the controller
/// (C's `nvme_reset_ctrl_sync()`, with its errors) or rescans its namespaces (done when the
/// write returns; C queues the scan); what is written to them does not matter, as for C.
/// `passthru_err_log_enabled` (also in [`ATTRIBUTES`]) takes a boolean as C's `kstrtobool()`
/// reads it (`on`, `off`, `1`, `0`, `y`, `n`, ...), `EINVAL` for anything else.
pub(crate) const WRITE_ATTRIBUTES: &[&CStr] = &[
    c"reset_controller",
    c"rescan_controller",
    c"passthru_err_log_enabled",
];

/// Take the write of `buf` to attribute `index` of [`WRITE_ATTRIBUTES`] of the controller
/// of `ns`.
pub(crate) fn store(ns: &Namespaces, index: usize, buf: &[u8]) -> Result {
    match WRITE_ATTRIBUTES.get(index).ok_or(EINVAL)?.to_bytes() {
        b"reset_controller" => ns.ctrl.reset_sync(),
        b"rescan_controller" => ns.scan(),
        b"passthru_err_log_enabled" => {
            let on = kstrtobool_bytes(buf)?;
            ns.ctrl.passthru_err_log.store(on, Relaxed);
            Ok(())
        }
        _ => Err(EINVAL),
    }
}

/// Write attribute `index` of [`ATTRIBUTES`] of the controller of `ns` into `buf` (a page);
/// returns its length.
pub(crate) fn show(ns: &Namespaces, index: usize, buf: &mut [u8]) -> Result<usize> {
    let name = ATTRIBUTES.get(index).ok_or(EINVAL)?.to_bytes();
    let info = &ns.info;
    match name {
        b"model" => return show_id_string(&info.model, buf),
        b"serial" => return show_id_string(&info.serial, buf),
        b"firmware_rev" => return show_id_string(&info.firmware_rev, buf),
        b"subsysnqn" => return show_subsysnqn(ns, buf),
        _ => {}
    }
    let mut f = Formatter::new(buf);
    let ctrl = &ns.ctrl;
    match name {
        b"cntlid" => writeln!(f, "{}", info.cntlid),
        b"transport" => writeln!(f, "pcie"),
        b"address" => writeln!(f, "{}", ns.pci().name().to_str().map_err(|_| EINVAL)?),
        b"state" => writeln!(f, "{}", state_name(ctrl.state())),
        // C's `%d` of `dev_to_node()`: -1 on no particular node.
        b"numa_node" => match ns.pci().numa_node() {
            Some(node) => writeln!(f, "{node}"),
            None => writeln!(f, "-1"),
        },
        // The I/O queues and the admin queue.
        b"queue_count" => writeln!(f, "{}", ctrl.queues.len() + 1),
        // 0's based, as the controller counts.
        b"sqsize" => writeln!(f, "{}", ctrl.queues.depth().saturating_sub(1)),
        // No keep alive over PCIe.
        b"kato" => writeln!(f, "0"),
        b"cntrltype" => writeln!(f, "{}", cntrltype_name(info.cntrltype)),
        b"dctype" => writeln!(f, "{}", dctype_name(info.dctype)),
        // The C driver's quirk names; the only one the driver has.
        b"quirks" if info.bogus_nid => writeln!(f, "bogus_nid"),
        b"quirks" => writeln!(f, "none"),
        b"passthru_err_log_enabled" => {
            writeln!(f, "{}", on_off(ctrl.passthru_err_log.load(Relaxed)))
        }
        _ => return Err(EINVAL),
    }
    .map_err(|_| EINVAL)?;
    Ok(f.bytes_written())
}

/// C's state names; `Suspended` (for a system sleep, which C has no state for) shows as the
/// reset it ends with.
fn state_name(state: CtrlState) -> &'static str {
    match state {
        CtrlState::Live => "live",
        CtrlState::Resetting | CtrlState::Suspended => "resetting",
        CtrlState::Deleting => "deleting",
        CtrlState::Dead => "dead",
    }
}

fn cntrltype_name(cntrltype: u8) -> &'static str {
    match cntrltype {
        1 => "io",
        2 => "discovery",
        3 => "admin",
        _ => "reserved",
    }
}

fn dctype_name(dctype: u8) -> &'static str {
    match dctype {
        0 => "none",
        1 => "ddc",
        2 => "cdc",
        _ => "reserved",
    }
}

/// The C driver's (NVMF_NQN_SIZE) bound of an NQN the controller reports.
const NQN_SIZE: usize = 223;

/// C's `nvme_init_subnqn()`: the NQN the controller reports, else one made of the vendor ids,
/// the serial number and the model (both with their padding).
fn show_subsysnqn(ns: &Namespaces, buf: &mut [u8]) -> Result<usize> {
    let info = &ns.info;
    let len = info
        .subnqn
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(info.subnqn.len());
    if len > 0 && len < NQN_SIZE {
        return show_id_string(&info.subnqn[..len], buf);
    }
    let mut f = Formatter::new(buf);
    write!(
        f,
        "nqn.2014.08.org.nvmexpress:{:04x}{:04x}",
        info.vid, info.ssvid
    )
    .map_err(|_| EINVAL)?;
    let start = f.bytes_written();
    let end = start + info.serial.len() + info.model.len();
    let out = buf.get_mut(start..=end).ok_or(EINVAL)?;
    let (serial, rest) = out.split_at_mut(info.serial.len());
    serial.copy_from_slice(&info.serial);
    rest[..info.model.len()].copy_from_slice(&info.model);
    rest[info.model.len()] = b'\n';
    // C's `%s` stops at a NUL in the serial number or model.
    let shown = buf[..end].iter().position(|&b| b == 0).unwrap_or(end);
    if shown < end {
        buf[shown] = b'\n';
        return Ok(shown + 1);
    }
    Ok(end + 1)
}

/// Write an Identify string as the C driver shows it: every byte up to the first NUL (the
/// padding spaces too), then a newline.
pub(crate) fn show_id_string(field: &[u8], buf: &mut [u8]) -> Result<usize> {
    let len = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    let out = buf.get_mut(..=len).ok_or(EINVAL)?;
    out[..len].copy_from_slice(&field[..len]);
    out[len] = b'\n';
    Ok(len + 1)
}
