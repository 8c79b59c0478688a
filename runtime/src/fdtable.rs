//! What the runtime knows about each of the program's fds: one atomic word per fd, written by the
//! hooks (no lock, no allocation: a load and a compare-and-swap) and read by the sidecar.
//!
//! A word says whether the fd holds a TCP socket the shim handled, whether it was made as an SMC
//! socket or stayed TCP (and why), and where its connection stands: open, listening, connecting,
//! established and waiting to be classified, or counted. Whoever moves a connection to "counted"
//! with a compare-and-swap counts it, so each connection is counted exactly once, however the hooks
//! and the sidecar race. Each word also holds the fd's generation, bumped whenever a new socket
//! takes the fd: a compare-and-swap made from what was read before the fd was closed and reused
//! (the sidecar's look against a server's accept loop) fails, although the new connection's story
//! may read the same.
//!
//! The table is process memory, so a forked child inherits it: a listener's story (SMC, or TCP and
//! why) stays known to the pre-fork workers that accept on it. Each process has an epoch, bumped in
//! a forked child: an entry of an older epoch belongs to an ancestor's connection, which the child
//! does not count (the story of an inherited listener still holds).
//!
//! The table covers fds below [`LIMIT`] (Linux's default `fs.nr_open`); its 8 MiB are zero pages
//! until an fd is used.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Fds below this are tracked.
pub const LIMIT: usize = 1 << 20;

static TABLE: [AtomicU64; LIMIT] = [const { AtomicU64::new(0) }; LIMIT];
/// One more than the highest fd ever written, so the sidecar's scan stops there.
static HIGH: AtomicUsize = AtomicUsize::new(0);
/// This process's epoch (never 0, so that a used word is never 0).
static EPOCH: AtomicU32 = AtomicU32::new(1);

// Why a TCP socket is not an SMC socket: the byte each TCP entry keeps, defined with the
// classifier that puts it into words.
pub use smcrun_classify::why::{why_errno, Why, WHY_NOT_OURS, WHY_POLICY, WHY_UNRECORDED};

/// How the socket was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An SMC socket (which may fall back to TCP at connect time).
    Smc,
    /// A TCP socket from the start, for this reason.
    Tcp(Why),
}

/// Where the socket's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Made, not connected or listening.
    Open,
    /// A listener.
    Listening,
    /// A nonblocking connect is in progress.
    Connecting,
    /// An SMC connection is established and waits to be classified.
    Pending,
    /// The connection is counted.
    Done,
}

/// One fd's word, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// How the socket was made.
    pub kind: Kind,
    /// Where its connection stands.
    pub phase: Phase,
    /// Accepted (a server's connection) rather than made.
    pub server: bool,
    /// The epoch of the process that wrote it.
    pub epoch: u16,
    /// Which socket on this fd it is: given by [`set`] (0 in an entry not stored yet).
    pub generation: u32,
}

impl Entry {
    /// A new entry of this process's epoch.
    pub fn new(kind: Kind, phase: Phase, server: bool) -> Entry {
        Entry {
            kind,
            phase,
            server,
            epoch: epoch(),
            generation: 0,
        }
    }

    /// Whether it was written by this process (not inherited from an ancestor).
    pub fn ours(&self) -> bool {
        self.epoch == epoch()
    }

    /// The same entry in another phase.
    pub fn with(self, phase: Phase) -> Entry {
        Entry { phase, ..self }
    }

    fn encode(self) -> u64 {
        let (kind, why) = match self.kind {
            Kind::Tcp(w) => (1u32, u32::from(w)),
            Kind::Smc => (2, 0),
        };
        let phase = match self.phase {
            Phase::Open => 0u32,
            Phase::Listening => 1,
            Phase::Connecting => 2,
            Phase::Pending => 3,
            Phase::Done => 4,
        };
        let story = why
            | kind << 8
            | phase << 10
            | u32::from(self.server) << 13
            | u32::from(self.epoch) << 16;
        u64::from(story) | u64::from(self.generation) << 32
    }

