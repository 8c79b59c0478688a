//! SMC's half-close can lose the end of a stream; TCP's cannot. The shim waits for the send
//! buffer before it lets an SMC socket's `shutdown(SHUT_WR)` through.
//!
//! Linux's `smc_close_shutdown_write` (net/smc/smc_close.c, 6.12) waits for the send buffer to
//! drain for at most `SMC_MAX_STREAM_WAIT_TIMEOUT` (2 s; the linger time with SO_LINGER), then
//! cancels the send work and tells the peer "done writing" with the rest still unsent: the peer
//! reads a clean EOF, short. TCP queues its FIN behind the data and sends all of it. A reader that
//! is late by more than 2 s (a busy peer, an emulated host) loses data that a TCP program would
//! have had: seen in the VM test bed with a native AF_SMC program and no shim (tests/vm/README.md,
//! "The integrity soak"), and by the JDK's `shutdownOutput()` under smcrun.
//!
//! So a `SHUT_WR` or `SHUT_RDWR` on a socket that still runs over SMC (its real
//! `SO_DOMAIN`/`SO_PROTOCOL` say SMC; a fallen-back socket reads as TCP and is left alone) with
//! bytes unsent (`SIOCOUTQNSD`) is handed to the runtime's drainer, which makes it once they are
//! out, and the call returns at once, as TCP's does (see `smcrun_runtime::drain`: blocking here
//! deadlocked the JDK, whose readers wait for the lock its `shutdownOutput()` holds). Where the
//! drainer cannot take it, the shim waits here while the bytes keep leaving: when none has left
//! for [`STALL_MS`] the peer is taken to have stopped reading and the call goes through as it
//! would have. System calls only: no lock, no allocation.

use libc::c_int;
use smcrun_runtime::drain::{Look, Progress, STALL_MS};
use smcrun_runtime::fdtable::{self, Kind, Phase};
use smcrun_sys::smc::SocketKind;
use smcrun_sys::sock;

/// Before `shutdown(fd, how)`: for an SMC socket whose send buffer still holds bytes, hands the
/// shutdown to the runtime's drainer, which makes it once they are out (true: the caller returns
/// 0 and makes no call), or, where the drainer cannot take it, waits here until the buffer is
/// empty or stalled for [`STALL_MS`] (false: the caller makes the call). Does nothing for other
/// sockets, other `how`s, or when the kernel cannot say.
pub fn before_shutdown(fd: c_int, how: c_int) -> bool {
    if how != libc::SHUT_WR && how != libc::SHUT_RDWR {
        return false;
    }
    if !matches!(
        sock::kind(fd),
        Ok(SocketKind::AfSmc | SocketKind::IpprotoSmc)
    ) {
        return false;
    }
    let first = match sock::unsent(fd) {
        Ok(n) if n > 0 => n,
        _ => return false,
    };
    let debug = crate::config::get().debug;
    if smcrun_runtime::drain::defer(fd, how, debug) {
        if debug >= 2 {
            crate::debug::line!(
                "shutdown(fd {fd}): {first} bytes unsent: made when they are out, in the background"
            );
        }
        return true;
    }
    let (verdict, p) = wait_while_leaving(first, || sock::unsent(fd).ok());
    tell(Waiter::Shutdown(fd), verdict, &p, debug);
    false
}

/// Who waited for a send buffer, for [`tell`].
enum Waiter {
    /// `shutdown` of this fd.
    Shutdown(c_int),
    /// The process's end, for all its connections.
    Exit,
}

impl core::fmt::Display for Waiter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Waiter::Shutdown(fd) => write!(f, "shutdown(fd {fd})"),
            Waiter::Exit => f.write_str("exit"),
        }
    }
}

/// The `SMCRUN_DEBUG` line of a wait for unsent bytes: a stall at level 1, a wait that ended
/// with everything out at level 2.
fn tell(who: Waiter, verdict: Look, p: &Progress, debug: u8) {
    match verdict {
        Look::Stalled(n) if debug >= 1 => crate::debug::line!(
            "{who}: {n} bytes still unsent after {} s without progress: the peer has stopped reading, and the kernel may drop them",
            STALL_MS / 1000
        ),
        Look::Done if debug >= 2 => crate::debug::line!(
            "{who}: waited about {} ms for {} unsent bytes to leave",
            p.waited_ms,
            p.first
        ),
        _ => {}
    }
}

