//! Against the running kernel: the plumbing must work with a real netlink peer (nlctrl exists on
//! every Linux), and the SMC/RDMA interfaces must either answer or say which module is missing —
//! never time out, never report a malformed reply.

use smcrun_kernel::genl::{self, GENL_HEADER_LEN};
use smcrun_kernel::nl::{self, Protocol};
use smcrun_kernel::{attr, rdma, smc_genl, sock_diag, Error};

#[test]
fn resolves_nlctrl_itself() {
    let f = genl::resolve("nlctrl", "genetlink").expect("nlctrl must resolve on any Linux");
    assert_eq!(f.id, 16);
    assert!(f.version >= 1);
}

#[test]
fn unknown_family_is_reported_as_missing_module() {
    let e = genl::resolve("SMCRUN_NOFAM", "smcrun_test_mod").unwrap_err();
    assert!(
        matches!(
            e,
            Error::ModuleMissing {
                module: "smcrun_test_mod",
                ..
            }
        ),
        "{e}"
    );
    // No kernel has this module: the message never says `modprobe` (except where the module tree
    // is missing, as in a container, and it says so).
    let Error::ModuleMissing { availability, .. } = &e else {
        unreachable!()
    };
    assert!(
        !matches!(
            availability,
            smcrun_kernel::kmod::Availability::Loadable { .. }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .ends_with(&availability.advice("smcrun_test_mod")),
        "{e}"
    );
}

#[test]
fn multi_message_dump_of_all_families() {
    // CTRL_CMD_GETFAMILY as a dump: one message per registered family, then NLMSG_DONE.
    let body = genl::body(3, 1, attr::Writer::new());
    let raw = nl::dump_raw(Protocol::Generic, 16, &body, "nlctrl family dump").unwrap();
    let messages = nl::data_messages(&raw, "nlctrl family dump").unwrap();
    assert!(!messages.is_empty());
    let mut names = Vec::new();
    for m in &messages {
        let attrs = attr::parse(&m.payload[GENL_HEADER_LEN..], "family").unwrap();
        if let Some(a) = attrs.iter().find(|a| a.kind == 2) {
            names.push(a.string());
        }
    }
    assert!(names.iter().any(|n| n == "nlctrl"), "{names:?}");
}

fn answered_or_missing<T: std::fmt::Debug>(r: Result<T, Error>, module: &str) {
    match r {
        Ok(_) => {}
        Err(Error::ModuleMissing { module: m, .. }) => assert_eq!(m, module),
        Err(e @ Error::NotPermitted { .. }) => eprintln!("not permitted here: {e}"),
        Err(e) => panic!("expected an answer or `{module}` missing, got: {e}"),
    }
}

#[test]
fn smc_interfaces_answer_or_name_the_missing_module() {
    answered_or_missing(sock_diag::dump(0xf), "smc_diag");
    match smc_genl::SmcGenl::open() {
        Ok(c) => {
            c.stats().unwrap();
            c.fallback_stats().unwrap();
            c.sys_info().unwrap();
        }
        Err(e) => answered_or_missing::<()>(Err(e), "smc"),
    }
    answered_or_missing(smcrun_kernel::pnet::Pnet::open().map(drop), "smc");
    answered_or_missing(rdma::devices(), "ib_core");
}

#[test]
fn kernel_refusal_keeps_errno_and_explanation() {
    // Family names are at most 15 characters: nlctrl's policy refuses longer ones with EINVAL.
    let e = genl::resolve("SMCRUN_FAR_TOO_LONG_NAME", "x").unwrap_err();
    assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    eprintln!("kernel said: {e}");
}

#[test]
fn tcp_sock_diag_finds_our_listener_and_connection() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let cport = client.local_addr().unwrap().port();
    let raw = sock_diag::tcp_dump_raw(libc::AF_INET as u8).unwrap();
    let tcp = sock_diag::parse_tcp(&raw).unwrap();
    assert!(
        tcp.iter()
            .any(|t| t.state == 10 && t.local == listener.local_addr().unwrap()),
        "listener on {port} not in {tcp:?}"
    );
    assert!(
        tcp.iter().any(|t| t.state == 1
            && t.local == client.local_addr().unwrap()
            && t.peer.port() == port),
        "connection from {cport} not in {tcp:?}"
    );
}
