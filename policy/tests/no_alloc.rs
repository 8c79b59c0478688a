//! Deciding runs inside other people's processes on every connect and bind: it must not touch
//! the heap. A counting allocator proves it for every kind of qualifier.

use smcrun_policy::{Family, Policy, Role};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::SocketAddr;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator, only counting calls on this thread.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `alloc` (a non-zero-sized layout) is the system
        // allocator's too; the layout is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: every block this allocator hands out came from `System`, so `ptr` and
        // `layout` are one of the system allocator's blocks, as `dealloc` requires.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: as for `dealloc`, `ptr` is a block of the system allocator's with this
        // layout; `new_size` meets the caller's contract, which is the same.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(|n| n.get())
}

#[test]
fn deciding_does_not_allocate() {
    let text =
        "tcp program x* role client remote 127.0.0.0/8,::1 local fd00::/8 port 1-1000,6379; \
                smc role server local 0.0.0.0/0 port 6379; smc remote ::ffff:10.0.0.0/104; tcp";
    let p = Policy::parse(text).unwrap().for_program(b"/usr/bin/xyz");
    let addrs: Vec<Option<SocketAddr>> = [
        "127.0.0.1:6379",
        "[::1]:80",
        "[::ffff:10.1.1.1]:6379",
        "10.2.2.2:1",
        "[fd00::1]:5",
        "0.0.0.0:6379",
    ]
    .iter()
    .map(|s| s.parse().ok())
    .chain([None])
    .collect();
    let before = allocations();
    let mut smc = 0usize;
    for &local in &addrs {
        for &remote in &addrs {
            for role in [Role::Client, Role::Server] {
                let d = p.decide(role, local, remote);
                smc += usize::from(d.action == smcrun_policy::Action::Smc);
            }
        }
        smc += usize::from(p.likely(Family::V4) == smcrun_policy::Action::Smc);
        smc += usize::from(p.likely(Family::V6) == smcrun_policy::Action::Smc);
        smc += usize::from(p.fixed().is_some());
    }
    assert_eq!(allocations(), before, "decide/likely/fixed allocated");
    assert!(smc > 0 && smc < 7 * 7 * 2 + 14, "a mix of decisions: {smc}");
    // The counter works: parsing does allocate.
    let _ = Policy::parse(text).unwrap();
    assert!(allocations() > before);
}
