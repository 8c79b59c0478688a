//! `smcrun ss`' text, in smcss' columns: state, uid, inode, addresses, interface and mode (with
//! the fallback reason decoded), and with `-d`, `-R`, `-D`, `-p` their detail columns.

use std::fmt::Write as _;

use smcrun_kernel::reasons::{self, state};
use smcrun_kernel::sock_diag::{self, Mode, SmcSocket};

use super::json::DmbView;
use super::{Listing, Owner};
use crate::text::safe;

/// A ring cursor: `wrap:count`.
fn cursor(c: &sock_diag::Cursor) -> String {
    format!("{:04x}:{:08x}", c.wrap, c.count)
}

/// The detail columns smcss prints with -d, -R and -D ("-" where the kernel sent nothing).
fn detail_columns(s: &SmcSocket, a: &Listing) -> String {
    let mut out = String::new();
    if a.debug {
        out.push_str(&format!(" {:<5}", reasons::shutdown(s.shutdown)));
        match &s.conninfo {
            Some(c) => out.push_str(&format!(
                " {:08x} {:>8} {:>8} {:>8} {} {} {:02x}:{:02x} {} {} {:02x}:{:02x} {} {} {}",
                c.token,
                c.sndbuf_size,
                c.rmbe_size,
                c.peer_rmbe_size,
                cursor(&c.rx_prod),
                cursor(&c.rx_cons),
                c.rx_prod_flags,
                c.rx_conn_state_flags,
                cursor(&c.tx_prod),
                cursor(&c.tx_cons),
                c.tx_prod_flags,
                c.tx_conn_state_flags,
                cursor(&c.tx_prep),
                cursor(&c.tx_sent),
                cursor(&c.tx_fin),
            )),
            None => out.push_str(" -"),
        }
    }
    if a.smcr {
        match &s.lgrinfo {
            Some(l) => out.push_str(&format!(
                " {} {} {} {} {} {}",
                reasons::role(l.role),
                safe(&l.ibdev),
                l.ibport,
                l.link_id,
                l.gid,
                l.peer_gid
            )),
            None => out.push_str(" -"),
        }
    }
    if a.smcd {
        match s.dmbinfo.as_ref().map(DmbView::new) {
            Some(d) => out.push_str(&format!(
                " {} {} {} {} {}",
                d.my_gid, d.token, d.peer_gid, d.peer_token, d.lgr_id
            )),
            None => out.push_str(" -"),
        }
    }
    out
}

/// smcss's Mode column, and for a fallback the reason's name after the codes (and the peer's,
/// when it sent one): `TCP 0x05000000/0x03030000 PEERDECL/NOSMCDEV`.
fn write_mode(out: &mut String, s: &SmcSocket) {
    let _ = match (s.mode, s.fallback) {
        (Mode::Fallback, Some((r, 0))) => write!(
            out,
            "TCP 0x{r:08x}/0x00000000 {}",
            reasons::describe(r).name
        ),
        (Mode::Fallback, Some((r, p))) => write!(
            out,
            "TCP 0x{r:08x}/0x{p:08x} {}/{}",
            reasons::describe(r).name,
            reasons::describe(p).name
        ),
        (Mode::Fallback, None) => {
            out.push_str("TCP");
            Ok(())
        }
        (Mode::Unknown(m), _) => write!(out, "mode {m}"),
        (m, _) => {
            out.push_str(m.label());
            Ok(())
        }
    };
}

/// An address cut to its last 21 characters after `..` when longer than its column.
fn shorten(addr: String, wide: bool) -> String {
    if wide || addr.chars().count() <= 23 {
        addr
    } else {
        let tail: String = addr
            .chars()
            .rev()
            .take(21)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("..{tail}")
    }
}

/// One smcss-style row; INIT rows stop after Inode, LISTEN after Local Address, CLOSED after Intf.
#[cfg(test)]
fn socket_row(s: &SmcSocket, wide: bool) -> String {
    let mut row = String::new();
    write_row(&mut row, s, wide);
    row
}

/// Spaces to pad a column with (every column is narrower).
const SPACES: &str = "                                ";

/// `text` left-aligned in a column `width` wide (ASCII: a byte is a column).
fn push_left(out: &mut String, text: &str, width: usize) {
    out.push_str(text);
    out.push_str(&SPACES[..width.saturating_sub(text.len()).min(SPACES.len())]);
}

/// `text` right-aligned in a column `width` wide (ASCII: a byte is a column).
fn push_right(out: &mut String, text: &str, width: usize) {
    out.push_str(&SPACES[..width.saturating_sub(text.len()).min(SPACES.len())]);
    out.push_str(text);
}

