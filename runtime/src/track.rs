//! What the shim's hooks tell the runtime, one function per event. Each is called inside a hook
//! (maybe inside a signal handler, or a forked child): atomics and raw system calls only, no
//! allocation, no lock, errno left as it was.
//!
//! The rule that makes the counts exact: a connection is counted once, by whoever moves its fd's
//! entry out of "connecting" or "pending" with a compare-and-swap; a TCP connection from the start
//! is counted by the hook that sees it established; an SMC connection is classified by the
//! sidecar while it is open, or, if the program closes it first, coarsely by the close hook (still
//! SMC, or fallen back, from its real family alone).

use crate::counters::{bump, COUNTS};
use crate::fdtable::{self, Entry, Kind, Phase, WHY_NOT_OURS, WHY_UNRECORDED};
use crate::record::{self, Record};
use crate::sidecar;
use smcrun_classify::{self as classify, Outcome};
use smcrun_rundir::write as rundir;
use smcrun_sys::errno::keep;
use smcrun_sys::smc::SocketKind;
use smcrun_sys::sock::{self, TcpState};
use std::net::SocketAddr;

/// Counts an outcome decided for a connection (and lets the sidecar know the report changed).
pub(crate) fn count(o: Outcome) {
    sidecar::wake();
    let c = &COUNTS;
    match o {
        Outcome::SmcR => bump(&c.smc_r),
        Outcome::SmcD => bump(&c.smc_d),
        Outcome::SmcUnknown => bump(&c.smc_unknown),
        Outcome::Fallback { .. } => bump(&c.fallback),
        Outcome::FallbackUnseen => bump(&c.fallback_unseen),
        Outcome::Tcp(w) => bump(&c.tcp_from_start[usize::from(w)]),
    }
}

/// What an entry replaced without the close hook seeing its fd closed (dup2, close_range, a
/// close the shim does not see) leaves behind: a connection still waiting is counted as not
/// classified.
fn retire(old: Option<Entry>) {
    if let Some(e) = old.filter(Entry::ours) {
        match e.phase {
            Phase::Pending => {
                bump(&COUNTS.unclassified);
                sidecar::wake();
            }
            Phase::Connecting => {
                sidecar::wake();
                // Maybe a connection, maybe a failed connect: shown as a connection not classified
                // (its outcome counted before the total: see `sidecar::report`).
                bump(&COUNTS.unclassified);
                bump(&COUNTS.connections);
            }
            _ => {}
        }
    }
}

/// The process made (or got) its first TCP socket: its report file, and the sidecar. (Not in
/// the crate's unit tests, which drive the state machine by hand.)
fn touch() {
    if cfg!(test) {
        return;
    }
    rundir::register(fdtable::epoch(), fdtable::owned);
    sidecar::maybe_start();
}

/// `socket()` made a TCP socket: an SMC one, or a TCP one (with the reason). Inlined into the
/// socket hook, where `kind` is known: its word is then mostly constants.
#[inline]
pub fn socket_made(fd: i32, kind: Kind) {
    bump(match kind {
        Kind::Smc => &COUNTS.converted,
        Kind::Tcp(_) => &COUNTS.tcp_at_creation,
    });
    sidecar::wake();
    let (_, old) = fdtable::set(fd, Entry::new(kind, Phase::Open, false));
    retire(old);
    touch();
}

/// `socket()` made a socket the shim does not touch (UDP, UNIX, ...) on `fd`. Atomics, and a
/// futex wake when a connection of ours was on `fd` before (its close was missed: close_range,
/// dup2): no errno, no lock, no allocation, so that the socket hook calls it without its guard.
#[inline]
pub fn other_socket_made(fd: i32) {
    bump(&COUNTS.untouched);
    if fdtable::get(fd).is_some() {
        retire(fdtable::clear(fd));
    }
}

