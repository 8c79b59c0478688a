//! This network namespace: its interfaces' names, its cookie, and the SMC-R link groups that belong to it (the kernel's
//! SMC-R link group list is global, every namespace's at once).

use smcrun_kernel::smc_genl::LinkGroup;

/// This network namespace's cookie (`SO_NETNS_COOKIE`, Linux 5.14+), to keep the kernel's global
/// SMC-R link group list to this namespace; `None` when the kernel cannot say.
pub fn cookie() -> Option<u64> {
    const SO_NETNS_COOKIE: libc::c_int = 71;
    // SAFETY: plain socket/getsockopt/close calls on a socket this function owns.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let mut cookie: u64 = 0;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        let rc = libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        );
        libc::close(fd);
        (rc == 0 && len as usize == std::mem::size_of::<u64>()).then_some(cookie)
    }
}

/// The name of network interface `index` in this namespace ("lo"), `[index]` when it has none
/// here, `None` for index 0 (no interface).
pub fn ifname(index: u32) -> Option<String> {
    if index == 0 {
        return None;
    }
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return Some(format!("[{index}]"));
    }
    // SAFETY: on success the buffer holds a NUL-terminated name.
    Some(
        unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
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