/// Waits while the bytes `unsent()` counts keep leaving: until none is left (or the kernel no
/// longer says), or none has left for [`STALL_MS`] (the peer stopped reading). The verdict, and
/// how the wait went.
fn wait_while_leaving(first: c_int, unsent: impl Fn() -> Option<c_int>) -> (Look, Progress) {
    let mut p = Progress::new(first);
    loop {
        sleep_ms(p.nap_ms);
        match p.look(unsent()) {
            Look::Again => {}
            verdict => return (verdict, p),
        }
    }
}

/// Before the process ends: after the program's exit handlers, or in `_exit`. The kernel closes
/// what is still open then with no wait at all (`smc_close_active` takes a timeout of 0 for an
/// exiting task, whatever the linger), so an SMC socket's unsent bytes would be dropped where
/// TCP's are sent after the process is gone: a server that writes its answer and exits without
/// a close, or a shutdown still finishing in the background, would cut the peer's stream short.
/// So the deferred shutdowns are finished first, then the process waits while the unsent bytes
/// of its own SMC connections keep leaving (those it made or accepted itself: a forked child's
/// inherited sockets are its parent's too, and a child's exit must not wait on the parent's
/// traffic), until none is left or none has left for [`STALL_MS`]. Not in a vfork child, whose
/// sockets are its parent's. System calls only: no lock, no allocation.
pub fn before_exit() {
    if !smcrun_sys::errno::keep(fdtable::owned) {
        return;
    }
    smcrun_runtime::drain::wait_at_exit();
    let first = own_unsent();
    if first == 0 {
        return;
    }
    let (verdict, p) = wait_while_leaving(first, || Some(own_unsent()));
    tell(Waiter::Exit, verdict, &p, crate::config::get().debug);
}

/// The unsent bytes of this process's own connected SMC sockets, added up.
fn own_unsent() -> c_int {
    let mut total: c_int = 0;
    fdtable::scan(&[Phase::Pending, Phase::Done], |fd, e| {
        if e.kind == Kind::Smc
            && matches!(
                sock::kind(fd),
                Ok(SocketKind::AfSmc | SocketKind::IpprotoSmc)
            )
        {
            total = total.saturating_add(sock::unsent(fd).unwrap_or(0).max(0));
        }
    });
    total
}

/// How long the kernel may wait in an SMC socket's last close for its send buffer, in seconds
/// (the SO_LINGER [`before_close`] sets): the same bound as the shutdown wait's stall.
pub const CLOSE_LINGER_S: c_int = (STALL_MS / 1000) as c_int;

/// Before `close(fd)` of an SMC socket that still holds unsent bytes: SO_LINGER on, for
/// [`CLOSE_LINGER_S`], unless the program set a linger of its own.
///
/// The kernel's close of an SMC connection (`smc_close_active`) waits the same 2 s as its
/// shutdown, then drops what is unsent: a server that writes its answer and closes loses the tail
/// when the client reads late (the JDK's echo server under load in the VM lost 32 KiB of 2 MiB).
/// The shim cannot wait here as it does in shutdown: this close may not be the socket's last
/// reference (a dup, or a child that got it at fork, keeps it and must not be held up). SO_LINGER
/// makes the kernel's own wait, which runs only when the last reference goes, last longer
/// instead; a program's own SO_LINGER (an abortive `{1, 0}`, say) is left as it is. System calls
/// only: no lock, no allocation.
pub fn before_close(fd: c_int) {
    if !matches!(
        sock::kind(fd),
        Ok(SocketKind::AfSmc | SocketKind::IpprotoSmc)
    ) {
        return;
    }
    if !matches!(sock::unsent(fd), Ok(n) if n > 0) {
        return;
    }
    const LEN: usize = core::mem::size_of::<libc::linger>();
    let mut now = [0u8; LEN];
    match sock::get_bytes(fd, libc::SOL_SOCKET, libc::SO_LINGER, &mut now) {
        // l_onoff, the first int, is 0: the program set no linger
        Ok(LEN) if now[..4] == [0; 4] => {}
        _ => return,
    }
    let mut on = [0u8; LEN];
    on[..4].copy_from_slice(&1i32.to_ne_bytes());
    on[4..].copy_from_slice(&CLOSE_LINGER_S.to_ne_bytes());
    let _ = sock::set_bytes(fd, libc::SOL_SOCKET, libc::SO_LINGER, &on);
}

/// Sleeps about `ms` milliseconds (nanosleep: async-signal-safe; a signal cuts it short, which
/// only makes the next look come sooner). errno is the caller's to keep.
fn sleep_ms(ms: u64) {
    let t = libc::timespec {
        tv_sec: 0,
        tv_nsec: (ms * 1_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec, and no remainder wanted.
    unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
}
