//! The run directory: where per-process reports live, and how they are written and read so that
//! no other user can redirect or forge them.
//!
//! The directory is `$XDG_RUNTIME_DIR/smcrun/`, else `/run/smcrun/` for root, else
//! `/tmp/smcrun-UID/` (a process that switched uid ignores the XDG directory it inherited, and so
//! does one whose XDG directory is not its own: see [`layout::xdg_trusted`]). It must
//! be a real directory (never a symlink) of the user, closed to others (0700). A process opens it
//! once, `O_DIRECTORY|O_NOFOLLOW`, checks the open directory itself, and does everything else
//! through that descriptor: a path swapped for a symlink after the check changes nothing.
//!
//! Each process has its own report file, `PID.json` (0600, created `O_EXCL|O_NOFOLLOW`), opened
//! early: at its first TCP socket, before it switches uid, and, for a forked child, at fork time
//! while it still has its parent's rights. It then keeps writing through that descriptor (the
//! report is rewritten in place), so a server that starts as root and runs as nobody, or a
//! daemon's grandchild, still reports into the directory of the user who started it. Both
//! descriptors sit at fd 100 or above, out of the program's way (never below: with a lower fd limit
//! the process has no report; and they are given up when the program runs out of descriptors, see
//! [`write::give_up_fds`]), and each is checked (device and inode) before use, so a program that
//! closed or reused the number is never written to.
//!
//! The writer ([`write`](mod@write)) runs inside other people's programs, in hooks and forked
//! children: it makes raw system calls only (rustix) and never allocates; the runtime (inside the
//! preloaded shim) is its one user. The reader ([`read`]) is what `smcrun ps`, `smcrun why`, the
//! exporter and the agent use; with it they need neither the runtime nor the shim. Both share the
//! layout ([`layout`]: the directory's path, the report's name) and the checks ([`open`]);
//! [`refusal`] says why a process has no report; [`pidns`] and [`process`] are what a reader needs
//! to tell whether a report's process still runs (its pid namespace, its start time).

pub mod layout;
pub mod open;
pub mod pidns;
pub mod process;
pub mod read;
pub mod refusal;
pub mod write;
