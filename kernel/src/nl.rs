//! Netlink request/reply plumbing shared by every family: open a socket (netlink-sys), frame one
//! request (netlink-packet-core), collect the reply datagrams exactly as the kernel sent them, and
//! split such a byte buffer back into messages.
//!
//! Keeping the raw bytes is deliberate: `smcrun __capture` stores them as test fixtures, and the
//! parsers in this crate all start from such a buffer, so fixture tests exercise the same code as
//! live queries.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use netlink_packet_core::{
    DoneBuffer, Emitable, ErrorBuffer, ErrorMessage, NetlinkBuffer, NetlinkHeader, Parseable,
    NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP, NLMSG_OVERRUN, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_sys::{protocols, Socket, SocketAddr};

use crate::error::Error;

/// Length of `struct nlmsghdr`.
pub const HEADER_LEN: usize = 16;

/// How long to wait for the kernel before giving up on a reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// The netlink protocols this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// NETLINK_SOCK_DIAG: socket dumps (smc_diag).
    SockDiag,
    /// NETLINK_GENERIC: SMC_GEN_NETLINK, SMC_PNETID, nlctrl.
    Generic,
    /// NETLINK_RDMA: RDMA devices, links and resources.
    Rdma,
}

impl Protocol {
    /// Whether a socket of this protocol may be kept open between [`with_kept`] calls: only
    /// NETLINK_GENERIC's, which is the kernel's own. An open netlink socket holds a reference
    /// on the module that serves its protocol (ib_core for NETLINK_RDMA, sock_diag where it is
    /// a module), so keeping one would keep an operator from unloading that module.
    pub fn kept_between_calls(self) -> bool {
        self == Protocol::Generic
    }

    fn number(self) -> isize {
        match self {
            Protocol::SockDiag => protocols::NETLINK_SOCK_DIAG,
            Protocol::Generic => protocols::NETLINK_GENERIC,
            Protocol::Rdma => protocols::NETLINK_RDMA,
        }
    }
}

/// A request: message type, extra flags (NLM_F_REQUEST is always set) and the body after the
/// netlink header.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Netlink protocol to open.
    pub protocol: Protocol,
    /// `nlmsg_type`.
    pub message_type: u16,
    /// Flags besides NLM_F_REQUEST (NLM_F_DUMP, NLM_F_ACK).
    pub flags: u16,
    /// Family header and attributes.
    pub body: &'a [u8],
    /// Human name of the request for error messages ("SMC_GEN_NETLINK GET_STATS").
    pub what: &'a str,
}

/// One netlink message inside a reply buffer.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// `nlmsg_type`.
    pub message_type: u16,
    /// `nlmsg_flags`.
    pub flags: u16,
    /// `nlmsg_seq`.
    pub sequence: u32,
    /// Bytes after the 16-byte header, up to `nlmsg_len`.
    pub payload: &'a [u8],
}

fn next_sequence() -> u32 {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() | 1)
        .unwrap_or(1);
    let _ = SEQ.compare_exchange(0, start, Ordering::Relaxed, Ordering::Relaxed);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// Frame `body` behind a netlink header.
pub fn frame(message_type: u16, flags: u16, sequence: u32, body: &[u8]) -> Vec<u8> {
    let mut header = NetlinkHeader::default();
    header.length = (HEADER_LEN + body.len()) as u32;
    header.message_type = message_type;
    header.flags = flags;
    header.sequence_number = sequence;
    let mut out = vec![0u8; HEADER_LEN + body.len()];
    header.emit(&mut out[..HEADER_LEN]);
    out[HEADER_LEN..].copy_from_slice(body);
    out
}

fn open(protocol: Protocol, what: &str) -> Result<Socket, Error> {
    let mut socket = Socket::new(protocol.number()).map_err(|e| os_error(what, e))?;
    socket.bind_auto().map_err(|e| os_error(what, e))?;
    // Dumps of many sockets arrive in several datagrams; a larger buffer avoids ENOBUFS.
    let _ = socket.set_rx_buf_sz(1 << 20);
    // Ask for the kernel's own words on refusals (extended ack), without echoing our request.
    let _ = socket.set_ext_ack(true);
    let _ = socket.set_cap_ack(true);
    set_receive_timeout(&socket, REPLY_TIMEOUT);
    Ok(socket)
}