/// The policy turned SMC socket `fd` to TCP (before it connected or listened).
pub fn policy_tcp(fd: i32) {
    if let Some(e) = fdtable::get(fd) {
        fdtable::transition(
            fd,
            e,
            Some(Entry {
                kind: Kind::Tcp(fdtable::WHY_POLICY),
                ..e
            }),
        );
    }
}

/// `listen()` succeeded on `fd`.
pub fn listening(fd: i32) {
    if let Some(e) = fdtable::get(fd) {
        fdtable::transition(fd, e, Some(e.with(Phase::Listening)));
    }
}

/// The connection on `fd` (entry `e`) is established: counted now when it is TCP from the start,
/// queued for the sidecar when it is an SMC socket. False when someone else got there first.
pub(crate) fn established(
    fd: i32,
    e: Entry,
    remote: Option<SocketAddr>,
    local: Option<SocketAddr>,
) -> bool {
    let to = match e.kind {
        Kind::Tcp(_) => Phase::Done,
        Kind::Smc => Phase::Pending,
    };
    if !fdtable::transition(fd, e, Some(e.with(to))) {
        return false;
    }
    // A TCP connection's outcome is counted before the total, so that a report read meanwhile
    // never shows it as pending (it never was): the report reads the total first.
    if let Kind::Tcp(why) = e.kind {
        count(Outcome::Tcp(why));
    }
    bump(&COUNTS.connections);
    match e.kind {
        Kind::Tcp(why) => {
            let o = Outcome::Tcp(why);
            record::push(Record {
                fd,
                server: e.server,
                outcome: o,
                remote,
                local,
            });
        }
        Kind::Smc => sidecar::wake_now(),
    }
    true
}

/// A connection on an fd beyond the table: counted, TCP with the reason unrecorded, or SMC that
/// cannot be followed (not classified).
fn untracked_connection(fd: i32) {
    match keep(|| sock::kind(fd)) {
        Ok(SocketKind::Ip) => {
            count(Outcome::Tcp(WHY_UNRECORDED));
            bump(&COUNTS.connections);
        }
        Ok(SocketKind::AfSmc | SocketKind::IpprotoSmc) => {
            bump(&COUNTS.unclassified);
            bump(&COUNTS.connections);
            sidecar::wake();
        }
        _ => {}
    }
}

/// A connect that failed is counted (not a connection).
fn failed_connect() {
    bump(&COUNTS.failed_connects);
    sidecar::wake();
}

/// `connect()` returned `ret` with `errno` on `fd`, to `remote`.
pub fn connect_returned(fd: i32, ret: i32, errno: i32, remote: Option<SocketAddr>) {
    let Some(e) = fdtable::get(fd) else {
        if fd as usize >= fdtable::LIMIT && ret == 0 {
            untracked_connection(fd);
        }
        return;
    };
    let e = if e.ours() {
        e
    } else if e.phase == Phase::Open {
        // A socket an ancestor made and this process connects: the connection is this one's.
        let mine = Entry {
            epoch: fdtable::epoch(),
            ..e
        };
        if !fdtable::transition(fd, e, Some(mine)) {
            return;
        }
        mine
    } else {
        return; // an ancestor's connection
    };
    match (ret, errno, e.phase) {
        (0, _, Phase::Open | Phase::Connecting) | (_, libc::EISCONN, Phase::Connecting) => {
            established(fd, e, remote, None);
        }
        (_, libc::EINPROGRESS, Phase::Open)
            if fdtable::transition(fd, e, Some(e.with(Phase::Connecting))) =>
        {
            sidecar::wake_now();
        }
        (_, libc::EALREADY | libc::EINPROGRESS | libc::EINTR, _) => {}
        (r, _, Phase::Open | Phase::Connecting)
            if r != 0 && fdtable::transition(fd, e, Some(e.with(Phase::Open))) =>
        {
            failed_connect();
        }
        _ => {}
    }
}

