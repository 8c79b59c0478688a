//! `smcrun ss` (like smcss, plus `-p`: the owning processes), as text or as JSON with stable
//! snake_case keys for scripts and the VM tests; the text and JSON are `smcrun_views::ss`.
//!
//! Without SMC in the kernel it prints one line naming the missing module and, where the kernel
//! can load it, the `modprobe` that does (`smcrun_kernel::kmod` decides), and exits 1 ([`crate::cmd::format`]). Exit 0 means the kernel answered (possibly
//! with nothing).

use std::collections::{HashMap, HashSet};

use clap::Args;
use smcrun_kernel::sock_diag::{self, SmcSocket};

use crate::cmd::format::{print_json, print_lines};
use crate::cmd::owners::{self, Owner};
use crate::status::{Failure, Outcome};
use smcrun_views::ss::json::{SocketView, SsView};
use smcrun_views::ss::text::listing_text;
use smcrun_views::ss::{shown, Listing};

/// `smcrun ss` arguments.
#[derive(Args, Debug)]
pub struct SsArgs {
    /// Show all sockets, including listening and not yet connected ones.
    #[arg(short = 'a', long = "all", conflicts_with = "listening")]
    all: bool,
    /// Show only listening sockets.
    #[arg(short = 'l', long = "listening", conflicts_with_all = ["debug", "smcr", "smcd"])]
    listening: bool,
    /// Add connection details: shutdown, token, buffer sizes and ring cursors.
    #[arg(short = 'd', long = "debug")]
    debug: bool,
    /// Only SMC-R sockets, with their RDMA link (role, device, port, link id, GIDs).
    #[arg(short = 'R', long = "smcr", conflicts_with = "smcd")]
    smcr: bool,
    /// Only SMC-D sockets, with their DMB (GIDs, tokens, link id).
    #[arg(short = 'D', long = "smcd")]
    smcd: bool,
    /// Do not shorten addresses.
    #[arg(short = 'W', long = "wide")]
    wide: bool,
    /// Show the processes owning each socket (pid, name, fd), from /proc/*/fd.
    #[arg(short = 'p', long = "processes")]
    processes: bool,
    /// Print JSON: {"sockets": [...]}.
    #[arg(short = 'j', long)]
    json: bool,
}

impl SsArgs {
    /// Which sockets and columns these options show.
    fn listing(&self) -> Listing {
        Listing {
            all: self.all,
            listening: self.listening,
            debug: self.debug,
            smcr: self.smcr,
            smcd: self.smcd,
            wide: self.wide,
            processes: self.processes,
        }
    }
}

/// Run `smcrun ss`.
pub fn ss(a: &SsArgs) -> Outcome {
    let mut ext = 0;
    if a.debug {
        ext |= sock_diag::EXT_CONNINFO;
    }
    if a.smcr {
        ext |= sock_diag::EXT_LGRINFO;
    }
    if a.smcd {
        ext |= sock_diag::EXT_DMBINFO;
    }
    let sockets = match sock_diag::dump(ext) {
        Ok(s) => s,
        Err(e) => return Err(Failure::refused(&e)),
    };
    let listing = a.listing();
    let sockets: Vec<&SmcSocket> = sockets.iter().filter(|s| shown(s, &listing)).collect();
    let owned: HashMap<u64, Vec<Owner>> = if a.processes {
        let agent = smcrun_views::agent_state::read().ok();
        owners::owners_with_agent(
            &sockets.iter().map(|s| s.inode).collect::<HashSet<u64>>(),
            agent.as_ref(),
        )
    } else {
        HashMap::new()
    };
    let owners_of = |s: &SmcSocket| owned.get(&s.inode).map(Vec::as_slice).unwrap_or(&[]);
    if a.json {
        let view = SsView {
            sockets: sockets
                .iter()
                .map(|s| SocketView::with_processes(s, a.processes.then(|| owners_of(s))))
                .collect(),
        };
        return print_json(&view);
    }
    print_lines([listing_text(&sockets, &listing, owners_of)])
}