fn set_receive_timeout(socket: &Socket, timeout: Duration) {
    // a struct timeval: seconds, then microseconds (0), each a native long (as on every 64-bit
    // Linux smcrun builds for; checked below)
    const _: () =
        assert!(std::mem::size_of::<libc::timeval>() == 2 * std::mem::size_of::<libc::c_long>());
    let secs = libc::c_long::try_from(timeout.as_secs()).unwrap_or(libc::c_long::MAX);
    let mut tv = [0u8; std::mem::size_of::<libc::timeval>()];
    let (s, us) = tv.split_at_mut(std::mem::size_of::<libc::c_long>());
    s.copy_from_slice(&secs.to_ne_bytes());
    us.copy_from_slice(&(0 as libc::c_long).to_ne_bytes());
    let _ =
        smcrun_sys::sock::set_bytes(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv);
}

fn os_error(what: &str, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EAGAIN) => Error::Io {
            what: what.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no reply from the kernel within {}s",
                    REPLY_TIMEOUT.as_secs()
                ),
            ),
        },
        Some(errno) => Error::from_errno(what, errno),
        None => Error::Io {
            what: what.to_string(),
            source: e,
        },
    }
}

/// Send a dump request (NLM_F_REQUEST|NLM_F_DUMP) and return every reply datagram concatenated
/// exactly as received, through the closing NLMSG_DONE. A kernel error (NLMSG_ERROR, or a
/// negative code in NLMSG_DONE) becomes an [`Error`].
pub fn dump_raw(
    protocol: Protocol,
    message_type: u16,
    body: &[u8],
    what: &str,
) -> Result<Vec<u8>, Error> {
    exchange_with(NLM_F_DUMP, protocol, message_type, body, what)
}

/// Send a request that expects an acknowledgement (NLM_F_ACK) and return the reply bytes
/// (data messages before the ack, plus the ack itself).
pub fn transact(
    protocol: Protocol,
    message_type: u16,
    body: &[u8],
    what: &str,
) -> Result<Vec<u8>, Error> {
    exchange_with(NLM_F_ACK, protocol, message_type, body, what)
}

/// One request with `flags` (besides NLM_F_REQUEST): [`dump_raw`] and [`transact`] differ only
/// in the flag they ask with.
fn exchange_with(
    flags: u16,
    protocol: Protocol,
    message_type: u16,
    body: &[u8],
    what: &str,
) -> Result<Vec<u8>, Error> {
    exchange(&Request {
        protocol,
        message_type,
        flags,
        body,
        what,
    })
}

/// Netlink sockets kept open between requests, one per protocol, and one receive buffer: for a
/// caller that asks the kernel again and again (the exporter, every scrape), lent to the requests
/// of [`with_kept`]; after it, only the protocols [`Protocol::kept_between_calls`] says stay
/// open. A netlink socket belongs to the network namespace it was opened in: only for callers
/// that stay in theirs.
#[derive(Default)]
pub struct Kept {
    sockets: Vec<(Protocol, Socket)>,
    buf: Vec<u8>,
}

impl Kept {
    /// The sockets kept now, by protocol (for tests).
    pub fn protocols(&self) -> Vec<Protocol> {
        self.sockets.iter().map(|(p, _)| *p).collect()
    }
}

thread_local! {
    /// The sockets lent to this thread's requests by [`with_kept`], while it runs.
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with the sockets of `kept`: each request `f` makes on this thread takes its
/// protocol's socket from `kept` (opening one the first time) and gives it back after a whole
/// reply; a socket whose request failed in any way is closed instead (its queue may hold the
/// rest of that reply), and the next request opens a fresh one. The requests are the same as
/// without: each has its own sequence number and reads its reply through NLMSG_DONE or the ack.
pub fn with_kept<R>(kept: &mut Kept, f: impl FnOnce() -> R) -> R {
    /// Gives the sockets back to `kept` however `f` ends, and lends an outer [`with_kept`]'s
    /// sockets again.
    struct Lent<'a> {
        kept: &'a mut Kept,
        outer: Option<Kept>,
    }
    impl Drop for Lent<'_> {
        fn drop(&mut self) {
            let outer = self.outer.take();
            if let Some(mut k) = KEPT.with(|t| std::mem::replace(&mut *t.borrow_mut(), outer)) {
                k.sockets.retain(|(p, _)| p.kept_between_calls());
                *self.kept = k;
            }
        }
    }
    let outer = KEPT.with(|t| t.borrow_mut().replace(std::mem::take(kept)));
    let _lent = Lent { kept, outer };
    f()
}

