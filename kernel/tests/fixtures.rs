//! Replays raw netlink replies captured from a real SMC kernel (`smcrun __capture`, run by the VM
//! test bed: `tests/vm/run --capture-fixtures`) through the same parsers live queries use, and
//! checks what the VM scenario guarantees:
//!
//! * `fixtures/smcr/`: redis-server and idle redis-benchmark clients on port 6379, all under
//!   smcrun, over soft-RoCE with the UEID `SMCRUN-TEST` set → open SMC-R connections.
//! * `fixtures/fallback/`: the same without the UEID plus one plain client → client NOSMCDEV,
//!   server PEERDECL/NOSMCDEV and server PEERNOSMC fallbacks.
//! * `fixtures/smcd/`: the same scenario as `smcr/` on the project's SMC-D kernel
//!   (`tests/vm/run --kernel smcd --capture-fixtures`) → open SMC-Dv2 connections over
//!   loopback-ism (soft-RoCE is there too, unused).
//! * `fixtures/smcd-fallback/`: `fallback/`'s scenario on that kernel → server NOUEID, client
//!   PEERDECL/NOUEID and server PEERNOSMC fallbacks.
//! * `fixtures/k5.10/`, `fixtures/k6.1/`: Debian's 5.10 and 6.1 (no soft-RoCE, no UEID): open
//!   connections fallen back as in `fallback/`; 5.10 has no SMC generic netlink family.
//!
//! Only files that exist are checked (a capture may skip what a kernel refuses); the checks
//! themselves are exercised on synthetic directories below so they are known to catch problems.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use smcrun_kernel::attr::Writer;
use smcrun_kernel::nl::frame;
use smcrun_kernel::rdma::{self, ResourceKind};
use smcrun_kernel::smc_genl;
use smcrun_kernel::sock_diag::{self, Mode, SmcSocket};

/// The redis port of the scenario; the checks use the listener's port found in the capture and
/// fall back to this one.
const PORT: u16 = 6379;
const UEID: &str = "SMCRUN-TEST";

type Files = BTreeMap<String, Vec<u8>>;

fn load(dir: &Path) -> Files {
    let mut files = Files::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) == Some("bin") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            files.insert(name, std::fs::read(&path).unwrap());
        }
    }
    files
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Every file must parse with its parser. Returns the number of files parsed.
fn parse_all(files: &Files) -> Result<usize, String> {
    let mut n = 0;
    for (name, raw) in files {
        let r: Result<(), smcrun_kernel::Error> = match name.as_str() {
            "smc_GET_SYS_INFO" => smc_genl::parse_sys_info(raw).map(drop),
            "smc_GET_STATS" => smc_genl::parse_stats(raw).map(drop),
            "smc_GET_FBACK_STATS" => smc_genl::parse_fallback_stats(raw).map(drop),
            "smc_GET_LGR_SMCR" | "smc_GET_LINK_SMCR" => smc_genl::parse_link_groups(raw).map(drop),
            "smc_GET_DEV_SMCR" => smc_genl::parse_devices(raw).map(drop),
            "smc_GET_DEV_SMCD" => smc_genl::parse_devices_smcd(raw).map(drop),
            "smc_GET_LGR_SMCD" => smc_genl::parse_link_groups_smcd(raw).map(drop),
            "smc_DUMP_SEID" => smc_genl::parse_seid(raw).map(drop),
            "smc_DUMP_UEID" => smc_genl::parse_ueids(raw).map(drop),
            "smc_pnetid_GET" => smcrun_kernel::pnet::parse(raw).map(drop),
            "rdma_GET" => rdma::parse_devices(raw).map(drop),
            "rdma_RES_GET" => rdma::parse_resource_summary(raw).map(drop),
            n if n.starts_with("rdma_RES_QP_GET") => {
                rdma::parse_resources(raw, ResourceKind::Qp).map(drop)
            }
            n if n.starts_with("rdma_RES_CQ_GET") => {
                rdma::parse_resources(raw, ResourceKind::Cq).map(drop)
            }
            n if n.starts_with("rdma_RES_MR_GET") => {
                rdma::parse_resources(raw, ResourceKind::Mr).map(drop)
            }
            n if n.starts_with("rdma_RES_PD_GET") => {
                rdma::parse_resources(raw, ResourceKind::Pd).map(drop)
            }
            n if n.starts_with("rdma_PORT_GET_") => rdma::parse_ports(raw).map(drop),
            n if n.starts_with("sock_diag_ext") => sock_diag::parse(raw).map(drop),
            _ => continue,
        };
        r.map_err(|e| format!("{name}.bin: {e}"))?;
        n += 1;
    }
    Ok(n)
}

