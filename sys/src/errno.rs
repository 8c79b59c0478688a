//! errno values: the calling thread's errno, kept intact around smcrun's own system calls, and the
//! symbolic name of every Linux errno for messages.

/// An errno value returned by a failed system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// The calling thread's errno now (inlined: every hook reads it, some several times).
    #[inline]
    pub fn last() -> Errno {
        Errno(tls::get())
    }

    /// Sets the calling thread's errno.
    #[inline]
    pub fn set(self) {
        tls::set(self.0)
    }

    /// The symbolic name (`"ECONNREFUSED"`), or `"errno"` for a number Linux does not define.
    pub fn name(self) -> &'static str {
        name(self.0)
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match name(self.0) {
            "errno" => write!(f, "errno {}", self.0),
            n => f.write_str(n),
        }
    }
}

/// The calling thread's errno on x86_64 Linux, where it sits at the same offset from the thread
/// pointer in every thread: glibc's errno is initial-exec TLS of libc.so, which is in the static
/// TLS block, and musl's is a field of the thread descriptor the thread pointer points at. The
/// offset is learned from the first `__errno_location` call (a relaxed atomic: no lock, so a
/// signal handler may be first); later accesses are one `%fs`-relative load or store at that
/// offset (the `%fs` base is the thread pointer, which `%fs:0` also holds: the x86_64 TLS ABI). A
/// hook touches errno several times, and each call into the C library cost about six
/// instructions and a spill of the caller's registers; computing the address from `%fs:0` first
/// cost two more per access (callgrind, `bench/run --only hooks`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tls {
    use core::arch::asm;
    use core::sync::atomic::{AtomicIsize, Ordering};

    /// The slot's offset from the thread pointer; 0 until learned (the thread pointer's word 0
    /// is the thread's own address, never its errno).
    static OFFSET: AtomicIsize = AtomicIsize::new(0);

    /// The calling thread's errno.
    #[inline(always)]
    pub fn get() -> i32 {
        let off = OFFSET.load(Ordering::Relaxed);
        if off == 0 {
            // SAFETY: `learn` returns the calling thread's valid errno slot.
            return unsafe { *learn() };
        }
        let v: i32;
        // SAFETY: %fs's base is the calling thread's thread pointer, and `off` the offset of its
        // errno from it (learned from __errno_location): a plain load of the thread's own errno.
        // Pure and readonly: a read whose value is not used may go, and two with no write to
        // memory (nor call) between them may be one.
        unsafe {
            asm!("movl %fs:({off}), {v:e}", off = in(reg) off, v = out(reg) v,
                options(att_syntax, pure, readonly, nostack, preserves_flags));
        }
        v
    }

    /// Sets the calling thread's errno.
    #[inline(always)]
    pub fn set(v: i32) {
        let off = OFFSET.load(Ordering::Relaxed);
        if off == 0 {
            // SAFETY: as in `get`.
            unsafe { *learn() = v };
            return;
        }
        // SAFETY: as in `get`; a store to the calling thread's own errno only.
        unsafe {
            asm!("movl {v:e}, %fs:({off})", off = in(reg) off, v = in(reg) v,
                options(att_syntax, nostack, preserves_flags));
        }
    }

    /// The first access in the process (or one racing it): the slot from the C library, and its
    /// offset remembered. Every racer stores the same offset.
    #[cold]
    #[inline(never)]
    fn learn() -> *mut i32 {
        let tp: isize;
        // SAFETY: on x86_64 Linux %fs:0 holds the calling thread's thread pointer (the TCB's
        // address of itself, in glibc and musl); a plain load, no other effect.
        unsafe {
            asm!("movq %fs:0, {}", out(reg) tp,
                options(att_syntax, nostack, preserves_flags, readonly));
        }
        // SAFETY: __errno_location returns the calling thread's errno slot, and has no other
        // effect.
        let p = unsafe { libc::__errno_location() };
        OFFSET.store((p as isize).wrapping_sub(tp), Ordering::Relaxed);
        p
    }
}

/// The calling thread's errno elsewhere, through the C library.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod tls {
    /// The calling thread's errno.
    #[inline(always)]
    pub fn get() -> i32 {
        // SAFETY: __errno_location always returns the calling thread's valid errno slot.
        unsafe { *libc::__errno_location() }
    }

    /// Sets the calling thread's errno.
    #[inline(always)]
    pub fn set(v: i32) {
        // SAFETY: as in `get`.
        unsafe { *libc::__errno_location() = v }
    }
}

/// Runs `f` and puts the calling thread's errno back as it was before: for the system calls
/// smcrun makes on its own behalf inside a program.
#[inline]
pub fn keep<T>(f: impl FnOnce() -> T) -> T {
    let saved = Errno::last();
    let r = f();
    saved.set();
    r
}