/// Send `request` and read until NLMSG_DONE or NLMSG_ERROR for its sequence number, on a kept
/// socket inside [`with_kept`], else on a socket of its own.
pub fn exchange(request: &Request<'_>) -> Result<Vec<u8>, Error> {
    let lent = KEPT.with(|t| {
        t.borrow_mut().as_mut().map(|k| {
            let socket = k
                .sockets
                .iter()
                .position(|(p, _)| *p == request.protocol)
                .map(|i| k.sockets.swap_remove(i).1);
            (socket, std::mem::take(&mut k.buf))
        })
    });
    let Some((socket, mut buf)) = lent else {
        let socket = open(request.protocol, request.what)?;
        return exchange_on(&socket, &mut Vec::new(), request);
    };
    let socket = match socket {
        Some(s) => s,
        None => open(request.protocol, request.what)?,
    };
    let reply = exchange_on(&socket, &mut buf, request);
    KEPT.with(|t| {
        if let Some(k) = t.borrow_mut().as_mut() {
            k.buf = buf;
            if reply.is_ok() {
                k.sockets.push((request.protocol, socket));
            }
        }
    });
    reply
}

/// [`exchange`] on `socket`, receiving into `buf` (grown to [`RECV_BUFFER`] bytes when smaller).
fn exchange_on(
    socket: &Socket,
    buf: &mut Vec<u8>,
    request: &Request<'_>,
) -> Result<Vec<u8>, Error> {
    let what = request.what;
    let sequence = next_sequence();
    let packet = frame(
        request.message_type,
        NLM_F_REQUEST | request.flags,
        sequence,
        request.body,
    );
    let kernel = SocketAddr::new(0, 0);
    let sent = socket
        .send_to(&packet, &kernel, 0)
        .map_err(|e| os_error(what, e))?;
    if sent != packet.len() {
        return Err(Error::Io {
            what: what.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                format!("sent {sent} of {} bytes", packet.len()),
            ),
        });
    }
    let mut raw = Vec::new();
    buf.clear();
    buf.reserve(RECV_BUFFER);
    loop {
        let datagram = receive(socket, buf, what)?;
        if datagram.is_empty() {
            return Err(Error::malformed(what, "empty datagram before NLMSG_DONE"));
        }
        let mut finished = false;
        for message in Messages::new(datagram) {
            let message = message.map_err(|d| Error::malformed(what, d))?;
            if message.sequence != sequence {
                continue;
            }
            match control(&message) {
                Control::Data => {}
                Control::Done(0) | Control::Ack => finished = true,
                Control::Done(code) => return Err(Error::from_errno(what, code.saturating_abs())),
                Control::Error(code, text) => return Err(refusal(what, code, text)),
                Control::Bad(detail) => return Err(Error::malformed(what, detail)),
            }
        }
        raw.extend_from_slice(datagram);
        if finished {
            return Ok(raw);
        }
    }
}

/// Bytes of one receive call. The kernel sizes a dump's datagrams after the largest receive
/// buffer it has seen on the socket (up to 32 KiB): with netlink-sys' peek-then-read of exactly
/// one datagram it stayed at one page, so a dump of 10,000 SMC sockets came in ~200 datagrams
/// and smc_diag walked its socket list from the start ~200 times; with this it is ~30.
const RECV_BUFFER: usize = 256 * 1024;

/// One datagram into `buf` (reused), or an error for a datagram larger than the buffer.
fn receive<'b>(socket: &Socket, buf: &'b mut Vec<u8>, what: &str) -> Result<&'b [u8], Error> {
    buf.clear();
    let (n, _) = socket
        .recv_from(buf, libc::MSG_TRUNC)
        .map_err(|e| os_error(what, e))?;
    if n > buf.capacity() {
        return Err(Error::malformed(
            what,
            format!("a reply datagram of {n} bytes exceeds the {RECV_BUFFER}-byte buffer"),
        ));
    }
    Ok(&buf[..n])
}