/// An address after a space, left-aligned in its 23 columns (`pad`: false for the row's last
/// column). IPv4 ones always fit (21 characters at most) and are written digit by digit, as the
/// rows of `ss -a` with thousands of sockets are mostly theirs; longer IPv6 ones are shortened
/// unless `wide`.
fn write_addr(out: &mut String, a: &std::net::SocketAddr, wide: bool, pad: bool) {
    out.push(' ');
    let start = out.len();
    match a {
        std::net::SocketAddr::V4(v4) => {
            let mut digits = itoa::Buffer::new();
            for (i, octet) in v4.ip().octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(digits.format(octet));
            }
            out.push(':');
            out.push_str(digits.format(v4.port()));
        }
        std::net::SocketAddr::V6(_) => out.push_str(&shorten(a.to_string(), wide)),
    }
    if pad {
        let used = out.len() - start; // addresses are ASCII
        out.push_str(&SPACES[..23usize.saturating_sub(used)]);
    }
}

/// Append one smcss-style row to `out` (no newline). Written in place, column by column:
/// `ss -a` formats thousands of rows.
fn write_row(out: &mut String, s: &SmcSocket, wide: bool) {
    let mut digits = itoa::Buffer::new();
    push_left(out, &reasons::socket_state(s.state), 14);
    out.push(' ');
    push_right(out, digits.format(s.uid), 5);
    out.push(' ');
    push_right(out, digits.format(s.inode), 8);
    if s.state == state::INIT {
        return;
    }
    write_addr(out, &s.local, wide, s.state != state::LISTEN);
    if s.state == state::LISTEN {
        return;
    }
    write_addr(out, &s.peer, wide, true);
    out.push(' ');
    push_right(out, digits.format(s.interface), 4);
    if s.state == state::CLOSED {
        return;
    }
    out.push(' ');
    write_mode(out, s);
}

/// smcss-like text of a socket's owners: `users:(("redis-server",pid=42,fd=6))`.
pub fn owners_text(list: &[Owner]) -> String {
    if list.is_empty() {
        return "-".to_string();
    }
    let inner: Vec<String> = list
        .iter()
        .map(|o| {
            let name = safe(&o.name);
            match o.fd {
                Some(fd) => format!("(\"{name}\",pid={},fd={fd})", o.pid),
                None => format!("(\"{name}\",pid={},agent)", o.pid),
            }
        })
        .collect();
    format!("users:({})", inner.join(","))
}

