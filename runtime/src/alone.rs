//! The calls the kernel makes only for a process with one thread, made while the runtime's own
//! threads are stopped.
//!
//! The kernel refuses some calls to a process with more than one thread (or whose threads share
//! its filesystem context, as every thread made by pthread_create does): `unshare` of a user
//! namespace, or of `CLONE_THREAD`, `CLONE_VM` or `CLONE_SIGHAND` (EINVAL), and `setns` into a
//! user or mount namespace (EINVAL) or a time namespace (EUSERS). The sidecar and the drainer are
//! threads of the program's process, so a single-threaded program that had made a TCP socket saw
//! those calls fail under the shim (seen with a Python program that entered a user namespace).
//!
//! So the shim's `unshare` and `setns` hooks make such a call through [`around`]: both threads are
//! asked to end at their next turn (their state stays: the sidecar's connections and counts, the
//! drainer's deferred shutdowns), the call is made once they are gone, and then they go on: the
//! sidecar is started again at once, the drainer at its next use. A thread that does not end
//! within [`STOP_LIMIT`] (the drainer while a deferred shutdown's bytes are still leaving) is left
//! running, and the call fails as it would have. A program with threads of its own gets the
//! kernel's answer as it would without the shim.

use std::time::{Duration, Instant};

/// How long a call waits for the runtime's threads to end: the sidecar ends within one look and
/// one nap (at most 100 ms, longer only for a look at tens of thousands of sockets).
pub const STOP_LIMIT: Duration = Duration::from_secs(2);

/// The `unshare` flags that the kernel refuses to a process with more than one thread
/// (`CLONE_NEWUSER` implies `CLONE_THREAD`).
const UNSHARE_ALONE: libc::c_int =
    libc::CLONE_NEWUSER | libc::CLONE_THREAD | libc::CLONE_VM | libc::CLONE_SIGHAND;

/// The namespaces `setns` enters only for a process with one thread (user and mount: no other
/// thread may share the filesystem context; time: one thread).
const SETNS_ALONE: libc::c_int = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWTIME;

/// `ioctl(NS_GET_NSTYPE)` on a namespace descriptor: its `CLONE_NEW*` type (linux/nsfs.h).
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
/// The namespace filesystem's `f_type` (linux/magic.h), which every namespace descriptor is on.
const NSFS_MAGIC: libc::__fsword_t = 0x6e73_6673;

/// Whether `unshare(flags)` needs the process to have one thread.
pub fn unshare_needs_alone(flags: libc::c_int) -> bool {
    flags & UNSHARE_ALONE != 0
}

/// Whether `setns(fd, nstype)` needs the process to have one thread. With `nstype` 0 the
/// namespace's type is asked of the descriptor (a pidfd, or a descriptor that is no namespace,
/// does not say, and the call goes through as it is). Keeps errno.
pub fn setns_needs_alone(fd: libc::c_int, nstype: libc::c_int) -> bool {
    let kind = if nstype == 0 {
        smcrun_sys::errno::keep(|| namespace_type(fd))
    } else {
        nstype
    };
    kind > 0 && kind & SETNS_ALONE != 0
}

/// The `CLONE_NEW*` type of the namespace descriptor `fd`; -1 for any other descriptor. The
/// ioctl is asked only of a file of the namespace filesystem, so that no other file's driver ever
/// sees its number.
fn namespace_type(fd: libc::c_int) -> libc::c_int {
    // SAFETY: an all-zero statfs is a valid value for the kernel to overwrite.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes only into `st`, which is ours and of its size.
    if unsafe { libc::fstatfs(fd, &mut st) } != 0 || st.f_type != NSFS_MAGIC {
        return -1;
    }
    // SAFETY: NS_GET_NSTYPE takes no argument and only reads the namespace's type.
    unsafe { libc::ioctl(fd, NS_GET_NSTYPE) }
}