/// What a message means for the request/reply protocol.
#[derive(Debug, PartialEq, Eq)]
enum Control {
    Data,
    Done(i32),
    Ack,
    Error(i32, Option<String>),
    Bad(String),
}

/// NLMSGERR_ATTR_MSG: the kernel's text explaining an error.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// NLM_F_CAPPED: the error message echoes only the request's header.
const NLM_F_CAPPED: u16 = 0x100;
/// NLM_F_ACK_TLVS: extended ack attributes follow.
const NLM_F_ACK_TLVS: u16 = 0x200;

/// The extended-ack message text of an NLMSG_ERROR, if the kernel sent one.
fn ext_ack_text(message: &Message<'_>) -> Option<String> {
    if message.flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    let p = message.payload;
    // error code, then the echoed request: its header only when capped, else all of it
    let echoed = p
        .get(4..8)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)?;
    let skip = 4 + if message.flags & NLM_F_CAPPED != 0 {
        HEADER_LEN
    } else {
        echoed.div_ceil(4) * 4
    };
    let tlvs = p.get(skip..)?;
    crate::attr::parse(tlvs, "extended ack")
        .ok()?
        .into_iter()
        .find(|a| a.kind == NLMSGERR_ATTR_MSG)
        .map(|a| a.string())
        .filter(|t| !t.is_empty())
}

fn refusal(what: &str, code: i32, text: Option<String>) -> Error {
    match text {
        Some(t) => Error::from_errno(format!("{what} (kernel: {t})"), code.saturating_abs()),
        None => Error::from_errno(what, code.saturating_abs()),
    }
}

fn control(message: &Message<'_>) -> Control {
    match message.message_type {
        NLMSG_DONE => {
            if message.payload.is_empty() {
                return Control::Done(0);
            }
            match DoneBuffer::new_checked(&message.payload) {
                Ok(done) => Control::Done(done.code()),
                Err(e) => Control::Bad(format!("NLMSG_DONE: {e}")),
            }
        }
        NLMSG_ERROR => {
            match ErrorBuffer::new_checked(&message.payload).and_then(|b| ErrorMessage::parse(&b)) {
                Ok(err) if err.raw_code() == 0 => Control::Ack,
                Ok(err) => Control::Error(err.raw_code(), ext_ack_text(message)),
                Err(e) => Control::Bad(format!("NLMSG_ERROR: {e}")),
            }
        }
        NLMSG_OVERRUN => Control::Bad("NLMSG_OVERRUN: the kernel dropped part of the reply".into()),
        NLMSG_NOOP => Control::Data,
        _ => Control::Data,
    }
}

/// Iterator over the netlink messages in a buffer; yields an error (and stops) on bad framing.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Messages<'a> {
    /// Walk the messages of `buf` (one or more datagrams concatenated).
    pub fn new(buf: &'a [u8]) -> Self {
        Messages { buf, pos: 0 }
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let at = self.pos;
        match NetlinkBuffer::new_checked(rest) {
            Ok(nb) => {
                let length = nb.length() as usize;
                let message = Message {
                    message_type: nb.message_type(),
                    flags: nb.flags(),
                    sequence: nb.sequence_number(),
                    payload: &rest[HEADER_LEN..length],
                };
                // Messages are 4-byte aligned; the last one may lack its padding.
                self.pos += length.div_ceil(4) * 4;
                Some(Ok(message))
            }
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(format!("bad netlink message at byte {at}: {e}")))
            }
        }
    }
}