    fn decode(w: u64) -> Option<Entry> {
        let kind = match (w >> 8) & 3 {
            1 => Kind::Tcp((w & 0xff) as u8),
            2 => Kind::Smc,
            _ => return None,
        };
        let phase = match (w >> 10) & 7 {
            0 => Phase::Open,
            1 => Phase::Listening,
            2 => Phase::Connecting,
            3 => Phase::Pending,
            _ => Phase::Done,
        };
        Some(Entry {
            kind,
            phase,
            server: w & 1 << 13 != 0,
            epoch: (w >> 16) as u16,
            generation: (w >> 32) as u32,
        })
    }
}

/// A word with no entry, keeping the fd's generation.
fn empty(w: u64) -> u64 {
    w & !u64::from(u32::MAX)
}

fn slot(fd: i32) -> Option<&'static AtomicU64> {
    TABLE.get(usize::try_from(fd).ok()?)
}

/// The pid of the process whose memory this is: set when the library is loaded and in each
/// forked child. A vfork child runs in its parent's memory with another pid: it must not start
/// threads or open files in its parent's name.
static OWNER: AtomicUsize = AtomicUsize::new(0);

/// Records the calling process as the owner of this memory (library load, fork child).
pub fn own() {
    OWNER.store(getpid(), Ordering::Relaxed);
}

/// Whether the calling process owns this memory (false in a vfork child before it execs). A
/// system call: only for the rare paths (starting the sidecar, opening the report).
pub fn owned() -> bool {
    OWNER.load(Ordering::Relaxed) == getpid()
}

fn getpid() -> usize {
    rustix::process::getpid().as_raw_nonzero().get() as usize
}

/// This process's epoch.
pub fn epoch() -> u16 {
    EPOCH.load(Ordering::Relaxed) as u16
}

/// In a forked child: a new epoch, so that the parent's connections are not counted here.
pub fn new_epoch_in_child() {
    let next = EPOCH.load(Ordering::Relaxed).wrapping_add(1) & 0xffff;
    EPOCH.store(if next == 0 { 1 } else { next }, Ordering::Relaxed);
}

/// What is known of `fd` (None: not a socket the shim handled, or beyond [`LIMIT`]).
pub fn get(fd: i32) -> Option<Entry> {
    Entry::decode(slot(fd)?.load(Ordering::Acquire))
}

/// `fd`'s word as read now (an empty one beyond [`LIMIT`]), for a caller that decodes it only when
/// there is an entry and may replace it later only if it is still there (see [`forget_seen`]).
#[inline]
pub fn look(fd: i32) -> Seen {
    Seen(slot(fd).map_or(0, |s| s.load(Ordering::Acquire)))
}

/// One fd's word as [`look`] read it (a plain word, as such, to functions of any ABI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct Seen(u64);

impl Seen {
    /// Whether there was an entry (a socket the shim handled): a test of two bits, no decoding.
    #[inline]
    pub fn is_entry(self) -> bool {
        matches!((self.0 >> 8) & 3, 1 | 2)
    }

    /// Whether the entry is this process's and its connection waits to be counted (connecting,
    /// or established and not classified yet): what a close must look at. Read from the word,
    /// without decoding it.
    #[inline]
    pub fn waits(self) -> bool {
        matches!((self.0 >> 10) & 7, 2 | 3) && (self.0 >> 16) as u16 == epoch()
    }

    /// The entry, decoded (None: no socket the shim handled).
    #[inline]
    pub fn entry(self) -> Option<Entry> {
        Entry::decode(self.0)
    }
}