/// Makes `call` (a system call's wrapper: its result, errno set on failure) with the runtime's
/// threads stopped, then lets them go on. The call's errno is what the caller sees. In a vfork
/// child, just the call.
pub fn around(call: impl FnOnce() -> libc::c_int) -> libc::c_int {
    // A vfork child runs in its parent's memory: the threads are its parent's, not to be touched
    // (and the kernel's answer does not depend on them: the child is a process of its own).
    if !smcrun_sys::errno::keep(crate::fdtable::owned) {
        return call();
    }
    let until = Instant::now() + STOP_LIMIT;
    smcrun_sys::errno::keep(|| {
        crate::sidecar::stop_for_call(until);
        crate::drain::stop_for_call(until);
    });
    let r = call();
    smcrun_sys::errno::keep(|| {
        crate::drain::go_on();
        crate::sidecar::go_on();
    });
    r
}

/// The kernel id of one of the runtime's threads, so that a stop can wait until the thread is
/// gone from the process (not just returned: the kernel counts it until it has exited).
pub(crate) struct Tid(std::sync::atomic::AtomicI32);

impl Tid {
    pub(crate) const fn new() -> Tid {
        Tid(std::sync::atomic::AtomicI32::new(0))
    }

    /// Records the calling thread (at the thread's start).
    pub(crate) fn set_current(&self) {
        self.0.store(
            rustix::thread::gettid().as_raw_nonzero().get(),
            std::sync::atomic::Ordering::Release,
        );
    }

    /// Forgets the thread (it is gone, or the process is a forked child).
    pub(crate) fn clear(&self) {
        self.0.store(0, std::sync::atomic::Ordering::Release);
    }

    /// Whether a thread is recorded.
    pub(crate) fn recorded(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire) != 0
    }

    /// Whether the recorded thread has left the process (false while none is recorded).
    pub(crate) fn gone(&self) -> bool {
        let tid = self.0.load(std::sync::atomic::Ordering::Acquire);
        if tid == 0 {
            return false;
        }
        // SAFETY: tgkill with signal 0 sends nothing; it only says whether the thread `tid` is
        // still in this process (ESRCH once it has exited).
        let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, 0) };
        r == -1 && smcrun_sys::Errno::last().0 == libc::ESRCH
    }
}

/// Polls `done` every millisecond until it is true or `until` has passed; returns its last answer.
pub(crate) fn wait_until(until: Instant, done: impl Fn() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_that_need_one_thread_are_told_from_the_rest() {
        assert!(unshare_needs_alone(libc::CLONE_NEWUSER));
        assert!(unshare_needs_alone(libc::CLONE_NEWUSER | libc::CLONE_NEWNS));
        assert!(unshare_needs_alone(libc::CLONE_VM));
        assert!(!unshare_needs_alone(libc::CLONE_NEWNS));
        assert!(!unshare_needs_alone(
            libc::CLONE_NEWNET | libc::CLONE_FILES | libc::CLONE_FS
        ));
        assert!(setns_needs_alone(-1, libc::CLONE_NEWNS));
        assert!(setns_needs_alone(-1, libc::CLONE_NEWTIME));
        assert!(!setns_needs_alone(-1, libc::CLONE_NEWNET));
        // nstype 0: the descriptor says which namespace it is
        let open = |p: &str| std::fs::File::open(p).unwrap();
        use std::os::fd::AsRawFd;
        let (mnt, net) = (open("/proc/self/ns/mnt"), open("/proc/self/ns/net"));
        assert!(setns_needs_alone(mnt.as_raw_fd(), 0));
        assert!(!setns_needs_alone(net.as_raw_fd(), 0));
        // no namespace at all: errno as it was
        smcrun_sys::Errno(1234).set();
        assert!(!setns_needs_alone(0, 0));
        let file = open("/proc/self/status");
        assert!(!setns_needs_alone(file.as_raw_fd(), 0));
        assert!(!setns_needs_alone(-1, 0));
        assert_eq!(smcrun_sys::Errno::last().0, 1234);
    }

    #[test]
    fn a_thread_is_gone_only_once_it_has_exited() {
        static T: Tid = Tid::new();
        assert!(!T.gone());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            T.set_current();
            let _ = rx.recv();
        });
        assert!(wait_until(Instant::now() + Duration::from_secs(5), || T.recorded()));
        assert!(!T.gone());
        drop(tx);
        h.join().unwrap();
        assert!(wait_until(Instant::now() + Duration::from_secs(5), || T.gone()));
        T.clear();
        assert!(!T.gone());
    }
}