/// The data messages of a reply buffer, in order: skips NLMSG_DONE (so several dumps saved one
/// after the other, e.g. one per RDMA device, read as one), acks and NOOPs, and turns
/// NLMSG_ERROR with a non-zero code into [`Error::Kernel`]. `what` names the reply for errors.
pub fn data_messages<'a>(buf: &'a [u8], what: &str) -> Result<Vec<Message<'a>>, Error> {
    let mut out = Vec::new();
    for message in Messages::new(buf) {
        let message = message.map_err(|d| Error::malformed(what, d))?;
        match control(&message) {
            Control::Data if message.message_type == NLMSG_NOOP => {}
            Control::Data => out.push(message),
            Control::Ack => {}
            Control::Done(0) => {}
            Control::Done(code) => return Err(Error::from_errno(what, code.saturating_abs())),
            Control::Error(code, text) => return Err(refusal(what, code, text)),
            Control::Bad(detail) => return Err(Error::malformed(what, detail)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_sockets_are_reused_and_dropped_after_a_failure() {
        let mut kept = Kept::default();
        // nlctrl is in every kernel: its own family resolves.
        let first = with_kept(&mut kept, || crate::genl::resolve("nlctrl", "none"));
        let first = first.expect("nlctrl resolves");
        assert_eq!(kept.protocols(), vec![Protocol::Generic]);
        assert!(kept.buf.capacity() >= RECV_BUFFER);
        // The same socket again, and the same answer (one request each, read to its ack).
        let again = with_kept(&mut kept, || {
            (0..3)
                .map(|_| crate::genl::resolve("nlctrl", "none"))
                .collect::<Vec<_>>()
        });
        assert!(again.iter().all(|f| f.as_ref().ok() == Some(&first)));
        assert_eq!(kept.protocols(), vec![Protocol::Generic]);
        // A refused request closes its socket; the next one opens another.
        let refused = with_kept(&mut kept, || {
            crate::genl::resolve("no_such_family", "smcrun_none")
        });
        assert!(refused.is_err());
        assert!(kept.protocols().is_empty());
        with_kept(&mut kept, || crate::genl::resolve("nlctrl", "none")).expect("nlctrl again");
        assert_eq!(kept.protocols(), vec![Protocol::Generic]);
        // Outside with_kept nothing is kept or lent.
        crate::genl::resolve("nlctrl", "none").expect("nlctrl without kept sockets");
        assert_eq!(kept.protocols(), vec![Protocol::Generic]);
    }

    #[test]
    fn only_generic_netlink_sockets_stay_open_between_calls() {
        // NETLINK_RDMA and NETLINK_SOCK_DIAG sockets pin ib_core and sock_diag.
        assert!(Protocol::Generic.kept_between_calls());
        assert!(!Protocol::Rdma.kept_between_calls());
        assert!(!Protocol::SockDiag.kept_between_calls());
        let mut kept = Kept::default();
        let inside = with_kept(&mut kept, || {
            // TCP's sock_diag dump (tcp_diag) answers wherever the host has IPv4.
            crate::sock_diag::tcp_dump_raw(libc::AF_INET as u8).expect("a TCP sock_diag dump");
            crate::genl::resolve("nlctrl", "none").unwrap();
            KEPT.with(|t| t.borrow().as_ref().map(Kept::protocols))
        });
        // Both kept while lent, only the generic one after.
        let mut inside = inside.unwrap();
        inside.sort_by_key(|p| p.kept_between_calls());
        assert_eq!(inside, vec![Protocol::SockDiag, Protocol::Generic]);
        assert_eq!(kept.protocols(), vec![Protocol::Generic]);
    }

    #[test]
    fn nested_with_kept_lends_the_outer_sockets_again() {
        let (mut outer, mut inner) = (Kept::default(), Kept::default());
        with_kept(&mut outer, || {
            with_kept(&mut inner, || crate::genl::resolve("nlctrl", "none")).unwrap();
            crate::genl::resolve("nlctrl", "none").unwrap();
        });
        assert_eq!(outer.protocols(), vec![Protocol::Generic]);
        assert_eq!(inner.protocols(), vec![Protocol::Generic]);
        // A panic inside still gives the sockets back.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_kept(&mut inner, || panic!("inside"))
        }));
        assert!(r.is_err());
        assert_eq!(inner.protocols(), vec![Protocol::Generic]);
    }

    fn done(seq: u32) -> Vec<u8> {
        frame(NLMSG_DONE, 2, seq, &0i32.to_ne_bytes())
    }

    #[test]
    fn frame_then_walk_round_trips() {
        let mut buf = frame(20, 2, 7, &[1, 2, 3]);
        buf.push(0); // alignment padding
        buf.extend(frame(20, 2, 7, &[4, 5, 6, 7]));
        buf.extend(done(7));
        let msgs = data_messages(&buf, "t").unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].payload, &[1, 2, 3]);
        assert_eq!(msgs[1].payload, &[4, 5, 6, 7]);
        assert_eq!(msgs[1].sequence, 7);
    }

    #[test]
    fn concatenated_dumps_read_as_one() {
        let mut buf = frame(20, 2, 1, &[9; 4]);
        buf.extend(done(1));
        buf.extend(frame(20, 2, 2, &[8; 4]));
        buf.extend(done(2));
        let msgs = data_messages(&buf, "t").unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!((msgs[0].sequence, msgs[1].sequence), (1, 2));
    }

    #[test]
    fn error_message_becomes_kernel_error() {
        let mut body = (-libc::ENOENT).to_ne_bytes().to_vec();
        body.extend(frame(20, 0x301, 1, &[]));
        let buf = frame(NLMSG_ERROR, 0, 1, &body);
        let e = data_messages(&buf, "dump").unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENOENT));
    }

    #[test]
    fn extended_ack_text_is_kept() {
        let mut body = (-libc::EINVAL).to_ne_bytes().to_vec();
        body.extend(frame(0x1e, 0x5, 1, &[]));
        body.extend(
            crate::attr::Writer::new()
                .string(NLMSGERR_ATTR_MSG, "bad UEID")
                .finish(),
        );
        let buf = frame(NLMSG_ERROR, NLM_F_CAPPED | NLM_F_ACK_TLVS, 1, &body);
        let e = data_messages(&buf, "ADD_UEID").unwrap_err();
        assert_eq!(e.errno(), Some(libc::EINVAL));
        assert!(e.to_string().contains("(kernel: bad UEID)"), "{e}");
        // uncapped: the whole request is echoed before the attributes
        let mut body = (-libc::EINVAL).to_ne_bytes().to_vec();
        body.extend(frame(0x1e, 0x5, 1, &[1, 2, 3, 4, 5]));
        body.extend([0, 0, 0]);
        body.extend(
            crate::attr::Writer::new()
                .string(NLMSGERR_ATTR_MSG, "why")
                .finish(),
        );
        let buf = frame(NLMSG_ERROR, NLM_F_ACK_TLVS, 1, &body);
        assert!(data_messages(&buf, "x")
            .unwrap_err()
            .to_string()
            .contains("(kernel: why)"));
        // flags claim TLVs but the bytes are short: still the plain errno
        let buf = frame(
            NLMSG_ERROR,
            NLM_F_ACK_TLVS,
            1,
            &(-libc::EPERM).to_ne_bytes(),
        );
        assert!(data_messages(&buf, "x").unwrap_err().is_not_permitted());
    }

    #[test]
    fn negative_done_code_is_an_error() {
        let buf = frame(NLMSG_DONE, 2, 1, &(-libc::EPERM).to_ne_bytes());
        assert!(data_messages(&buf, "dump").unwrap_err().is_not_permitted());
    }

    #[test]
    fn ack_is_skipped() {
        let mut body = 0i32.to_ne_bytes().to_vec();
        body.extend(frame(20, 0x5, 1, &[]));
        let buf = frame(NLMSG_ERROR, 0x100, 1, &body);
        assert!(data_messages(&buf, "add").unwrap().is_empty());
    }

    #[test]
    fn every_truncation_is_an_error_or_fewer_messages_never_a_panic() {
        let mut buf = frame(20, 2, 1, &[1; 12]);
        buf.extend(frame(20, 2, 1, &[2; 8]));
        buf.extend(done(1));
        for cut in 0..buf.len() {
            let got = data_messages(&buf[..cut], "t");
            if let Ok(msgs) = got {
                assert!(msgs.len() <= 2);
            }
        }
        for i in 0..buf.len() {
            for v in [0u8, 1, 3, 0x7f, 0xff] {
                let mut bad = buf.clone();
                bad[i] = v;
                let _ = data_messages(&bad, "t");
            }
        }
    }

    #[test]
    fn length_shorter_than_header_is_rejected() {
        let mut buf = frame(20, 2, 1, &[0; 4]);
        buf[0] = 8; // nlmsg_len smaller than the header
        let e = data_messages(&buf, "t").unwrap_err();
        assert!(matches!(e, Error::Malformed { .. }), "{e}");
    }
}
