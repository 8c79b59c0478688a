//! SMC sockets as the kernel's `smc_diag` module reports them (SOCK_DIAG_BY_FAMILY for AF_SMC):
//! state, addresses, whether each connection runs over SMC-R, SMC-D or fell back to TCP, and why.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::abi::smc_diag::*;
use crate::attr::{self, c_string};
use crate::error::Error;
use crate::nl::{self, Protocol};

/// `AF_SMC`.
pub const AF_SMC: u8 = smcrun_sys::smc::AF_SMC as u8;
/// `SOCK_DIAG_BY_FAMILY`.
pub const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// Extension bit asking for [`ConnInfo`].
pub const EXT_CONNINFO: u8 = ext_bit(SMC_DIAG_CONNINFO);
/// Extension bit asking for [`LgrInfo`] (SMC-R).
pub const EXT_LGRINFO: u8 = ext_bit(SMC_DIAG_LGRINFO);
/// Extension bit asking for [`DmbInfo`] (SMC-D).
pub const EXT_DMBINFO: u8 = ext_bit(SMC_DIAG_DMBINFO);

/// The `diag_ext` bit that asks for attribute `kind` (`1 << (kind - 1)`, as smc_diag tests it).
const fn ext_bit(kind: u16) -> u8 {
    1 << (kind - 1)
}

/// Bytes at the start of each SMC-D DMB that hold the connection's CDC header
/// (`struct smcd_cdc_msg`): the kernel reports an SMC-D connection's receive buffer
/// ([`ConnInfo::rmbe_size`]) without them, and counts them in its buffer usage statistics.
pub const SMCD_DMB_HEADER: u32 = 32;

const MSG_LEN: usize = 64;

/// How a connection carries its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// SMC over RDMA (RoCE, soft-RoCE).
    SmcR,
    /// SMC over ISM / loopback-ism.
    SmcD,
    /// Plain TCP after the SMC handshake failed or was not attempted.
    Fallback,
    /// A mode number this crate does not know.
    Unknown(u8),
}

impl Mode {
    fn from_diag(mode: u8) -> Mode {
        match mode {
            SMC_DIAG_MODE_SMCR => Mode::SmcR,
            SMC_DIAG_MODE_FALLBACK_TCP => Mode::Fallback,
            SMC_DIAG_MODE_SMCD => Mode::SmcD,
            other => Mode::Unknown(other),
        }
    }

    /// smcss's Mode column word (`SMCR`, `SMCD`, `TCP`).
    pub fn label(self) -> &'static str {
        match self {
            Mode::SmcR => "SMCR",
            Mode::SmcD => "SMCD",
            Mode::Fallback => "TCP",
            Mode::Unknown(_) => "?",
        }
    }
}

/// A ring cursor: wrap count and byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// How often the ring wrapped.
    pub wrap: u16,
    /// Byte offset in the ring.
    pub count: u32,
}

/// `struct smc_diag_conninfo`: buffer sizes and ring cursors of one connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnInfo {
    /// Alert token.
    pub token: u32,
    /// Send buffer size.
    pub sndbuf_size: u32,
    /// Receive buffer (RMBE) size.
    pub rmbe_size: u32,
    /// Peer's receive buffer size.
    pub peer_rmbe_size: u32,
    /// Receive producer cursor.
    pub rx_prod: Cursor,
    /// Receive consumer cursor.
    pub rx_cons: Cursor,
    /// Transmit producer cursor.
    pub tx_prod: Cursor,
    /// Transmit consumer cursor.
    pub tx_cons: Cursor,
    /// Receive producer flags.
    pub rx_prod_flags: u8,
    /// Receive connection state flags.
    pub rx_conn_state_flags: u8,
    /// Transmit producer flags.
    pub tx_prod_flags: u8,
    /// Transmit connection state flags.
    pub tx_conn_state_flags: u8,
    /// Prepared-to-send cursor.
    pub tx_prep: Cursor,
    /// Sent cursor.
    pub tx_sent: Cursor,
    /// Confirmed-sent cursor.
    pub tx_fin: Cursor,
}