fn sockets(files: &Files, name: &str) -> Result<Option<Vec<SmcSocket>>, String> {
    files
        .get(name)
        .map(|raw| sock_diag::parse(raw).map_err(|e| format!("{name}.bin: {e}")))
        .transpose()
}

/// The server's port: that of the (SMC) listening socket in the dump.
fn server_port(socks: &[SmcSocket]) -> u16 {
    socks
        .iter()
        .find(|s| s.state == 10)
        .map_or(PORT, |s| s.local.port())
}

/// A connected socket of the server or of one of its clients.
fn on_port(s: &SmcSocket, port: u16) -> bool {
    s.local.port() != 0 && s.peer.port() != 0 && (s.local.port() == port || s.peer.port() == port)
}

/// The set-up's UEID is in the capture's UEID dump (1 check), or there is no such dump (0).
fn ueid_set(files: &Files) -> Result<usize, String> {
    let Some(raw) = files.get("smc_DUMP_UEID") else {
        return Ok(0);
    };
    let ueids = smc_genl::parse_ueids(raw).map_err(|e| e.to_string())?;
    ensure!(
        ueids.iter().any(|u| u == UEID),
        "DUMP_UEID: {UEID} missing: {ueids:?}"
    );
    Ok(1)
}

/// An active connection's conninfo is there, with its three buffer sizes.
fn conn_sizes(name: &str, s: &SmcSocket) -> Result<(), String> {
    let c = s
        .conninfo
        .as_ref()
        .ok_or(format!("{name}: no conninfo: {s:?}"))?;
    ensure!(
        c.sndbuf_size > 0 && c.rmbe_size > 0 && c.peer_rmbe_size > 0,
        "{name}: zero buffer sizes: {c:?}"
    );
    Ok(())
}

fn check_smcr(files: &Files) -> Result<usize, String> {
    let mut checked = parse_all(files)?;
    if let Some(socks) = sockets(files, "sock_diag_ext0")? {
        let n = socks
            .iter()
            .filter(|s| s.mode == Mode::SmcR && on_port(s, server_port(&socks)))
            .count();
        ensure!(
            n >= 4,
            "sock_diag_ext0: {n} SMC-R sockets on the server's port, expected at least 4: {socks:?}"
        );
        checked += 1;
    }
    for (name, want_conn, want_lgr) in [
        ("sock_diag_ext1", true, false),
        ("sock_diag_ext2", false, true),
        ("sock_diag_ext15", true, true),
    ] {
        let Some(socks) = sockets(files, name)? else {
            continue;
        };
        let active: Vec<_> = socks
            .iter()
            .filter(|s| s.mode == Mode::SmcR && s.state == 1 && on_port(s, server_port(&socks)))
            .collect();
        ensure!(!active.is_empty(), "{name}: no active SMC-R socket");
        for s in active {
            if want_conn {
                conn_sizes(name, s)?;
            }
            if want_lgr {
                let l = s
                    .lgrinfo
                    .as_ref()
                    .ok_or(format!("{name}: no lgrinfo: {s:?}"))?;
                ensure!(
                    l.ibdev.starts_with("rxe") && l.ibport == 1 && !l.gid.is_empty(),
                    "{name}: unexpected link info {l:?}"
                );
            }
            ensure!(s.dmbinfo.is_none(), "{name}: SMC-R socket with DMB info");
        }
        checked += 1;
    }
    if let Some(raw) = files.get("smc_GET_STATS") {
        let s = smc_genl::parse_stats(raw).map_err(|e| e.to_string())?;
        let r = &s.smcr;
        ensure!(
            r.client_v1_success + r.client_v2_success >= 2
                && r.server_v1_success + r.server_v2_success >= 2,
            "GET_STATS: fewer than 2 client and 2 server SMC-R successes: {r:?}"
        );
        ensure!(
            r.rx_bytes > 0 && r.tx_bytes > 0 && r.rx_count > 0 && r.tx_count > 0,
            "GET_STATS: no SMC-R traffic counted: {r:?}"
        );
        let hist: u64 = [r.tx_payload_sizes, r.rx_payload_sizes]
            .iter()
            .map(|h| h.total())
            .sum();
        ensure!(hist > 0, "GET_STATS: empty payload histograms: {r:?}");
        checked += 1;
    }
    if let Some(raw) = files.get("smc_GET_LINK_SMCR") {
        let groups = smc_genl::parse_link_groups(raw).map_err(|e| e.to_string())?;
        ensure!(
            groups.iter().any(|g| g
                .links
                .iter()
                .any(|l| l.ib_dev.starts_with("rxe") && l.state == 3)),
            "GET_LINK_SMCR: no active link on an rxe device: {groups:?}"
        );
        checked += 1;
    }
    if let Some(raw) = files.get("smc_GET_LGR_SMCR") {
        let groups = smc_genl::parse_link_groups(raw).map_err(|e| e.to_string())?;
        ensure!(
            groups.iter().any(|g| g.conns >= 1 && g.v2.is_some()),
            "GET_LGR_SMCR: no SMC-Rv2 link group with connections: {groups:?}"
        );
        checked += 1;
    }
    checked += ueid_set(files)?;
    if let Some(raw) = files.get("rdma_GET") {
        let devs = rdma::parse_devices(raw).map_err(|e| e.to_string())?;
        ensure!(
            devs.iter()
                .any(|d| d.name.starts_with("rxe") && d.port_count >= 1),
            "rdma_GET: no rxe device: {devs:?}"
        );
        checked += 1;
    }
    for (name, raw) in files
        .iter()
        .filter(|(n, _)| n.starts_with("rdma_RES_QP_GET"))
    {
        let qps = rdma::parse_resources(raw, ResourceKind::Qp).map_err(|e| e.to_string())?;
        // SMC-R's queue pairs are the kernel's own: named after the creating module, no pid.
        ensure!(
            qps.iter().any(|q| q.pid.is_none() && q.kern_name.is_some()),
            "{name}: no kernel-owned queue pair while SMC-R is in use: {qps:?}"
        );
        checked += 1;
    }
    Ok(checked)
}