/// Forgets `fd` if it still holds exactly what was `seen` (an entry, in the same generation): a
/// single compare-and-swap, where [`clear`] reads the word again. False when the word changed
/// meanwhile, or held no entry.
#[inline]
pub fn forget_seen(fd: i32, seen: Seen) -> bool {
    let Some(s) = slot(fd) else { return false };
    seen.is_entry()
        && s.compare_exchange(seen.0, empty(seen.0), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
}

/// Records `entry` for a new socket on `fd`, in the fd's next generation: returns the entry as
/// stored (None when `fd` is beyond the table) and what was there before.
pub fn set(fd: i32, entry: Entry) -> (Option<Entry>, Option<Entry>) {
    let Some(s) = slot(fd) else {
        return (None, None);
    };
    if HIGH.load(Ordering::Relaxed) <= fd as usize {
        HIGH.fetch_max(fd as usize + 1, Ordering::Relaxed);
    }
    let mut old = s.load(Ordering::Acquire);
    loop {
        let new = Entry {
            generation: ((old >> 32) as u32).wrapping_add(1),
            ..entry
        };
        match s.compare_exchange_weak(old, new.encode(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return (Some(new), Entry::decode(old)),
            Err(now) => old = now,
        }
    }
}

/// Forgets `fd` (closed, or reused for something that is not a TCP socket); returns what was there.
pub fn clear(fd: i32) -> Option<Entry> {
    let s = slot(fd)?;
    let mut old = s.load(Ordering::Acquire);
    loop {
        Entry::decode(old)?;
        match s.compare_exchange_weak(old, empty(old), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Entry::decode(old),
            Err(now) => old = now,
        }
    }
}

/// Replaces `from` by `to` (None: forget the fd) if `fd` still holds exactly `from`, in the same
/// generation (`to` keeps `from`'s). The one who succeeds owns the transition (and counts what it
/// means).
pub fn transition(fd: i32, from: Entry, to: Option<Entry>) -> bool {
    let Some(s) = slot(fd) else { return false };
    let w = from.encode();
    let to = to.map_or(empty(w), |t| {
        Entry {
            generation: from.generation,
            ..t
        }
        .encode()
    });
    s.compare_exchange(w, to, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// One more than the highest fd the table ever held an entry for: no fd from here up has one.
pub fn end() -> usize {
    HIGH.load(Ordering::Relaxed).min(LIMIT)
}

/// Calls `f` for every fd with an entry of this process's epoch in one of `phases`.
pub fn scan(phases: &[Phase], mut f: impl FnMut(i32, Entry)) {
    let high = end();
    let now = epoch();
    for (fd, s) in TABLE[..high].iter().enumerate() {
        let w = s.load(Ordering::Acquire);
        if w as u32 == 0 {
            continue;
        }
        if let Some(e) = Entry::decode(w) {
            if e.epoch == now && phases.contains(&e.phase) {
                f(fd as i32, e);
            }
        }
    }
}

/// Counts, over the whole table, the listeners (this process's or inherited).
pub fn listeners() -> u64 {
    let high = end();
    TABLE[..high]
        .iter()
        .filter(|s| {
            Entry::decode(s.load(Ordering::Relaxed)).is_some_and(|e| e.phase == Phase::Listening)
        })
        .count() as u64
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The table is process-wide and the sidecar's look scans all of it: every test that puts
    /// entries in it or looks at it holds this, so that no test sees (or classifies) another's
    /// entries. Tests run in parallel threads by default; a sidecar test counted the Pending
    /// entry of `set_transition_clear_and_scan` as its own connection, and took it away from
    /// that test's scan (CI, debug build, b34dcd1).
    pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every phase.
    const PHASES: [Phase; 5] = [
        Phase::Open,
        Phase::Listening,
        Phase::Connecting,
        Phase::Pending,
        Phase::Done,
    ];

    #[test]
    fn words_round_trip() {
        for kind in [
            Kind::Smc,
            Kind::Tcp(0),
            Kind::Tcp(97),
            Kind::Tcp(WHY_POLICY),
        ] {
            for phase in PHASES {
                for server in [false, true] {
                    let e = Entry {
                        kind,
                        phase,
                        server,
                        epoch: 0xbeef,
                        generation: 0xdead_beef,
                    };
                    assert_ne!(e.encode(), 0);
                    assert_eq!(Entry::decode(e.encode()), Some(e));
                }
            }
        }
        assert_eq!(Entry::decode(0), None);
        assert_eq!(
            Entry::decode(7 << 32),
            None,
            "an empty word keeps its generation only"
        );
    }

    #[test]
    fn set_transition_clear_and_scan() {
        let _g = serial();
        let fd = 900_000;
        let (stored, before) = set(fd, Entry::new(Kind::Smc, Phase::Open, false));
        let open = stored.unwrap();
        assert_eq!(before, None);
        let pending = open.with(Phase::Pending);
        assert!(transition(fd, open, Some(pending)));
        assert!(!transition(fd, open, Some(pending)), "only one wins");
        let mut seen = vec![];
        scan(&[Phase::Pending], |f, e| seen.push((f, e)));
        assert!(seen.contains(&(fd, pending)));
        assert_eq!(clear(fd), Some(pending));
        assert_eq!(get(fd), None);
        assert_eq!(clear(fd), None);
        assert_eq!(set(LIMIT as i32, open), (None, None));
        assert_eq!(get(-1), None);
    }

    /// What the close hook reads from a word without decoding it says what the decoded entry
    /// says, and a forget from a stale look changes nothing.
    #[test]
    fn a_look_agrees_with_the_entry_and_forgets_only_what_it_saw() {
        let _g = serial();
        let fd = 900_002;
        assert!(!look(fd).is_entry());
        assert!(!forget_seen(fd, look(fd)), "nothing to forget");
        for phase in PHASES {
            for (kind, epoch) in [(Kind::Smc, super::epoch()), (Kind::Tcp(97), 0xbeef)] {
                let (stored, _) = set(
                    fd,
                    Entry {
                        epoch,
                        ..Entry::new(kind, phase, false)
                    },
                );
                let e = stored.unwrap();
                let seen = look(fd);
                assert!(seen.is_entry());
                assert_eq!(seen.entry(), Some(e));
                assert_eq!(
                    seen.waits(),
                    e.ours() && matches!(e.phase, Phase::Pending | Phase::Connecting),
                    "{e:?}"
                );
                let next = if phase == Phase::Done {
                    Phase::Open
                } else {
                    Phase::Done
                };
                assert!(transition(fd, e, Some(e.with(next))));
                assert!(!forget_seen(fd, seen), "the word changed since the look");
                assert_eq!(get(fd), Some(e.with(next)));
                assert!(forget_seen(fd, look(fd)));
                assert_eq!(get(fd), None);
                assert!(!look(fd).is_entry());
            }
        }
        assert!(!forget_seen(-1, look(-1)));
        assert!(!look(LIMIT as i32).is_entry());
    }

    #[test]
    fn a_new_socket_on_a_reused_fd_is_not_the_old_one() {
        let _g = serial();
        let fd = 900_001;
        let (first, _) = set(fd, Entry::new(Kind::Smc, Phase::Open, true));
        let first = first.unwrap().with(Phase::Pending);
        assert!(transition(fd, first.with(Phase::Open), Some(first)));
        // Closed and reused for a new connection whose story reads the same.
        assert!(transition(fd, first, None));
        let (second, _) = set(fd, Entry::new(Kind::Smc, Phase::Open, true));
        let second = second.unwrap().with(Phase::Pending);
        assert!(transition(fd, second.with(Phase::Open), Some(second)));
        assert_ne!(first.generation, second.generation);
        assert!(
            !transition(fd, first, Some(first.with(Phase::Done))),
            "a look at the first connection decides nothing for the second"
        );
        assert_eq!(get(fd), Some(second));
        clear(fd);
    }
}