/// The program read `SO_ERROR` of `fd` (value `err`): the end of a nonblocking connect.
pub fn so_error_read(fd: i32, err: i32) {
    let Some(e) = fdtable::get(fd).filter(|e| e.ours() && e.phase == Phase::Connecting) else {
        return;
    };
    if err != 0 {
        if fdtable::transition(fd, e, Some(e.with(Phase::Open))) {
            failed_connect();
        }
    } else if keep(|| sock::tcp_state(fd)) == Ok(TcpState::Connected) {
        let remote = keep(|| sock::peer_addr(fd)).ok().flatten();
        established(fd, e, remote, None);
    }
}

/// `accept()` returned connection `fd` from `listener`. `refusal` tells, when asked, the errno
/// with which this kernel refuses SMC sockets for good (None: it makes them, or it is not known).
///
/// The peer's address is read from the new socket into a buffer of the runtime's own (the
/// program's buffer, if it gave one, is not read: see the shim's accept hook), so a server that
/// accepts with no address buffer (libuv's `accept4(fd, NULL, NULL, ...)`) has its remotes too.
pub fn accepted(listener: i32, fd: i32, refusal: impl FnOnce() -> Option<i32>) {
    let kind = match fdtable::get(listener) {
        Some(l) => l.kind,
        // A listener the shim never saw made (inherited across exec, socket activation): the new
        // socket itself says whether it is SMC.
        None => match keep(|| sock::identity(fd)).map(|(d, p)| (SocketKind::of(d, p), p)) {
            Ok((k, _)) if k.is_smc() => Kind::Smc,
            Ok((SocketKind::Ip, p)) => Kind::Tcp(inherited_tcp(p, refusal)),
            _ => return, // a UNIX listener, or gone
        },
    };
    bump(&COUNTS.accepts);
    let (stored, old) = fdtable::set(fd, Entry::new(kind, Phase::Open, true));
    retire(old);
    touch();
    let Some(entry) = stored else {
        untracked_connection(fd);
        return;
    };
    let (remote, local) = match kind {
        Kind::Tcp(_) => (
            keep(|| sock::peer_addr(fd)).ok().flatten(),
            keep(|| sock::local_addr(fd)).ok().flatten(),
        ),
        Kind::Smc => (None, None), // the sidecar reads them when it classifies the connection
    };
    established(fd, entry, remote, local);
}

/// Why a TCP connection accepted from a listener the shim never saw is TCP, with what can be
/// known without the listener's story: a TCP socket (protocol `protocol`) on a kernel that refuses
/// SMC sockets for good could not have been SMC whoever made the listener, so that refusal is the
/// reason; otherwise (an SMC-capable kernel, MPTCP, a refusal that passes) only that the listener
/// was not made under smcrun.
fn inherited_tcp(protocol: i32, refusal: impl FnOnce() -> Option<i32>) -> fdtable::Why {
    if protocol != libc::IPPROTO_TCP {
        return WHY_NOT_OURS;
    }
    refusal().map_or(WHY_NOT_OURS, fdtable::why_errno)
}

/// Whether closing `fd` is none of the runtime's business: no socket the shim handled is on it and
/// it is not one of the runtime's own files. Atomic loads only, so that the close hooks can take
/// their fast path (most closes are of files, pipes and other sockets) without their guard.
#[inline]
pub fn close_is_untouched(fd: i32) -> bool {
    close_look(fd).is_none()
}

/// The close hook's first look at `fd`: None when closing it is none of the runtime's business
/// (see [`close_is_untouched`]), else the fd's word as read now (no entry in it: one of the
/// runtime's own files), which [`closing`] takes so as not to read it again.
#[inline]
pub fn close_look(fd: i32) -> Option<fdtable::Seen> {
    let seen = fdtable::look(fd);
    (seen.is_entry() || rundir::holds(fd)).then_some(seen)
}

/// The program is about to close every fd from `first` to `last` (close_range, closefrom): the
/// runtime's own files leave the range first. The sockets in it are the caller's to close one by
/// one ([`closing`]), up to [`fdtable::end`].
pub fn closing_range(first: i32, last: i32) {
    rundir::before_close_range(first, last);
}

