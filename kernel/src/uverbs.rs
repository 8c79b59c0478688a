//! The limits of an RDMA device (how many QPs, CQs, MRs, PDs and SRQs it can hold), which the RDMA
//! netlink does not report: they are device attributes only the verbs interface answers. Asked
//! through `/dev/infiniband/uverbsN` (module `ib_uverbs`) with the two legacy write commands
//! rdma-core's `ibv_query_device` uses: GET_CONTEXT (a user context, released on close) and
//! QUERY_DEVICE.
//!
//! A device whose driver needs its own data to open a context (most hardware drivers ask for
//! some), a missing `ib_uverbs` or a device node this user may not open give an error; the
//! caller then says the maximums are unknown.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

use serde::Serialize;

use crate::error::Error;

/// `IB_USER_VERBS_CMD_GET_CONTEXT`.
const CMD_GET_CONTEXT: u32 = 0;
/// `IB_USER_VERBS_CMD_QUERY_DEVICE`.
const CMD_QUERY_DEVICE: u32 = 1;
/// `struct ib_uverbs_get_context_resp` without driver data: async_fd, num_comp_vectors.
const CONTEXT_RESP_LEN: usize = 8;
/// `struct ib_uverbs_query_device_resp`.
pub const QUERY_DEVICE_RESP_LEN: usize = 176;

/// The maximums of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Queue pairs.
    pub max_qp: u32,
    /// Completion queues.
    pub max_cq: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Protection domains.
    pub max_pd: u32,
    /// Shared receive queues.
    pub max_srq: u32,
}

/// Read the limits out of a `struct ib_uverbs_query_device_resp`: five u64 (firmware version,
/// GUIDs, max MR size, page sizes), then u32 fields from vendor_id on; max_qp is the 4th of
/// them, max_cq the 9th, max_mr the 11th, max_pd the 12th, max_srq the 30th.
pub fn parse_query_device(resp: &[u8]) -> Result<Limits, Error> {
    if resp.len() < QUERY_DEVICE_RESP_LEN {
        return Err(Error::malformed(
            "uverbs QUERY_DEVICE response",
            format!("needs {QUERY_DEVICE_RESP_LEN} bytes, got {}", resp.len()),
        ));
    }
    let field = |i: usize| {
        let at = 40 + 4 * i;
        u32::from_ne_bytes([resp[at], resp[at + 1], resp[at + 2], resp[at + 3]])
    };
    Ok(Limits {
        max_qp: field(3),
        max_cq: field(8),
        max_mr: field(10),
        max_pd: field(11),
        max_srq: field(29),
    })
}

/// The uverbs node (`uverbs0`) of RDMA device `ibdev`, from `/sys/class/infiniband_verbs`.
fn node_of(ibdev: &str) -> Result<String, Error> {
    let missing = || Error::module_missing(format!("verbs device of {ibdev}"), "ib_uverbs");
    let entries = fs::read_dir("/sys/class/infiniband_verbs").map_err(|_| missing())?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("uverbs") {
            continue;
        }
        if let Ok(dev) = fs::read_to_string(e.path().join("ibdev")) {
            if dev.trim_end() == ibdev {
                return Ok(name);
            }
        }
    }
    // ib_uverbs is there, but not for this device (a driver without user verbs).
    Err(Error::from_errno(
        format!("verbs device of {ibdev}"),
        libc::ENODEV,
    ))
}

/// One legacy write command: header {command, in_words, out_words} and the response pointer;
/// the kernel writes the response into `resp`.
fn command(file: &mut fs::File, cmd: u32, resp: &mut [u8], what: &str) -> Result<(), Error> {
    let mut buf = [0u8; 16];
    buf[0..4].copy_from_slice(&cmd.to_ne_bytes());
    buf[4..6].copy_from_slice(&4u16.to_ne_bytes()); // 16 bytes in, header included
    let out_words = u16::try_from(resp.len() / 4).unwrap_or(u16::MAX);
    buf[6..8].copy_from_slice(&out_words.to_ne_bytes());
    buf[8..16].copy_from_slice(&(resp.as_mut_ptr() as u64).to_ne_bytes());
    match file.write(&buf) {
        Ok(16) => Ok(()),
        Ok(n) => Err(Error::malformed(
            what,
            format!("the kernel took {n} of 16 bytes"),
        )),
        Err(e) => Err(Error::from_errno(
            what,
            e.raw_os_error().unwrap_or(libc::EIO),
        )),
    }
}

/// The limits of RDMA device `ibdev` (e.g. "rxe_lo").
pub fn limits(ibdev: &str) -> Result<Limits, Error> {
    let node = node_of(ibdev)?;
    let what = format!("uverbs query of {ibdev} (/dev/infiniband/{node})");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(format!("/dev/infiniband/{node}"))
        .map_err(|e| Error::from_errno(&what, e.raw_os_error().unwrap_or(libc::EIO)))?;
    let mut ctx = [0u8; CONTEXT_RESP_LEN];
    command(&mut file, CMD_GET_CONTEXT, &mut ctx, &what)?;
    // The context comes with an event fd of its own; it is not needed here.
    let async_fd = i32::from_ne_bytes([ctx[0], ctx[1], ctx[2], ctx[3]]);
    if async_fd >= 0 && async_fd != file.as_raw_fd() {
        // the kernel just installed this fd for this process; nothing else uses it
        let _ = smcrun_sys::sock::close(async_fd);
    }
    let mut resp = [0u8; QUERY_DEVICE_RESP_LEN];
    command(&mut file, CMD_QUERY_DEVICE, &mut resp, &what)?;
    parse_query_device(&resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_at_their_offsets() {
        let mut resp = vec![0u8; QUERY_DEVICE_RESP_LEN];
        for (i, v) in [
            (3usize, 0x10000u32),
            (8, 0x4000),
            (10, 0x40000),
            (11, 0x7ffc),
            (29, 0x40000),
        ] {
            resp[40 + 4 * i..44 + 4 * i].copy_from_slice(&v.to_ne_bytes());
        }
        // neighbours that must not leak in
        resp[40 + 4 * 4..44 + 4 * 4].copy_from_slice(&7u32.to_ne_bytes());
        let l = parse_query_device(&resp).unwrap();
        assert_eq!(
            l,
            Limits {
                max_qp: 0x10000,
                max_cq: 0x4000,
                max_mr: 0x40000,
                max_pd: 0x7ffc,
                max_srq: 0x40000
            }
        );
    }

    #[test]
    fn short_responses_are_errors() {
        assert!(parse_query_device(&[0u8; 100]).is_err());
    }

    #[test]
    fn an_unknown_device_has_no_verbs_node() {
        let e = limits("smcrun-no-such-device").unwrap_err();
        if std::path::Path::new("/sys/class/infiniband_verbs").exists() {
            assert_eq!(e.errno(), Some(libc::ENODEV), "{e}");
        } else {
            assert!(e.is_module_missing(), "{e}");
            let modprobe = e.to_string().contains("modprobe ib_uverbs");
            let loadable = matches!(
                crate::kmod::availability("ib_uverbs"),
                crate::kmod::Availability::Loadable { .. }
                    | crate::kmod::Availability::Unknown { .. }
            );
            assert_eq!(modprobe, loadable, "{e}");
        }
    }
}