fn fallback_with(socks: &[SmcSocket], local: bool, reason: u32, peer: Option<u32>) -> bool {
    socks.iter().any(|s| {
        s.mode == Mode::Fallback
            && on_port(s, server_port(socks))
            && (s.local.port() == server_port(socks)) == local
            && s.fallback
                .is_some_and(|(r, p)| r == reason && (peer.is_none() || peer == Some(p)))
    })
}

/// A fallback scenario's expected reasons: the client's and the declining server's own codes, with
/// the peer's diagnosis each carries and the names for messages.
struct Declined {
    client: (u32, Option<u32>, &'static str),
    server: (u32, Option<u32>, &'static str),
}

/// The fallback captures: the client and the server of the no-UEID connection fell back with
/// `want`'s reasons, the plain client's server with PEERNOSMC, the statistics counted them, and
/// the UEID is gone.
fn check_declined(files: &Files, want: &Declined) -> Result<usize, String> {
    let mut checked = parse_all(files)?;
    let ((cr, cp, cn), (sr, sp, sn)) = (want.client, want.server);
    if let Some(socks) = sockets(files, "sock_diag_ext0")? {
        ensure!(
            fallback_with(&socks, false, cr, cp),
            "sock_diag_ext0: no client socket falling back with {cn}: {socks:?}"
        );
        ensure!(
            fallback_with(&socks, true, sr, sp),
            "sock_diag_ext0: no server socket with {sn}: {socks:?}"
        );
        ensure!(
            fallback_with(&socks, true, 0x0301_0000, None),
            "sock_diag_ext0: no server socket with PEERNOSMC: {socks:?}"
        );
        checked += 1;
    }
    if let Some(raw) = files.get("smc_GET_FBACK_STATS") {
        let f = smc_genl::parse_fallback_stats(raw).map_err(|e| e.to_string())?;
        let has = |list: &[smc_genl::ReasonCount], code| {
            list.iter().any(|r| r.code == code && r.count > 0)
        };
        let name = |n: &'static str| n.split('/').next().unwrap_or(n);
        ensure!(
            f.client_total >= 1 && f.server_total >= 2,
            "GET_FBACK_STATS totals: {f:?}"
        );
        ensure!(
            has(&f.client, cr),
            "GET_FBACK_STATS: client {} missing: {f:?}",
            name(cn)
        );
        ensure!(
            has(&f.server, sr) && has(&f.server, 0x0301_0000),
            "GET_FBACK_STATS: server {} or PEERNOSMC missing: {f:?}",
            name(sn)
        );
        checked += 1;
    }
    if let Some(raw) = files.get("smc_DUMP_UEID") {
        let ueids = smc_genl::parse_ueids(raw).map_err(|e| e.to_string())?;
        ensure!(
            !ueids.iter().any(|u| u == UEID),
            "DUMP_UEID: {UEID} still set: {ueids:?}"
        );
        checked += 1;
    }
    Ok(checked)
}

/// Debian's kernel without the UEID: no SMC-Rv2 device for the client (NOSMCDEV), and the server
/// declines with the client's diagnosis.
fn check_fallback(files: &Files) -> Result<usize, String> {
    check_declined(
        files,
        &Declined {
            client: (0x0303_0000, None, "NOSMCDEV"),
            server: (0x0500_0000, Some(0x0303_0000), "PEERDECL/NOSMCDEV"),
        },
    )
}

/// The SMC-D kernel without the UEID: the server finds no UEID to match (NOUEID) and declines;
/// the client reports the decline with that diagnosis.
fn check_smcd_fallback(files: &Files) -> Result<usize, String> {
    check_declined(
        files,
        &Declined {
            client: (0x0500_0000, Some(0x0303_0008), "PEERDECL/NOUEID"),
            server: (0x0303_0008, None, "NOUEID"),
        },
    )
}

fn check_smcd(files: &Files) -> Result<usize, String> {
    let mut checked = parse_all(files)?;
    for (name, want_conn, want_dmb) in [
        ("sock_diag_ext0", false, false),
        ("sock_diag_ext1", true, false),
        ("sock_diag_ext8", false, true),
        ("sock_diag_ext15", true, true),
    ] {
        let Some(socks) = sockets(files, name)? else {
            continue;
        };
        let port = server_port(&socks);
        let active: Vec<_> = socks
            .iter()
            .filter(|s| s.mode == Mode::SmcD && s.state == 1 && on_port(s, port))
            .collect();
        ensure!(
            active.len() >= 4,
            "{name}: {} active SMC-D sockets on the server's port, expected at least 4: {socks:?}",
            active.len()
        );
        // (a listener reports mode 0, SMC-R's number, whatever its connections run over)
        ensure!(
            !socks.iter().any(|s| s.mode == Mode::SmcR && s.state == 1),
            "{name}: an active SMC-R socket on the SMC-D kernel: {socks:?}"
        );
        for s in &active {
            ensure!(
                s.lgrinfo.is_none(),
                "{name}: SMC-D socket with SMC-R link info"
            );
            if want_conn {
                conn_sizes(name, s)?;
            }
            if want_dmb {
                let d = s
                    .dmbinfo
                    .as_ref()
                    .ok_or(format!("{name}: no dmbinfo: {s:?}"))?;
                // loopback-ism: one GID, both ends; each end's DMB token is the other's peer token
                ensure!(
                    d.my_gid != 0 && d.my_gid == d.peer_gid && d.token != 0 && d.peer_token != 0,
                    "{name}: unexpected DMB info {d:?}"
                );
                ensure!(
                    d.my_gid_ext.is_some() && d.my_gid_ext == d.peer_gid_ext,
                    "{name}: 6.12 sends the extended GIDs, equal on loopback-ism: {d:?}"
                );
                ensure!(
                    active
                        .iter()
                        .filter(|o| o.dmbinfo.as_ref().map(|o| o.peer_token) == Some(d.token))
                        .count()
                        == 1,
                    "{name}: DMB token {:#x} is not exactly one other socket's peer token",
                    d.token
                );
            }
        }
        checked += 1;
    }
    if let Some(raw) = files.get("smc_GET_STATS") {
        let s = smc_genl::parse_stats(raw).map_err(|e| e.to_string())?;
        let d = &s.smcd;
        ensure!(
            d.client_v2_success >= 2 && d.server_v2_success >= 2,
            "GET_STATS: fewer than 2 client and 2 server SMC-Dv2 successes: {d:?}"
        );
        ensure!(
            d.rx_bytes > 0 && d.tx_bytes > 0 && d.rx_count > 0 && d.tx_count > 0,
            "GET_STATS: no SMC-D traffic counted: {d:?}"
        );
        ensure!(
            s.smcr.successes() == 0,
            "GET_STATS: SMC-R successes on the SMC-D kernel: {:?}",
            s.smcr
        );
        checked += 1;
    }
    if let Some(raw) = files.get("smc_GET_LGR_SMCD") {
        let groups = smc_genl::parse_link_groups_smcd(raw).map_err(|e| e.to_string())?;
        ensure!(
            groups.iter().any(|g| g.conns >= 1
                && g.on_loopback_ism()
                && g.v2.as_ref().is_some_and(|v| v.version == 2 && v.negotiated_eid == UEID)),
            "GET_LGR_SMCD: no SMC-Dv2 link group on loopback-ism with connections and EID {UEID}: {groups:?}"
        );
        checked += 1;
    }
    if let (Some(sys), Some(devs)) = (files.get("smc_GET_SYS_INFO"), files.get("smc_GET_DEV_SMCD"))
    {
        let sys = smc_genl::parse_sys_info(sys).map_err(|e| e.to_string())?;
        let devs = smc_genl::parse_devices_smcd(devs).map_err(|e| e.to_string())?;
        ensure!(sys.ism_v2, "GET_SYS_INFO: not SMC-Dv2-capable: {sys:?}");
        // 6.12 leaves loopback-ism out of the device dump; it is seen from its link groups
        ensure!(devs.is_empty(), "GET_DEV_SMCD lists devices: {devs:?}");
        let groups = files
            .get("smc_GET_LGR_SMCD")
            .map(|raw| smc_genl::parse_link_groups_smcd(raw).map_err(|e| e.to_string()))
            .transpose()?
            .unwrap_or_default();
        let lo = smc_genl::loopback_ism(&sys, &devs, &groups);
        ensure!(
            lo.as_ref()
                .is_some_and(|l| l.seen_from == smc_genl::LoopbackEvidence::LinkGroups),
            "loopback-ism not found from the capture: {lo:?}"
        );
        checked += 1;
    }
    checked += ueid_set(files)?;
    Ok(checked)
}

fn fixtures_dir(phase: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(phase)
}

/// Replay one capture folder: every file has a parser, and `check`'s scenario checks ran on top of
/// the parsing. A folder not captured yet is said, not failed.
fn replay(phase: &str, check: fn(&Files) -> Result<usize, String>, capture: &str) {
    let files = load(&fixtures_dir(phase));
    if files.is_empty() {
        eprintln!(
            "no fixtures in {}: run {capture}",
            fixtures_dir(phase).display()
        );
        return;
    }
    assert_eq!(parse_all(&files), Ok(files.len()));
    let n = check(&files).unwrap();
    assert!(n > files.len(), "only {n} checks");
}

#[test]
fn captured_smcr_fixtures() {
    replay("smcr", check_smcr, "tests/vm/run --capture-fixtures");
}

#[test]
fn captured_fallback_fixtures() {
    replay(
        "fallback",
        check_fallback,
        "tests/vm/run --capture-fixtures",
    );
}

#[test]
fn captured_smcd_fixtures() {
    replay(
        "smcd",
        check_smcd,
        "tests/vm/run --kernel smcd --capture-fixtures",
    );
}

#[test]
fn captured_smcd_fallback_fixtures() {
    replay(
        "smcd-fallback",
        check_smcd_fallback,
        "tests/vm/run --kernel smcd --capture-fixtures",
    );
}

/// Debian bullseye's 5.10 (`tests/vm/run --kernel 5.10 --capture-fixtures`): no soft-RoCE, no UEID,
/// and no SMC generic netlink family at all (5.11 added it), so only sock_diag, the PNET table and
/// RDMA netlink answered; the fallbacks are the no-device ones of `fallback/`.
#[test]
fn captured_k5_10_fixtures() {
    let files = load(&fixtures_dir("k5.10"));
    assert!(
        !files.keys().any(|k| k.starts_with("smc_GET")),
        "5.10 answered an SMC_GEN_NETLINK dump? {:?}",
        files.keys()
    );
    replay(
        "k5.10",
        check_fallback,
        "tests/vm/run --kernel 5.10 --capture-fixtures",
    );
}

/// Debian bookworm's 6.1 (`tests/vm/run --kernel 6.1 --capture-fixtures`): the same scenario, with
/// the SMC generic netlink family and its statistics.
#[test]
fn captured_k6_1_fixtures() {
    replay(
        "k6.1",
        check_fallback,
        "tests/vm/run --kernel 6.1 --capture-fixtures",
    );
}

// ---- the checks above, exercised on synthetic captures -------------------------------------

const DONE: u16 = 3;

fn dump(message_type: u16, bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut raw = Vec::new();
    for b in bodies {
        raw.extend(frame(message_type, 2, 9, b));
    }
    raw.extend(frame(DONE, 2, 9, &0i32.to_ne_bytes()));
    raw
}

fn diag(mode: u8, lport: u16, rport: u16, fallback: (u32, u32)) -> Vec<u8> {
    let mut m = vec![43, 1, mode, 0];
    m.extend(lport.to_be_bytes());
    m.extend(rport.to_be_bytes());
    for _ in 0..2 {
        m.extend([127, 0, 0, 1]);
        m.extend([0; 12]);
    }
    m.extend([0; 12]);
    m.extend(0u32.to_ne_bytes());
    m.extend(7u64.to_ne_bytes());
    let mut fb = fallback.0.to_ne_bytes().to_vec();
    fb.extend(fallback.1.to_ne_bytes());
    m.extend(Writer::new().bytes(5, &fb).finish());
    m
}

fn genl(cmd: u8, attrs: Writer) -> Vec<u8> {
    let mut b = vec![cmd, 1, 0, 0];
    b.extend(attrs.finish());
    b
}

fn stats(successes: u64) -> Vec<u8> {
    let mut tech = Writer::new();
    for k in 7..=10u16 {
        tech = tech.bytes(0, &[]).bytes(k, &successes.to_ne_bytes());
    }
    for k in 16..=19u16 {
        tech = tech.bytes(k, &1000u64.to_ne_bytes());
    }
    tech = tech.bytes(
        3 | 0x8000,
        &Writer::new().bytes(1, &5u64.to_ne_bytes()).finish(),
    );
    let inner = Writer::new().bytes(2 | 0x8000, &tech.finish());
    dump(
        0x1e,
        &[genl(7, Writer::new().bytes(7 | 0x8000, &inner.finish()))],
    )
}

fn synthetic_smcr() -> Files {
    let mut f = Files::new();
    f.insert(
        "sock_diag_ext0".into(),
        dump(
            20,
            &[
                diag(0, PORT, 40001, (0, 0)),
                diag(0, PORT, 40002, (0, 0)),
                diag(0, 40001, PORT, (0, 0)),
                diag(0, 40002, PORT, (0, 0)),
            ],
        ),
    );
    f.insert("smc_GET_STATS".into(), stats(3));
    f.insert(
        "smc_DUMP_UEID".into(),
        dump(
            0x1e,
            &[genl(
                9,
                Writer::new().string(1, "SMCRUN-TEST                     "),
            )],
        ),
    );
    f.insert("unrelated_file".into(), vec![1, 2, 3]);
    f
}

#[test]
fn smcr_checks_accept_a_good_capture_and_catch_bad_ones() {
    let good = synthetic_smcr();
    assert_eq!(check_smcr(&good), Ok(6)); // 3 files parsed + 3 scenario checks

    let mut few = good.clone();
    few.insert(
        "sock_diag_ext0".into(),
        dump(20, &[diag(0, PORT, 40001, (0, 0))]),
    );
    assert!(check_smcr(&few)
        .unwrap_err()
        .contains("expected at least 4"));

    let mut idle = good.clone();
    idle.insert("smc_GET_STATS".into(), stats(0));
    assert!(check_smcr(&idle).unwrap_err().contains("successes"));

    let mut truncated = good.clone();
    let raw = truncated["smc_GET_STATS"].clone();
    truncated.insert("smc_GET_STATS".into(), raw[..raw.len() - 30].to_vec());
    assert!(check_smcr(&truncated)
        .unwrap_err()
        .starts_with("smc_GET_STATS.bin"));

    let mut no_ueid = good;
    no_ueid.insert("smc_DUMP_UEID".into(), dump(0x1e, &[]));
    assert!(check_smcr(&no_ueid)
        .unwrap_err()
        .contains("SMCRUN-TEST missing"));
}

#[test]
fn fallback_checks_accept_a_good_capture_and_catch_bad_ones() {
    let socks = |server_reason| {
        dump(
            20,
            &[
                diag(1, 40001, PORT, (0x0303_0000, 0)),
                diag(1, PORT, 40001, (0x0500_0000, 0x0303_0000)),
                diag(1, PORT, 40002, (server_reason, 0)),
            ],
        )
    };
    let mut good = Files::new();
    good.insert("sock_diag_ext0".into(), socks(0x0301_0000));
    assert_eq!(check_fallback(&good), Ok(2)); // 1 file parsed + 1 scenario check
    let mut bad = Files::new();
    bad.insert("sock_diag_ext0".into(), socks(0x0303_0000));
    assert!(check_fallback(&bad).unwrap_err().contains("PEERNOSMC"));

    // The server's port comes from its listening socket, whatever it is.
    let mut listener = diag(0, 213, 0, (0, 0));
    listener[1] = 10;
    let other_port = dump(
        20,
        &[
            listener,
            diag(1, 40001, 213, (0x0303_0000, 0)),
            diag(1, 213, 40001, (0x0500_0000, 0x0303_0000)),
            diag(1, 213, 40002, (0x0301_0000, 0)),
        ],
    );
    let mut moved = Files::new();
    moved.insert("sock_diag_ext0".into(), other_port);
    assert_eq!(check_fallback(&moved), Ok(2));
}

#[test]
fn smcd_checks_catch_bad_captures() {
    // The real captures, each spoiled in one way the SMC-D checks must notice.
    let good = load(&fixtures_dir("smcd"));
    let smcr = load(&fixtures_dir("smcr"));
    if good.is_empty() || smcr.is_empty() {
        eprintln!("no smcd/ or smcr/ fixtures");
        return;
    }
    assert!(check_smcd(&good).is_ok());
    let spoiled = |name: &str, raw: Vec<u8>| {
        let mut f = good.clone();
        f.insert(name.into(), raw);
        check_smcd(&f).unwrap_err()
    };
    // no DMB info where it was asked for
    let e = spoiled("sock_diag_ext8", good["sock_diag_ext0"].clone());
    assert!(e.contains("no dmbinfo"), "{e}");
    // SMC-R sockets instead of SMC-D ones
    let e = spoiled("sock_diag_ext0", smcr["sock_diag_ext0"].clone());
    assert!(e.contains("active SMC-D sockets"), "{e}");
    // no SMC-D link group
    let e = spoiled("smc_GET_LGR_SMCD", smcr["smc_GET_LGR_SMCD"].clone());
    assert!(e.contains("no SMC-Dv2 link group on loopback-ism"), "{e}");
    // SMC-R traffic counted instead of SMC-D
    let e = spoiled("smc_GET_STATS", smcr["smc_GET_STATS"].clone());
    assert!(e.contains("SMC-Dv2 successes"), "{e}");
    // a kernel without SMC-Dv2
    let e = spoiled("smc_GET_SYS_INFO", {
        let mut raw = good["smc_GET_SYS_INFO"].clone();
        // SMC_NLA_SYS_IS_ISM_V2 (type 3, u8) inside the SYS_INFO nest: set it to 0
        let at = raw
            .windows(4)
            .position(|w| w == [5, 0, 3, 0])
            .expect("the ISM_V2 attribute");
        raw[at + 4] = 0;
        raw
    });
    assert!(e.contains("not SMC-Dv2-capable"), "{e}");

    let fb = load(&fixtures_dir("smcd-fallback"));
    let rfb = load(&fixtures_dir("fallback"));
    assert!(check_smcd_fallback(&fb).is_ok());
    // SMC-R's no-UEID reasons (NOSMCDEV) are not SMC-D's (NOUEID)
    let mut f = fb.clone();
    f.insert("sock_diag_ext0".into(), rfb["sock_diag_ext0"].clone());
    let e = check_smcd_fallback(&f).unwrap_err();
    assert!(e.contains("PEERDECL/NOUEID"), "{e}");
    let mut f = fb;
    f.insert(
        "smc_GET_FBACK_STATS".into(),
        rfb["smc_GET_FBACK_STATS"].clone(),
    );
    let e = check_smcd_fallback(&f).unwrap_err();
    assert!(
        e.contains("GET_FBACK_STATS: client PEERDECL missing"),
        "{e}"
    );
}