/// `struct smc_diag_lgrinfo`: the SMC-R link a connection uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LgrInfo {
    /// Link id in the link group.
    pub link_id: u8,
    /// RDMA device name.
    pub ibdev: String,
    /// RDMA port.
    pub ibport: u8,
    /// Local GID text.
    pub gid: String,
    /// Peer GID text.
    pub peer_gid: String,
    /// 0 client, 1 server.
    pub role: u8,
}

/// `struct smcd_diag_dmbinfo`: the SMC-D buffer a connection uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DmbInfo {
    /// Link id.
    pub link_id: u32,
    /// Peer GID.
    pub peer_gid: u64,
    /// Local GID.
    pub my_gid: u64,
    /// DMB token.
    pub token: u64,
    /// Peer DMB token.
    pub peer_token: u64,
    /// Extended peer GID (kernels ≥ 6.8).
    pub peer_gid_ext: Option<u64>,
    /// Extended local GID (kernels ≥ 6.8).
    pub my_gid_ext: Option<u64>,
}

/// One SMC socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SmcSocket {
    /// `diag_family`: AF_SMC for AF_SMC sockets, AF_INET/AF_INET6 for IPPROTO_SMC sockets.
    pub family: u8,
    /// SMC socket state (see [`crate::reasons::socket_state`]).
    pub state: u8,
    /// SMC-R, SMC-D or TCP fallback.
    pub mode: Mode,
    /// Shutdown mask (1 receive, 2 send), from the SHUTDOWN attribute when present.
    pub shutdown: u8,
    /// Local address of the internal TCP socket.
    pub local: SocketAddr,
    /// Peer address.
    pub peer: SocketAddr,
    /// Interface index from the socket id.
    pub interface: u32,
    /// Owner uid.
    pub uid: u32,
    /// Inode of the application's socket (matches `/proc/PID/fd` → `socket:[INODE]`).
    pub inode: u64,
    /// `(reason, peer_diagnosis)` for sockets in fallback mode (or with a recorded reason).
    pub fallback: Option<(u32, u32)>,
    /// Present when asked for with [`EXT_CONNINFO`].
    pub conninfo: Option<ConnInfo>,
    /// Present when asked for with [`EXT_LGRINFO`] on SMC-R connections.
    pub lgrinfo: Option<LgrInfo>,
    /// Present when asked for with [`EXT_DMBINFO`] on SMC-D connections.
    pub dmbinfo: Option<DmbInfo>,
}

impl SmcSocket {
    /// A socket known by its family, state, mode, addresses and inode and nothing else yet
    /// (shutdown, interface and uid 0, no fallback reason, no extension): where the parser starts,
    /// and how a test writes the socket it needs without naming every field.
    pub fn new(
        family: u8,
        state: u8,
        mode: Mode,
        local: SocketAddr,
        peer: SocketAddr,
        inode: u64,
    ) -> Self {
        SmcSocket {
            family,
            state,
            mode,
            shutdown: 0,
            local,
            peer,
            interface: 0,
            uid: 0,
            inode,
            fallback: None,
            conninfo: None,
            lgrinfo: None,
            dmbinfo: None,
        }
    }
}

/// The 52-byte `struct smc_diag_req` asking for all SMC sockets with extensions `ext`.
pub fn request(ext: u8) -> Vec<u8> {
    let mut req = vec![0u8; 52];
    req[0] = AF_SMC;
    req[3] = ext;
    req
}

/// Dump the raw reply of all SMC sockets of this network namespace.
pub fn dump_raw(ext: u8) -> Result<Vec<u8>, Error> {
    let what = format!("sock_diag dump of AF_SMC sockets (ext 0x{ext:x})");
    nl::dump_raw(
        Protocol::SockDiag,
        SOCK_DIAG_BY_FAMILY,
        &request(ext),
        &what,
    )
    .map_err(|e| e.missing_on(libc::ENOENT, "smc_diag"))
}