/// The symbolic name of a Linux errno (`name(libc::EINPROGRESS) == "EINPROGRESS"`); `"errno"` for a
/// number that is none. Aliases (EWOULDBLOCK, EDEADLOCK, ENOTSUP) have their primary name.
pub fn name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ENOTBLK => "ENOTBLK",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ETXTBSY => "ETXTBSY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::EPIPE => "EPIPE",
        libc::EDOM => "EDOM",
        libc::ERANGE => "ERANGE",
        libc::EDEADLK => "EDEADLK",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOLCK => "ENOLCK",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ENOMSG => "ENOMSG",
        libc::EIDRM => "EIDRM",
        libc::ECHRNG => "ECHRNG",
        libc::EL2NSYNC => "EL2NSYNC",
        libc::EL3HLT => "EL3HLT",
        libc::EL3RST => "EL3RST",
        libc::ELNRNG => "ELNRNG",
        libc::EUNATCH => "EUNATCH",
        libc::ENOCSI => "ENOCSI",
        libc::EL2HLT => "EL2HLT",
        libc::EBADE => "EBADE",
        libc::EBADR => "EBADR",
        libc::EXFULL => "EXFULL",
        libc::ENOANO => "ENOANO",
        libc::EBADRQC => "EBADRQC",
        libc::EBADSLT => "EBADSLT",
        libc::EBFONT => "EBFONT",
        libc::ENOSTR => "ENOSTR",
        libc::ENODATA => "ENODATA",
        libc::ETIME => "ETIME",
        libc::ENOSR => "ENOSR",
        libc::ENONET => "ENONET",
        libc::ENOPKG => "ENOPKG",
        libc::EREMOTE => "EREMOTE",
        libc::ENOLINK => "ENOLINK",
        libc::EADV => "EADV",
        libc::ESRMNT => "ESRMNT",
        libc::ECOMM => "ECOMM",
        libc::EPROTO => "EPROTO",
        libc::EMULTIHOP => "EMULTIHOP",
        libc::EDOTDOT => "EDOTDOT",
        libc::EBADMSG => "EBADMSG",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::ENOTUNIQ => "ENOTUNIQ",
        libc::EBADFD => "EBADFD",
        libc::EREMCHG => "EREMCHG",
        libc::ELIBACC => "ELIBACC",
        libc::ELIBBAD => "ELIBBAD",
        libc::ELIBSCN => "ELIBSCN",
        libc::ELIBMAX => "ELIBMAX",
        libc::ELIBEXEC => "ELIBEXEC",
        libc::EILSEQ => "EILSEQ",
        libc::ERESTART => "ERESTART",
        libc::ESTRPIPE => "ESTRPIPE",
        libc::EUSERS => "EUSERS",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EDESTADDRREQ => "EDESTADDRREQ",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EPROTOTYPE => "EPROTOTYPE",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EPFNOSUPPORT => "EPFNOSUPPORT",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ENETRESET => "ENETRESET",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ENOBUFS => "ENOBUFS",
        libc::EISCONN => "EISCONN",
        libc::ENOTCONN => "ENOTCONN",
        libc::ESHUTDOWN => "ESHUTDOWN",
        libc::ETOOMANYREFS => "ETOOMANYREFS",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTDOWN => "EHOSTDOWN",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EALREADY => "EALREADY",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::ESTALE => "ESTALE",
        libc::EUCLEAN => "EUCLEAN",
        libc::ENOTNAM => "ENOTNAM",
        libc::ENAVAIL => "ENAVAIL",
        libc::EISNAM => "EISNAM",
        libc::EREMOTEIO => "EREMOTEIO",
        libc::EDQUOT => "EDQUOT",
        libc::ENOMEDIUM => "ENOMEDIUM",
        libc::EMEDIUMTYPE => "EMEDIUMTYPE",
        libc::ECANCELED => "ECANCELED",
        libc::ENOKEY => "ENOKEY",
        libc::EKEYEXPIRED => "EKEYEXPIRED",
        libc::EKEYREVOKED => "EKEYREVOKED",
        libc::EKEYREJECTED => "EKEYREJECTED",
        libc::EOWNERDEAD => "EOWNERDEAD",
        libc::ENOTRECOVERABLE => "ENOTRECOVERABLE",
        libc::ERFKILL => "ERFKILL",
        libc::EHWPOISON => "EHWPOISON",
        _ => "errno",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_errno_up_to_the_last_one_has_a_name() {
        for e in 1..=libc::EHWPOISON {
            // 41 and 58 are unused on Linux (EWOULDBLOCK and EDEADLOCK are aliases).
            if e == 41 || e == 58 {
                assert_eq!(name(e), "errno");
            } else {
                assert_ne!(name(e), "errno", "errno {e} has no name");
            }
        }
        assert_eq!(name(libc::EINPROGRESS), "EINPROGRESS");
        assert_eq!(name(libc::EWOULDBLOCK), "EAGAIN");
        assert_eq!(name(0), "errno");
        assert_eq!(name(-1), "errno");
    }

    /// errno read and written at the learnt offset is the C library's, in every thread (the
    /// offset is learnt by whichever thread comes first).
    #[test]
    fn errno_is_the_c_librarys_in_every_thread() {
        extern crate std;
        use std::vec::Vec;
        let check = |v: i32| {
            Errno(v).set();
            // SAFETY: the calling thread's errno slot.
            assert_eq!(unsafe { *libc::__errno_location() }, v);
            // SAFETY: as above.
            unsafe { *libc::__errno_location() = v + 1 };
            assert_eq!(Errno::last(), Errno(v + 1));
        };
        check(libc::EAGAIN);
        let threads: Vec<_> = (0..4)
            .map(|i| std::thread::spawn(move || check(libc::EINTR + i)))
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        check(libc::ENOENT);
    }

    #[test]
    fn keep_restores_errno() {
        Errno(libc::EINTR).set();
        let r = keep(|| {
            Errno(libc::EBADF).set();
            7
        });
        assert_eq!((r, Errno::last()), (7, Errno(libc::EINTR)));
    }
}
