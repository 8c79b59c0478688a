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
//! So before a `SHUT_WR` or `SHUT_RDWR` on a socket that still runs over SMC (its real
//! `SO_DOMAIN`/`SO_PROTOCOL` say SMC; a fallen-back socket reads as TCP and is left alone), the
//! shim waits while the kernel still holds unsent bytes for it (`SIOCOUTQNSD`), as long as they
//! keep leaving: when none has left for [`STALL_MS`] the peer is taken to have stopped reading and
//! the call goes through as it would have. The kernel blocks in this call too (its 2 s); the shim
//! only makes that wait last until the data is out. System calls only: no lock, no allocation.

use libc::c_int;
use smcrun_sys::smc::SocketKind;
use smcrun_sys::sock;

/// How long the unsent bytes may stay the same before the shim stops waiting for them, in ms.
pub const STALL_MS: u64 = 10_000;

/// The longest nap between two looks at the send buffer, in ms.
const MAX_NAP_MS: u64 = 20;

/// Waits, before `shutdown(fd, how)`, until an SMC socket's send buffer is empty (or stalled for
/// [`STALL_MS`]). Does nothing for other sockets, other `how`s, or when the kernel cannot say.
pub fn before_shutdown(fd: c_int, how: c_int) {
    if how != libc::SHUT_WR && how != libc::SHUT_RDWR {
        return;
    }
    if !matches!(
        sock::kind(fd),
        Ok(SocketKind::AfSmc | SocketKind::IpprotoSmc)
    ) {
        return;
    }
    let first = match sock::unsent(fd) {
        Ok(n) if n > 0 => n,
        _ => return,
    };
    let (mut last, mut still_ms, mut nap, mut waited_ms) = (first, 0, 1, 0);
    loop {
        sleep_ms(nap);
        waited_ms += nap;
        let n = match sock::unsent(fd) {
            Ok(n) if n > 0 => n,
            r => {
                if crate::config::get().debug >= 2 {
                    crate::debug::line!(
                        "shutdown(fd {fd}): waited about {waited_ms} ms for {first} unsent bytes to leave ({})",
                        match r {
                            Ok(_) => "all left",
                            Err(e) => e.name(),
                        }
                    );
                }
                return;
            }
        };
        if n < last {
            (last, still_ms, nap) = (n, 0, 1);
        } else {
            still_ms += nap;
            if still_ms >= STALL_MS {
                if crate::config::get().debug >= 1 {
                    crate::debug::line!(
                        "shutdown(fd {fd}): {n} bytes still unsent after {} s without progress: the peer has stopped reading, and the kernel may drop them",
                        STALL_MS / 1000
                    );
                }
                return;
            }
            nap = (nap * 2).min(MAX_NAP_MS);
        }
    }
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
