//! This network namespace: its interfaces' names, its cookie, and the SMC-R link groups that belong to it (the kernel's
//! SMC-R link group list is global, every namespace's at once).

use rustix::net::netdevice;
use smcrun_kernel::smc_genl::LinkGroup;
use smcrun_sys::sock;
use std::os::fd::{AsRawFd, OwnedFd};

/// A datagram socket of this namespace, to ask the kernel about the namespace through.
fn socket() -> Option<OwnedFd> {
    use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
    socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .ok()
}

/// This network namespace's cookie (`SO_NETNS_COOKIE`, Linux 5.14+), to keep the kernel's global
/// SMC-R link group list to this namespace; `None` when the kernel cannot say.
pub fn cookie() -> Option<u64> {
    // Neither rustix nor std has SO_NETNS_COOKIE; smcrun-sys's getsockopt takes any option.
    const SO_NETNS_COOKIE: libc::c_int = 71;
    let fd = socket()?;
    let mut cookie = [0u8; 8];
    let len = sock::get_bytes(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        SO_NETNS_COOKIE,
        &mut cookie,
    );
    (len == Ok(cookie.len())).then_some(u64::from_ne_bytes(cookie))
}

/// The name of network interface `index` in this namespace ("lo"), `[index]` when it has none
/// here, `None` for index 0 (no interface).
pub fn ifname(index: u32) -> Option<String> {
    if index == 0 {
        return None;
    }
    // SIOCGIFNAME on a socket of this namespace, as the C library's if_indextoname asks.
    let name = socket().and_then(|fd| netdevice::index_to_name(fd, index).ok());
    Some(name.unwrap_or_else(|| format!("[{index}]")))
}

/// The SMC-R link groups of the namespace with cookie `ours` (all of them when the kernel does
/// not say whose they are, or this kernel cannot tell our namespace's cookie).
pub fn local_groups(all: Vec<LinkGroup>, ours: Option<u64>) -> Vec<LinkGroup> {
    all.into_iter()
        .filter(|g| match (g.net_cookie, ours) {
            (Some(theirs), Some(ours)) => theirs == ours,
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use smcrun_kernel::smc_genl::parse_link_groups;

    #[test]
    fn groups_of_other_namespaces_are_left_out() {
        let raw = crate::fixtures::raw("smcr", "smc_GET_LGR_SMCR");
        let mut groups = parse_link_groups(&raw).unwrap();
        let n = groups.len();
        let cookie = groups[0].net_cookie.expect("6.12 sends the netns cookie");
        groups[0].net_cookie = Some(cookie + 1);
        assert_eq!(local_groups(groups.clone(), Some(cookie)).len(), n - 1);
        assert_eq!(local_groups(groups, None).len(), n);
    }

    #[test]
    fn loopback_has_a_name() {
        assert_eq!(ifname(1).as_deref(), Some("lo"));
        assert_eq!(ifname(0), None);
    }

    #[test]
    fn this_namespace_has_a_cookie() {
        // Linux 5.14+ (every kernel this project runs on) answers SO_NETNS_COOKIE.
        assert!(cookie().is_some());
    }
}