/// The text of `smcrun ss`: smcss' header and one row per socket, with the columns `a` asks for
/// (`owners_of`: a socket's processes, for `-p`).
pub fn listing_text<'a>(
    sockets: &[&SmcSocket],
    a: &Listing,
    owners_of: impl Fn(&SmcSocket) -> &'a [Owner],
) -> String {
    let mut header = format!(
        "{:<14} {:>5} {:>8} {:<23} {:<23} {:>4} Mode",
        "State", "UID", "Inode", "Local Address", "Peer Address", "Intf"
    );
    if a.debug {
        header.push_str(" Shutd Token Sndbuf Rcvbuf Peerbuf rxprod-Cursor rxcons-Cursor rxFlags txprod-Cursor txcons-Cursor txFlags txprep-Cursor txsent-Cursor txfin-Cursor");
    }
    if a.smcr {
        header.push_str(" Role IB-device Port Linkid GID Peer-GID");
    }
    if a.smcd {
        header.push_str(" GID Token Peer-GID Peer-Token Linkid");
    }
    if a.processes {
        header.push_str("  Process");
    }
    let mut text = String::with_capacity((sockets.len() + 1) * 100);
    text.push_str(&header);
    for &s in sockets {
        text.push('\n');
        write_row(&mut text, s, a.wide);
        // Detail columns only make sense on rows that reach the Mode column.
        if !matches!(s.state, state::INIT | state::LISTEN | state::CLOSED) {
            text.push_str(&detail_columns(s, a));
        }
        if a.processes {
            text.push_str("  ");
            text.push_str(&owners_text(owners_of(s)));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linkgroup::json::lgr_id;
    use crate::ss::json::SocketView;
    use crate::ss::shown;
    use smcrun_kernel::sock_diag::AF_SMC;

    fn sock(state: u8, mode: Mode, fallback: Option<(u32, u32)>) -> SmcSocket {
        let local = "127.0.0.1:6379".parse().unwrap();
        let peer = "127.0.0.1:40000".parse().unwrap();
        SmcSocket {
            fallback,
            ..SmcSocket::new(AF_SMC, state, mode, local, peer, 42)
        }
    }

    #[test]
    fn fallback_row_and_json() {
        let s = sock(1, Mode::Fallback, Some((0x0303_0000, 0)));
        let row = socket_row(&s, false);
        assert!(row.ends_with("TCP 0x03030000/0x00000000 NOSMCDEV"), "{row}");
        let declined = sock(1, Mode::Fallback, Some((0x0500_0000, 0x0303_0000)));
        let row = socket_row(&declined, false);
        assert!(
            row.ends_with("TCP 0x05000000/0x03030000 PEERDECL/NOSMCDEV"),
            "{row}"
        );
        let j = serde_json::to_value(SocketView::new(&s)).unwrap();
        assert_eq!(j["mode"], "TCP");
        assert_eq!(j["fallback"]["reason"], "0x03030000");
        assert_eq!(j["fallback"]["reason_decoded"]["name"], "NOSMCDEV");
        assert_eq!(j["local"], "127.0.0.1:6379");
        assert_eq!(j["state"], "ACTIVE");
    }

    #[test]
    fn listen_and_init_rows_are_short() {
        let l = socket_row(&sock(10, Mode::SmcR, None), false);
        assert!(
            l.starts_with("LISTEN") && l.ends_with("127.0.0.1:6379"),
            "{l}"
        );
        let i = socket_row(&sock(2, Mode::SmcR, None), false);
        assert!(i.ends_with("42"), "{i}");
        assert!(socket_row(&sock(1, Mode::SmcR, None), false).ends_with("SMCR"));
    }

    #[test]
    fn default_filter_hides_listen_and_init() {
        let args = |all, listening| Listing {
            all,
            listening,
            ..Listing::default()
        };
        let l = sock(10, Mode::SmcR, None);
        let a = sock(1, Mode::SmcR, None);
        assert!(!shown(&l, &args(false, false)) && shown(&a, &args(false, false)));
        assert!(shown(&l, &args(true, false)) && shown(&l, &args(false, true)));
        assert!(!shown(&a, &args(false, true)));
        let only_d = Listing {
            smcd: true,
            ..args(true, false)
        };
        assert!(!shown(&a, &only_d));
        assert!(shown(&sock(1, Mode::SmcD, None), &only_d));
    }

    #[test]
    fn detail_columns_show_link_and_cursors() {
        use sock_diag::{ConnInfo, Cursor, LgrInfo};
        let mut s = sock(1, Mode::SmcR, None);
        let cur = Cursor {
            wrap: 1,
            count: 0x20,
        };
        s.conninfo = Some(ConnInfo {
            token: 0xab,
            sndbuf_size: 65536,
            rmbe_size: 65536,
            peer_rmbe_size: 65536,
            rx_prod: cur,
            rx_cons: cur,
            tx_prod: cur,
            tx_cons: cur,
            rx_prod_flags: 0,
            rx_conn_state_flags: 0,
            tx_prod_flags: 0,
            tx_conn_state_flags: 0,
            tx_prep: cur,
            tx_sent: cur,
            tx_fin: cur,
        });
        s.lgrinfo = Some(LgrInfo {
            link_id: 1,
            ibdev: "rxe_lo".into(),
            ibport: 1,
            gid: "fe80::1".into(),
            peer_gid: "fe80::2".into(),
            role: 1,
        });
        let a = Listing {
            debug: true,
            smcr: true,
            smcd: false,
            ..Listing::default()
        };
        let cols = detail_columns(&s, &a);
        assert!(cols.contains("000000ab    65536"), "{cols}");
        assert!(cols.contains("0001:00000020"), "{cols}");
        assert!(cols.ends_with("SERV rxe_lo 1 1 fe80::1 fe80::2"), "{cols}");
        let j = serde_json::to_value(SocketView::new(&s)).unwrap();
        assert_eq!(j["lgrinfo"]["ibdev"], "rxe_lo");
        assert_eq!(j["conninfo"]["sndbuf_size"], 65536);
        assert!(j.get("dmbinfo").is_none());
    }

    #[test]
    fn captured_smcd_sockets_show_their_dmb() {
        // the SMC-D kernel's reply with 2 idle redis connections open (kernel/tests/fixtures/smcd)
        let socks = sock_diag::parse(&crate::fixtures::raw("smcd", "sock_diag_ext8")).unwrap();
        let a = Listing {
            debug: false,
            smcr: false,
            smcd: true,
            ..Listing::default()
        };
        let active: Vec<&SmcSocket> = socks.iter().filter(|s| shown(s, &a)).collect();
        assert_eq!(active.len(), 4, "{socks:?}");
        for s in &active {
            let d = s.dmbinfo.as_ref().unwrap();
            // GID Token Peer-GID Peer-Token Linkid, the link group as `smcrun linkgroup` shows it
            let cols = detail_columns(s, &a);
            let c: Vec<&str> = cols.split_whitespace().collect();
            let hex = |i: usize| u64::from_str_radix(c[i], 16).unwrap();
            assert_eq!(c.len(), 5, "{cols}");
            assert!(c[..4].iter().all(|x| x.len() == 16), "{cols}");
            assert_eq!(
                (hex(0), hex(1), hex(2), hex(3)),
                (d.my_gid, d.token, d.peer_gid, d.peer_token)
            );
            assert_eq!(c[4], lgr_id(d.link_id), "{cols}");
            let j = serde_json::to_value(SocketView::new(s)).unwrap();
            assert_eq!(j["mode"], "SMCD");
            assert_eq!(j["dmbinfo"]["token"], format!("{:016x}", d.token));
            assert_eq!(j["dmbinfo"]["lgr_id"], lgr_id(d.link_id));
            assert_eq!(j["dmbinfo"]["my_gid"], j["dmbinfo"]["peer_gid"]);
            assert!(j["dmbinfo"]["my_gid_ext"].is_string());
            assert!(socket_row(s, false).ends_with(" SMCD"));
        }
        // each end writes into the other's DMB: tokens cross
        for s in &active {
            let t = s.dmbinfo.as_ref().unwrap().token;
            let peers = active
                .iter()
                .filter(|o| o.dmbinfo.as_ref().unwrap().peer_token == t)
                .count();
            assert_eq!(peers, 1);
        }
    }

    /// The row as `format!`'s padding writes it: what `write_row`, written column by column, must
    /// print byte for byte.
    fn formatted_row(s: &SmcSocket, wide: bool) -> String {
        let addr = |a: &std::net::SocketAddr| {
            let text = a.to_string();
            let text = if wide || a.is_ipv4() {
                text
            } else {
                shorten(text, false)
            };
            format!(" {text:<23}")
        };
        let mut row = format!(
            "{:<14} {:>5} {:>8}",
            reasons::socket_state(s.state),
            s.uid,
            s.inode
        );
        if s.state == state::INIT {
            return row;
        }
        row.push_str(&addr(&s.local));
        if s.state == state::LISTEN {
            return row.trim_end().to_string();
        }
        row.push_str(&addr(&s.peer));
        row.push_str(&format!(" {:>4}", s.interface));
        if s.state != state::CLOSED {
            row.push(' ');
            write_mode(&mut row, s);
        }
        row
    }

    #[test]
    fn rows_match_formatted_padding() {
        let addrs = [
            "0.0.0.0:0",
            "127.0.0.1:6379",
            "255.255.255.255:65535",
            "10.1.2.3:40000",
            "[::1]:6379",
            "[fd00:1234:5678::abcd]:65535",
            "[fe80::1%2]:80",
        ];
        let mut rows = 0;
        for (i, local) in addrs.iter().enumerate() {
            let peer = addrs[(i + 3) % addrs.len()];
            for state in [1, 2, 7, 10, 20, 99] {
                for (mode, fallback) in [
                    (Mode::SmcR, None),
                    (Mode::SmcD, None),
                    (Mode::Fallback, None),
                    (Mode::Fallback, Some((0x0303_0000, 0))),
                    (Mode::Fallback, Some((0x0500_0000, 0x0303_0000))),
                    (Mode::Unknown(9), None),
                ] {
                    let mut s = SmcSocket {
                        fallback,
                        ..SmcSocket::new(
                            AF_SMC,
                            state,
                            mode,
                            local.parse().unwrap(),
                            peer.parse().unwrap(),
                            u64::from(u32::MAX) + i as u64,
                        )
                    };
                    s.uid = [0, 65534, u32::MAX][i % 3];
                    s.interface = [0, 1, 123_456][i % 3];
                    for wide in [false, true] {
                        assert_eq!(socket_row(&s, wide), formatted_row(&s, wide), "{s:?}");
                        rows += 1;
                    }
                }
            }
        }
        assert_eq!(rows, 7 * 6 * 6 * 2);
    }

    #[test]
    fn long_addresses_are_shortened_unless_wide() {
        let long = "[fd00:1234:5678::abcd]:65535".to_string();
        assert_eq!(shorten(long.clone(), false).chars().count(), 23);
        assert!(shorten(long.clone(), false).starts_with(".."));
        assert_eq!(shorten(long.clone(), true), long);
    }
}