/// All SMC sockets of this network namespace, with the extensions in `ext`
/// ([`EXT_CONNINFO`] | [`EXT_LGRINFO`] | [`EXT_DMBINFO`]). Without the `smc_diag` module this is
/// [`Error::ModuleMissing`].
///
/// smc_diag leaves the IP addresses zero for sockets made with IPPROTO_SMC (and for the sockets
/// their listeners accept) on current kernels, reporting only the ports. Such addresses are filled
/// in from the SMC socket's internal TCP socket, found through TCP sock_diag by its ports (see
/// [`fill_addresses`]); where that is ambiguous or unavailable they stay unspecified.
pub fn dump(ext: u8) -> Result<Vec<SmcSocket>, Error> {
    let mut sockets = parse(&dump_raw(ext)?)?;
    if sockets.iter().any(needs_address) {
        let mut tcp = Vec::new();
        for family in [libc::AF_INET as u8, libc::AF_INET6 as u8] {
            if let Ok(raw) = tcp_dump_raw(family) {
                tcp.extend(parse_tcp(&raw).unwrap_or_default());
            }
        }
        fill_addresses(&mut sockets, &tcp);
    }
    Ok(sockets)
}

/// A TCP socket as TCP sock_diag reports it: enough to find an SMC socket's internal one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TcpSocket {
    /// TCP state (1 established, 10 listen, ...).
    pub state: u8,
    /// Local address.
    pub local: SocketAddr,
    /// Peer address.
    pub peer: SocketAddr,
}

const TCP_LISTEN: u8 = 10;
const INET_DIAG_MSG_LEN: usize = 72;

/// The 56-byte `struct inet_diag_req_v2` asking for all TCP sockets of `family` in any state.
pub fn tcp_request(family: u8) -> Vec<u8> {
    let mut req = vec![0u8; 56];
    req[0] = family;
    req[1] = libc::IPPROTO_TCP as u8;
    req[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
    req
}

/// Raw TCP sock_diag dump of `family` (AF_INET or AF_INET6).
pub fn tcp_dump_raw(family: u8) -> Result<Vec<u8>, Error> {
    let what = format!("sock_diag dump of TCP sockets (family {family})");
    nl::dump_raw(
        Protocol::SockDiag,
        SOCK_DIAG_BY_FAMILY,
        &tcp_request(family),
        &what,
    )
}

/// Parse a raw TCP sock_diag reply (`struct inet_diag_msg` per socket).
pub fn parse_tcp(raw: &[u8]) -> Result<Vec<TcpSocket>, Error> {
    let what = "sock_diag TCP reply";
    let mut out = Vec::new();
    for m in nl::data_messages(raw, what)? {
        let p = m.payload;
        need(p, INET_DIAG_MSG_LEN, "inet_diag_msg", what)?;
        let family = p[0];
        let id = &p[4..52];
        let v4 = family == libc::AF_INET as u8;
        out.push(TcpSocket {
            state: p[1],
            local: address(family, v4, &id[4..20], be16(&id[0..2])),
            peer: address(family, v4, &id[20..36], be16(&id[2..4])),
        });
    }
    Ok(out)
}

fn needs_address(s: &SmcSocket) -> bool {
    s.local.port() != 0 && s.local.ip().is_unspecified() && s.peer.ip().is_unspecified()
}

/// Give SMC sockets with unspecified addresses (see [`dump`]) the addresses of the one TCP
/// socket with the same ports and the same kind (listening or not) and, for AF_INET/AF_INET6
/// SMC sockets, the same IP family. Sockets with no or several candidates are left alone.
pub fn fill_addresses(sockets: &mut [SmcSocket], tcp: &[TcpSocket]) {
    for s in sockets.iter_mut().filter(|s| needs_address(s)) {
        let listening = s.state == crate::reasons::state::LISTEN;
        let family_ok = |t: &TcpSocket| match s.family {
            f if f == libc::AF_INET as u8 => t.local.is_ipv4(),
            f if f == libc::AF_INET6 as u8 => t.local.is_ipv6(),
            _ => true,
        };
        let mut candidates = tcp.iter().filter(|t| {
            t.local.port() == s.local.port()
                && t.peer.port() == s.peer.port()
                && (t.state == TCP_LISTEN) == listening
                && family_ok(t)
        });
        if let (Some(t), None) = (candidates.next(), candidates.next()) {
            s.local = t.local;
            s.peer = t.peer;
        }
    }
}

/// Parse a raw sock_diag reply (as from [`dump_raw`]).
pub fn parse(raw: &[u8]) -> Result<Vec<SmcSocket>, Error> {
    let what = "sock_diag AF_SMC reply";
    // The socket's number goes into an error only: naming every socket up front would cost a
    // formatted string per socket, most of a 10,000-socket dump's parse time.
    // Sized up front: growing a vector of 10,000 sockets copies them over and over.
    let messages = nl::data_messages(raw, what)?;
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        out.push(parse_one(m.payload, what).map_err(|e| match e {
            Error::Malformed { what, detail } => Error::Malformed {
                what: format!("{what}, socket #{i}"),
                detail,
            },
            other => other,
        })?);
    }
    Ok(out)
}