/// The program is about to close `fd`, whose word was `seen` a moment ago (by [`close_look`], or
/// `fdtable::look`). Inlined into the close hook: most closes end in the first lines (a socket
/// that never connected, a connection already counted, an ancestor's), with one compare-and-swap
/// from what was seen; when the entry changed meanwhile, it is looked at again.
#[inline]
pub fn closing(fd: i32, seen: fdtable::Seen) {
    rundir::before_close(fd);
    if seen.is_entry() && !seen.waits() && fdtable::forget_seen(fd, seen) {
        return;
    }
    closing_again(fd);
}

/// Whether the close of a socket with entry `e` has nothing to count: not this process's
/// connection, or not one waiting (made, listening, counted).
#[inline]
fn settled(e: Entry) -> bool {
    !e.ours() || !matches!(e.phase, Phase::Pending | Phase::Connecting)
}

/// [`closing`] with a fresh look at `fd`'s entry, out of line: a connection not counted yet, or an
/// entry that changed since it was seen.
#[inline(never)]
fn closing_again(fd: i32) {
    let Some(e) = fdtable::get(fd) else { return };
    if settled(e) {
        fdtable::clear(fd);
        return;
    }
    closing_unsettled(fd, e);
}

/// [`closing`] of a connection not counted yet.
fn closing_unsettled(fd: i32, e: Entry) {
    // One look at what the socket has become, with raw getsockopt calls: the close is not held up
    // for an smc_diag dump.
    let outcome = match e.phase {
        Phase::Connecting => match keep(|| sock::tcp_state(fd)) {
            Ok(TcpState::Connected) => {
                let remote = keep(|| sock::peer_addr(fd)).ok().flatten();
                if !established(fd, e, remote, None) {
                    return close_settled(fd);
                }
                match e.kind {
                    Kind::Tcp(_) => return close_settled(fd),
                    Kind::Smc => Some(e.with(Phase::Pending)),
                }
            }
            // Closed before the connect completed, or after it failed: not a connection.
            _ => {
                if fdtable::transition(fd, e, None) {
                    failed_connect();
                }
                return;
            }
        },
        _ => Some(e),
    };
    let Some(pending) = outcome else { return };
    if fdtable::transition(fd, pending, None) {
        match keep(|| sock::kind(fd)).ok().and_then(classify::at_close) {
            Some(o) => {
                count(o);
                let remote = keep(|| sock::peer_addr(fd)).ok().flatten();
                record::push(Record {
                    fd,
                    server: e.server,
                    outcome: o,
                    remote,
                    local: None,
                });
            }
            None => {
                bump(&COUNTS.unclassified);
                sidecar::wake();
            }
        }
    }
}

/// Forgets `fd` once its connection is settled (the sidecar or another thread counted it).
fn close_settled(fd: i32) {
    fdtable::clear(fd);
}

/// The program is about to switch its uid (setuid and kin): its report file is opened now, while
/// it can still be made in the run directory of the user who started it.
pub fn before_uid_change() {
    rundir::register(fdtable::epoch(), fdtable::owned);
}

/// A call of the program's that makes a descriptor failed with EMFILE: the runtime gives up its
/// own descriptors, if it holds any (true: the call is worth making again). errno is kept.
pub fn out_of_fds() -> bool {
    keep(|| rundir::give_up_fds(fdtable::owned))
}

/// In a forked child, right after fork (pthread_atfork's child handler): a new epoch, zero counts,
/// no sidecar yet (threads do not survive fork), and a report file of its own.
pub fn after_fork_in_child() {
    fdtable::own();
    fdtable::new_epoch_in_child();
    COUNTS.reset();
    // SAFETY: the child of fork has a single thread until it makes another.
    unsafe { record::reset_in_child() };
    sidecar::forget_in_child();
    crate::drain::forget_in_child();
    rundir::register_child(fdtable::epoch(), fdtable::owned);
}