/// Only the state and mode of each socket of a raw reply: what counting connections needs, at a
/// fraction of [`parse`]'s cost (no attributes, addresses or allocations per socket).
pub fn parse_states(raw: &[u8]) -> Result<Vec<(u8, Mode)>, Error> {
    let what = "sock_diag AF_SMC reply";
    let messages = nl::data_messages(raw, what)?;
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let p = m.payload;
        if p.len() < MSG_LEN {
            return Err(Error::malformed(
                format!("{what}, socket #{i}"),
                format!("smc_diag_msg needs {MSG_LEN} bytes, got {}", p.len()),
            ));
        }
        out.push((p[1], Mode::from_diag(p[2])));
    }
    Ok(out)
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn ne32(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

fn ne64(b: &[u8]) -> u64 {
    u64::from_ne_bytes(b[..8].try_into().unwrap_or([0; 8]))
}

fn address(family: u8, is_v4: bool, words: &[u8], port: u16) -> SocketAddr {
    let ip = if family == libc::AF_INET as u8 || (family != libc::AF_INET6 as u8 && is_v4) {
        IpAddr::V4(Ipv4Addr::new(words[0], words[1], words[2], words[3]))
    } else {
        let mut a = [0u8; 16];
        a.copy_from_slice(&words[..16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    SocketAddr::new(ip, port)
}

fn parse_one(p: &[u8], what: &str) -> Result<SmcSocket, Error> {
    need(p, MSG_LEN, "smc_diag_msg", what)?;
    let family = p[0];
    let id = &p[4..52];
    let (src, dst) = (&id[4..20], &id[20..36]);
    // The kernel zeroes the unused 12 bytes of an IPv4 address; AF_SMC sockets do not tell the
    // IP family otherwise.
    let is_v4 = src[4..].iter().chain(&dst[4..]).all(|&b| b == 0);
    let mut s = SmcSocket {
        shutdown: p[3],
        interface: ne32(&id[36..40]),
        uid: ne32(&p[52..56]),
        ..SmcSocket::new(
            family,
            p[1],
            Mode::from_diag(p[2]),
            address(family, is_v4, src, be16(&id[0..2])),
            address(family, is_v4, dst, be16(&id[2..4])),
            ne64(&p[56..64]),
        )
    };
    for a in attr::iter(&p[MSG_LEN..], what) {
        let a = a?;
        match a.kind {
            SMC_DIAG_SHUTDOWN => s.shutdown = a.u8(what)?,
            SMC_DIAG_FALLBACK => {
                let v = a.value;
                need(v, 8, "SMC_DIAG_FALLBACK", what)?;
                let (reason, peer) = (ne32(&v[0..4]), ne32(&v[4..8]));
                if s.mode == Mode::Fallback || reason != 0 {
                    s.fallback = Some((reason, peer));
                }
            }
            SMC_DIAG_CONNINFO => s.conninfo = Some(conninfo(a.value, what)?),
            SMC_DIAG_LGRINFO => s.lgrinfo = Some(lgrinfo(a.value, what)?),
            SMC_DIAG_DMBINFO => s.dmbinfo = Some(dmbinfo(a.value, what)?),
            _ => {}
        }
    }
    Ok(s)
}

fn cursor(b: &[u8]) -> Cursor {
    Cursor {
        wrap: u16::from_ne_bytes([b[2], b[3]]),
        count: ne32(&b[4..8]),
    }
}

/// Fail unless the attribute `name` holds at least `len` bytes.
fn need(v: &[u8], len: usize, name: &str, what: &str) -> Result<(), Error> {
    if v.len() < len {
        return Err(Error::malformed(
            what,
            format!("{name} needs {len} bytes, got {}", v.len()),
        ));
    }
    Ok(())
}

fn conninfo(v: &[u8], what: &str) -> Result<ConnInfo, Error> {
    need(v, 76, "SMC_DIAG_CONNINFO", what)?;
    Ok(ConnInfo {
        token: ne32(&v[0..]),
        sndbuf_size: ne32(&v[4..]),
        rmbe_size: ne32(&v[8..]),
        peer_rmbe_size: ne32(&v[12..]),
        rx_prod: cursor(&v[16..24]),
        rx_cons: cursor(&v[24..32]),
        tx_prod: cursor(&v[32..40]),
        tx_cons: cursor(&v[40..48]),
        rx_prod_flags: v[48],
        rx_conn_state_flags: v[49],
        tx_prod_flags: v[50],
        tx_conn_state_flags: v[51],
        tx_prep: cursor(&v[52..60]),
        tx_sent: cursor(&v[60..68]),
        tx_fin: cursor(&v[68..76]),
    })
}

fn lgrinfo(v: &[u8], what: &str) -> Result<LgrInfo, Error> {
    need(v, 147, "SMC_DIAG_LGRINFO", what)?;
    Ok(LgrInfo {
        link_id: v[0],
        ibdev: c_string(&v[1..65]),
        ibport: v[65],
        gid: c_string(&v[66..106]),
        peer_gid: c_string(&v[106..146]),
        role: v[146],
    })
}

fn dmbinfo(v: &[u8], what: &str) -> Result<DmbInfo, Error> {
    need(v, 40, "SMC_DIAG_DMBINFO", what)?;
    let ext = v.len() >= 56;
    Ok(DmbInfo {
        link_id: ne32(&v[0..]),
        peer_gid: ne64(&v[8..]),
        my_gid: ne64(&v[16..]),
        token: ne64(&v[24..]),
        peer_token: ne64(&v[32..]),
        peer_gid_ext: ext.then(|| ne64(&v[40..])),
        my_gid_ext: ext.then(|| ne64(&v[48..])),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Writer;
    use crate::nl::frame;
    use netlink_packet_core::NLMSG_DONE;

    fn msg(
        family: u8,
        state: u8,
        mode: u8,
        src: [u8; 16],
        dst: [u8; 16],
        sport: u16,
        dport: u16,
    ) -> Vec<u8> {
        let mut m = vec![family, state, mode, 0];
        m.extend(sport.to_be_bytes());
        m.extend(dport.to_be_bytes());
        m.extend(src);
        m.extend(dst);
        m.extend(0u32.to_ne_bytes()); // if
        m.extend([0u8; 8]); // cookie
        m.extend(1000u32.to_ne_bytes()); // uid
        m.extend(123456u64.to_ne_bytes()); // inode
        assert_eq!(m.len(), 64);
        m
    }

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut w = [0u8; 16];
        w[..4].copy_from_slice(&a);
        w
    }

    /// An established fallback socket from 127.0.0.1:5000 to 127.0.0.1:40000: the message the
    /// fallback and the robustness tests both start from.
    fn loopback_fallback() -> Vec<u8> {
        let lo = v4([127, 0, 0, 1]);
        msg(AF_SMC, 1, 1, lo, lo, 5000, 40000)
    }

    pub(crate) fn reply(messages: &[Vec<u8>]) -> Vec<u8> {
        let mut raw = Vec::new();
        for m in messages {
            raw.extend(frame(SOCK_DIAG_BY_FAMILY, 2, 1, m));
        }
        raw.extend(frame(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes()));
        raw
    }

    #[test]
    fn request_is_52_bytes_with_family_and_ext() {
        let r = request(0xf);
        assert_eq!(r.len(), 52);
        assert_eq!((r[0], r[3]), (AF_SMC, 0xf));
    }

    #[test]
    fn fallback_socket_with_reason() {
        let mut m = loopback_fallback();
        let mut fb = 0x0303_0000u32.to_ne_bytes().to_vec();
        fb.extend(0u32.to_ne_bytes());
        m.extend(
            Writer::new()
                .u8(SMC_DIAG_SHUTDOWN, 2)
                .bytes(SMC_DIAG_FALLBACK, &fb)
                .finish(),
        );
        let socks = parse(&reply(&[m])).unwrap();
        assert_eq!(socks.len(), 1);
        let s = &socks[0];
        assert_eq!(s.mode, Mode::Fallback);
        assert_eq!(s.local, "127.0.0.1:5000".parse().unwrap());
        assert_eq!(s.peer, "127.0.0.1:40000".parse().unwrap());
        assert_eq!(s.fallback, Some((0x0303_0000, 0)));
        assert_eq!((s.uid, s.inode, s.shutdown), (1000, 123456, 2));
    }

    #[test]
    fn smcr_socket_has_no_fallback_and_parses_lgrinfo() {
        let mut m = msg(AF_SMC, 1, 0, v4([10, 0, 0, 1]), v4([10, 0, 0, 2]), 1, 2);
        let mut li = vec![1u8];
        let mut name = b"rxe_lo".to_vec();
        name.resize(64, 0);
        li.extend(name);
        li.push(1);
        let mut gid = b"fe80:0000:0000:0000:0000:0000:0000:0001".to_vec();
        gid.resize(40, 0);
        li.extend(&gid);
        li.extend(&gid);
        li.push(1);
        let fb = [0u8; 8];
        m.extend(
            Writer::new()
                .bytes(SMC_DIAG_LGRINFO, &li)
                .bytes(SMC_DIAG_FALLBACK, &fb)
                .finish(),
        );
        let s = &parse(&reply(&[m])).unwrap()[0];
        assert_eq!(s.mode, Mode::SmcR);
        assert_eq!(s.fallback, None);
        let l = s.lgrinfo.as_ref().unwrap();
        assert_eq!((l.ibdev.as_str(), l.ibport, l.role), ("rxe_lo", 1, 1));
        assert!(l.gid.starts_with("fe80:"));
    }

    #[test]
    fn ipv6_and_inet_family_addresses() {
        let a: Ipv6Addr = "fd00::1".parse().unwrap();
        let m = msg(AF_SMC, 10, 0, a.octets(), [0; 16], 80, 0);
        let s = &parse(&reply(&[m])).unwrap()[0];
        assert_eq!(s.local, "[fd00::1]:80".parse().unwrap());
        // IPPROTO_SMC socket reporting AF_INET6 keeps IPv6 even for a zero address
        let m = msg(10, 10, 0, [0; 16], [0; 16], 80, 0);
        let s = &parse(&reply(&[m])).unwrap()[0];
        assert!(s.local.is_ipv6());
        let m = msg(2, 10, 0, v4([1, 2, 3, 4]), [0; 16], 80, 0);
        assert!(parse(&reply(&[m])).unwrap()[0].local.is_ipv4());
    }

    #[test]
    fn conninfo_and_dmbinfo() {
        let mut m = msg(AF_SMC, 1, 2, v4([127, 0, 0, 1]), v4([127, 0, 0, 1]), 1, 2);
        let mut ci = vec![0u8; 76];
        ci[4..8].copy_from_slice(&65536u32.to_ne_bytes());
        ci[18..20].copy_from_slice(&3u16.to_ne_bytes());
        ci[20..24].copy_from_slice(&77u32.to_ne_bytes());
        let mut dmb = vec![0u8; 56];
        dmb[24..32].copy_from_slice(&9u64.to_ne_bytes());
        dmb[48..56].copy_from_slice(&5u64.to_ne_bytes());
        m.extend(
            Writer::new()
                .bytes(SMC_DIAG_CONNINFO, &ci)
                .bytes(SMC_DIAG_DMBINFO, &dmb)
                .finish(),
        );
        let s = &parse(&reply(&[m])).unwrap()[0];
        assert_eq!(s.mode, Mode::SmcD);
        let c = s.conninfo.as_ref().unwrap();
        assert_eq!(c.sndbuf_size, 65536);
        assert_eq!(c.rx_prod, Cursor { wrap: 3, count: 77 });
        let d = s.dmbinfo.as_ref().unwrap();
        assert_eq!((d.token, d.my_gid_ext), (9, Some(5)));
    }

    #[test]
    fn short_structs_are_errors_not_panics() {
        let m = msg(AF_SMC, 1, 1, [0; 16], [0; 16], 1, 2);
        assert!(parse(&reply(&[m[..63].to_vec()])).is_err());
        for (kind, len) in [
            (SMC_DIAG_CONNINFO, 75),
            (SMC_DIAG_LGRINFO, 146),
            (SMC_DIAG_DMBINFO, 39),
            (SMC_DIAG_FALLBACK, 7),
            (SMC_DIAG_SHUTDOWN, 0),
        ] {
            let mut m = m.clone();
            m.extend(Writer::new().bytes(kind, &vec![0; len]).finish());
            let e = parse(&reply(&[m])).unwrap_err();
            assert!(matches!(e, Error::Malformed { .. }), "{kind}: {e}");
        }
    }

    fn tcp_msg(family: u8, state: u8, local: SocketAddr, peer: SocketAddr) -> Vec<u8> {
        let words = |a: &SocketAddr| match a.ip() {
            IpAddr::V4(v) => v4(v.octets()),
            IpAddr::V6(v) => v.octets(),
        };
        let mut m = vec![family, state, 0, 0];
        m.extend(local.port().to_be_bytes());
        m.extend(peer.port().to_be_bytes());
        m.extend(words(&local));
        m.extend(words(&peer));
        m.extend([0u8; 12]);
        m.extend([0u8; 20]);
        assert_eq!(m.len(), INET_DIAG_MSG_LEN);
        m
    }

    #[test]
    fn tcp_request_and_reply() {
        let r = tcp_request(10);
        assert_eq!((r.len(), r[0], r[1]), (56, 10, 6));
        assert_eq!(&r[4..8], &[0xff; 4]);
        let a: SocketAddr = "127.0.0.1:6379".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:40000".parse().unwrap();
        let raw = reply(&[tcp_msg(2, 1, a, b)]);
        let t = parse_tcp(&raw).unwrap();
        assert_eq!((t[0].state, t[0].local, t[0].peer), (1, a, b));
        assert!(parse_tcp(&reply(&[vec![2; 71]])).is_err());
    }

    #[test]
    fn zero_addresses_are_filled_from_the_unique_tcp_match() {
        let zero4 = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
        let sock =
            |family, state, local, peer| SmcSocket::new(family, state, Mode::SmcR, local, peer, 1);
        let srv: SocketAddr = "127.0.0.1:6379".parse().unwrap();
        let cli: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let any6: SocketAddr = "[::]:6379".parse().unwrap();
        let tcp = vec![
            TcpSocket {
                state: 1,
                local: cli,
                peer: srv,
            },
            TcpSocket {
                state: 1,
                local: srv,
                peer: cli,
            },
            TcpSocket {
                state: 10,
                local: "0.0.0.0:6379".parse().unwrap(),
                peer: zero4(0),
            },
            TcpSocket {
                state: 10,
                local: any6,
                peer: "[::]:0".parse().unwrap(),
            },
            // same ports as the next SMC socket twice: ambiguous
            TcpSocket {
                state: 1,
                local: "10.0.0.1:7000".parse().unwrap(),
                peer: "10.0.0.2:80".parse().unwrap(),
            },
            TcpSocket {
                state: 1,
                local: "10.0.0.3:7000".parse().unwrap(),
                peer: "10.0.0.4:80".parse().unwrap(),
            },
        ];
        let mut socks = vec![
            sock(2, 1, zero4(40000), zero4(6379)),
            sock(AF_SMC, 1, zero4(6379), zero4(40000)),
            sock(10, 10, zero4(6379), zero4(0)),
            sock(AF_SMC, 1, zero4(7000), zero4(80)),
            sock(
                AF_SMC,
                1,
                "127.0.0.9:1".parse().unwrap(),
                "127.0.0.8:2".parse().unwrap(),
            ),
        ];
        fill_addresses(&mut socks, &tcp);
        assert_eq!((socks[0].local, socks[0].peer), (cli, srv));
        assert_eq!((socks[1].local, socks[1].peer), (srv, cli));
        assert_eq!(socks[2].local, any6);
        assert_eq!(socks[3].local, zero4(7000));
        assert_eq!(socks[4].local, "127.0.0.9:1".parse().unwrap());
    }

    #[test]
    fn every_prefix_and_byte_flip_is_handled() {
        let mut m = loopback_fallback();
        m.extend(
            Writer::new()
                .bytes(SMC_DIAG_FALLBACK, &[1; 8])
                .bytes(SMC_DIAG_CONNINFO, &[2; 76])
                .finish(),
        );
        let raw = reply(&[m.clone(), m]);
        for cut in 0..raw.len() {
            let _ = parse(&raw[..cut]);
        }
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0xff;
            let _ = parse(&bad);
        }
    }
}
