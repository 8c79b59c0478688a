//! A [`Snapshot`] as Prometheus metric families (pure: data in, families out), and their text
//! exposition format (0.0.4: the `prometheus` crate's encoder, or [`render`], which writes the
//! same text straight from the samples for the exporter).
//!
//! Naming: `smc_*` for what the kernel's SMC reports, `smc_rdma_*` for the RDMA devices under it,
//! `smcrun_*` for the runtime's per-process reports and the exporter itself. Counters end in
//! `_total`; label names join with the RDMA exporters' (`device`, `port`). A part the kernel does
//! not have gives no series at all (never a zero that looks like a measurement); `smc_up` says
//! whether SMC answered. The manual's metrics page (docs/src/reference/metrics.md) is made from
//! these families: after adding one, `UPDATE_DOCS=1 cargo test -p smcrun reference`.

use std::collections::HashMap;

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};
use smcrun_kernel::rdma::{port_state, ResourceKind};
use smcrun_kernel::reasons;
use smcrun_kernel::smc_genl::{BufferStats, TechStats};
use smcrun_kernel::sock_diag::Mode;
use smcrun_report::ProcessReport;

use crate::rdma::{max, usage_ratio, used};
use crate::snapshot::{Counters, Info, Processes, RdmaDevice, Snapshot, Topology};

/// The content type of [`encode`]'s output, for HTTP: the text format 0.0.4 with its charset
/// said, as node_exporter says it (the text is UTF-8: label values such as program names).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How many processes get per-process series (the busiest first); the rest are counted in
/// `smcrun_processes_not_exported`.
pub const PROCESS_SERIES_CAP: usize = 100;

/// What the exporter itself adds to a scrape.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScrapeMeta {
    /// Scrape errors since the exporter started, this scrape's included.
    pub errors_total: u64,
    /// Seconds the kernel reads of this scrape took.
    pub duration_seconds: f64,
}

/// Metric families under construction, in the order first added: each family's samples as
/// text lines (what [`Families::text`] writes out), and as `prometheus` families unless made
/// by [`render`] (which only writes the text: no label pair or metric built per sample).
#[derive(Debug, Default)]
pub struct Families {
    list: Vec<MetricFamily>,
    lines: Vec<(&'static str, &'static str, MetricType, String)>,
    index: HashMap<&'static str, usize>,
    text_only: bool,
}

/// `v` with `\`, newline and (in label values) `"` escaped, as the text format (and the
/// `prometheus` crate's encoder) escapes them, appended to `out`.
fn escape_into(out: &mut String, v: &str, quote: bool) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

impl Families {
    fn add(
        &mut self,
        kind: MetricType,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        use std::fmt::Write;
        let text_only = self.text_only;
        let i = *self.index.entry(name).or_insert_with(|| {
            if !text_only {
                let mut f = MetricFamily::default();
                f.set_name(name.to_string());
                f.set_help(help.to_string());
                f.set_field_type(kind);
                self.list.push(f);
            }
            self.lines.push((name, help, kind, String::new()));
            self.lines.len() - 1
        });
        let line = &mut self.lines[i].3;
        line.push_str(name);
        for (n, (k, v)) in labels.iter().enumerate() {
            line.push(if n == 0 { '{' } else { ',' });
            line.push_str(k);
            line.push_str("=\"");
            escape_into(line, v, true);
            line.push('"');
        }
        if !labels.is_empty() {
            line.push('}');
        }
        // f64's Display, as the prometheus encoder writes values (`value.to_string()`).
        let _ = writeln!(line, " {value}");
        if text_only {
            return;
        }
        let mut m = Metric::default();
        m.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut l = LabelPair::default();
                    l.set_name((*k).to_string());
                    l.set_value((*v).to_string());
                    l
                })
                .collect(),
        );
        if kind == MetricType::COUNTER {
            let mut c = Counter::default();
            c.set_value(value);
            m.set_counter(c);
        } else {
            let mut g = Gauge::default();
            g.set_value(value);
            m.set_gauge(g);
        }
        self.list[i].mut_metric().push(m);
    }

    /// Add a counter sample (`name` ends in `_total`).
    pub fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        v: u64,
    ) {
        debug_assert!(name.ends_with("_total"), "{name}");
        self.add(MetricType::COUNTER, name, help, labels, v as f64);
    }

    /// Add a gauge sample.
    pub fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        v: f64,
    ) {
        debug_assert!(!name.ends_with("_total"), "{name}");
        self.add(MetricType::GAUGE, name, help, labels, v);
    }

    /// The families, each with at least one sample.
    pub fn into_vec(self) -> Vec<MetricFamily> {
        self.list
    }

    /// The text exposition format of the families: what [`encode`] makes of
    /// [`Families::into_vec`], byte for byte.
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(self.lines.iter().map(|l| l.3.len() + 160).sum());
        for (name, help, kind, lines) in &self.lines {
            if !help.is_empty() {
                out.push_str("# HELP ");
                out.push_str(name);
                out.push(' ');
                escape_into(&mut out, help, false);
                out.push('\n');
            }
            out.push_str("# TYPE ");
            out.push_str(name);
            out.push_str(if *kind == MetricType::COUNTER {
                " counter\n"
            } else {
                " gauge\n"
            });
            out.push_str(lines);
        }
        out
    }
}

/// The text exposition format of `families`.
pub fn encode(families: &[MetricFamily]) -> Result<String, String> {
    let mut buf = Vec::new();
    TextEncoder::new()
        .encode(families, &mut buf)
        .map_err(|e| format!("encoding the metrics: {e}"))?;
    String::from_utf8(buf).map_err(|e| format!("encoding the metrics: {e}"))
}

/// The metric families of a snapshot.
pub fn families(s: &Snapshot, meta: &ScrapeMeta) -> Vec<MetricFamily> {
    let mut f = Families::default();
    fill(&mut f, s, meta);
    f.into_vec()
}

/// A snapshot's metrics in the text exposition format: `encode(&families(s, meta))`, byte for
/// byte, written straight from the samples (a scrape's cost: no `prometheus` structures built).
pub fn render(s: &Snapshot, meta: &ScrapeMeta) -> String {
    let mut f = Families {
        text_only: true,
        ..Families::default()
    };
    fill(&mut f, s, meta);
    f.text()
}

/// Adds a snapshot's samples to `f`.
fn fill(f: &mut Families, s: &Snapshot, meta: &ScrapeMeta) {
    use crate::snapshot::Collector;
    let on = |c| s.collectors.has(c);
    // With the counters collector off, any SMC part that answered shows SMC is there; with no
    // SMC collector on, nothing can say, and there is no smc_up (never a 0 that fires SmcDown).
    let up = if on(Collector::Counters) {
        Some(
            s.counters.get().is_some()
                || (s.counters.lacking().is_some() && s.sockets.get().is_some()),
        )
    } else if on(Collector::Info) || on(Collector::Topology) || on(Collector::Sockets) {
        Some(s.info.get().is_some() || s.topology.get().is_some() || s.sockets.get().is_some())
    } else {
        None
    };
    if let Some(up) = up {
        f.gauge(
            "smc_up",
            "1 when the kernel's SMC answered this scrape (the smc module is there; on a kernel without SMC's netlink counters, smc_diag answered), else 0",
            &[],
            if up { 1.0 } else { 0.0 },
        );
    }
    if let Some(c) = s.counters.get() {
        counters(f, c);
    }
    sysctls(f, &s.sysctls);
    if let Some(i) = s.info.get() {
        info(f, i);
    }
    if let Some(t) = s.topology.get() {
        topology(f, t);
    }
    match s.sockets.get() {
        Some(crate::snapshot::Sockets::Diag(socks)) => sockets(f, socks),
        Some(crate::snapshot::Sockets::Agent(live)) => agent_sockets(f, live),
        None => {}
    }
    if let Some(devs) = s.rdma.get() {
        rdma(f, devs);
    }
    if let Some(p) = s.processes.get() {
        processes(f, p, PROCESS_SERIES_CAP);
    }
    if let Some(b) = s.bpf.get() {
        bpf_scopes(f, b);
    }
    if let Some(a) = s.agent.get() {
        agent(f, a);
    }
    let parts = s.parts();
    for (c, ok, _) in &parts {
        f.gauge(
            "smcrun_scrape_collector_success",
            "1 when this collector's part of the scrape was read, 0 when the kernel lacks it or refused (only the collectors on)",
            &[("collector", c.name())],
            if *ok { 1.0 } else { 0.0 },
        );
    }
    for (c, _, _) in &parts {
        f.gauge(
            "smcrun_scrape_collector_duration_seconds",
            "Seconds this collector's kernel reads took in this scrape",
            &[("collector", c.name())],
            s.seconds[c.index()],
        );
    }
    f.gauge(
        "smcrun_scrape_duration_seconds",
        "Seconds the kernel reads of this scrape took",
        &[],
        meta.duration_seconds,
    );
    f.counter(
        "smcrun_scrape_errors_total",
        "Scrape parts the kernel refused or answered unreadably, since the exporter started (a missing module is not an error)",
        &[],
        meta.errors_total,
    );
    f.gauge(
        "smcrun_build_info",
        "The smcrun version exporting these metrics",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
}

const TECHS: [&str; 2] = ["smcr", "smcd"];

fn buffer_events(f: &mut Families, tech: &str, dir: &str, b: &BufferStats) {
    let l = [("technology", tech), ("direction", dir)];
    for (name, help, v) in [
        (
            "smc_buffer_full_total",
            "Times this side's buffer was full (rx: the program read too slowly or net.smc.rmem is small; tx: raise net.smc.wmem)",
            b.full,
        ),
        (
            "smc_buffer_full_remote_total",
            "Times the peer's buffer was full (tx: the peer's net.smc.rmem)",
            b.full_peer,
        ),
        (
            "smc_buffer_too_small_total",
            "Requests larger than this side's buffer (tx: raise net.smc.wmem)",
            b.size_small,
        ),
        (
            "smc_buffer_too_small_remote_total",
            "Requests larger than the peer's buffer (tx: the peer's net.smc.rmem)",
            b.size_small_peer,
        ),
        (
            "smc_buffer_allocations_total",
            "Buffers newly allocated",
            b.alloc,
        ),
        (
            "smc_buffer_reuses_total",
            "Buffers reused from the link group's pool",
            b.reuse,
        ),
        (
            "smc_buffer_downgrades_total",
            "Buffers allocated smaller than asked for",
            b.downgrade,
        ),
    ] {
        f.counter(name, help, &l, v);
    }
}

fn tech(f: &mut Families, tech: &str, t: &TechStats) {
    for (role, version, v) in [
        ("client", "v1", t.client_v1_success),
        ("client", "v2", t.client_v2_success),
        ("server", "v1", t.server_v1_success),
        ("server", "v2", t.server_v2_success),
    ] {
        f.counter(
            "smc_connections_total",
            "Connections established over SMC, by technology, role and SMC version",
            &[("technology", tech), ("role", role), ("version", version)],
            v,
        );
    }
    for (dir, bytes, reqs, usage, bufs, sizes, events) in [
        (
            "rx",
            t.rx_bytes,
            t.rx_count,
            t.rx_buffer_usage,
            &t.rx_buffer_sizes,
            &t.rx_payload_sizes,
            &t.rx_buffers,
        ),
        (
            "tx",
            t.tx_bytes,
            t.tx_count,
            t.tx_buffer_usage,
            &t.tx_buffer_sizes,
            &t.tx_payload_sizes,
            &t.tx_buffers,
        ),
    ] {
        let l = [("technology", tech), ("direction", dir)];
        f.counter(
            "smc_bytes_total",
            "Bytes received (rx) or sent (tx) over SMC",
            &l,
            bytes,
        );
        f.counter(
            "smc_requests_total",
            "Receive (rx) or send (tx) calls on SMC connections",
            &l,
            reqs,
        );
        if let Some(u) = usage {
            f.gauge(
                "smc_buffer_usage_bytes",
                "Bytes of receive (rx) or send (tx) buffers in use now (kernels with the usage counters)",
                &l,
                u as f64,
            );
        }
        buffer_events(f, tech, dir, events);
        for (size, v) in bufs.buckets() {
            f.counter(
                "smc_buffers_by_size_total",
                "Buffers taken (allocated or reused) by size bucket (size: at most that many bytes; gt_1024k: more)",
                &[("technology", tech), ("direction", dir), ("size", size)],
                v,
            );
        }
        for (size, v) in sizes.buckets() {
            f.counter(
                "smc_requests_by_size_total",
                "Receive (rx) or send (tx) calls by payload size bucket",
                &[("technology", tech), ("direction", dir), ("size", size)],
                v,
            );
        }
    }
    for (call, v) in [
        ("sendpage", t.sendpage),
        ("splice", t.splice),
        ("cork", t.cork),
        ("nodelay", t.nodelay),
        ("urgent_data", t.urgent_data),
    ] {
        f.counter(
            "smc_special_socket_calls_total",
            "Special socket calls on SMC connections (sendpage, splice, TCP_CORK, TCP_NODELAY, urgent data)",
            &[("technology", tech), ("call", call)],
            v,
        );
    }
}

/// `smc_sysctl{name}`: every numeric `net.smc.*` sysctl the kernel has (7.3's hs_ctrl names a BPF
/// struct_ops and is left out: it is not a number).
fn sysctls(f: &mut Families, list: &[(String, String)]) {
    for (name, value) in list {
        if let Ok(v) = value.parse::<f64>() {
            f.gauge(
                "smc_sysctl",
                "A numeric net.smc.* sysctl of this network namespace, by name (for new connections)",
                &[("name", name)],
                v,
            );
        }
    }
}

fn counters(f: &mut Families, c: &Counters) {
    for (name, t) in TECHS.iter().zip([&c.stats.smcr, &c.stats.smcd]) {
        tech(f, name, t);
    }
    for (role, v) in [
        ("client", c.stats.client_handshake_errors),
        ("server", c.stats.server_handshake_errors),
    ] {
        f.counter(
            "smc_handshake_errors_total",
            "SMC handshakes that failed (e.g. the peer did not answer), by role",
            &[("role", role)],
            v,
        );
    }
    for (role, total, list) in [
        ("client", c.fallback.client_total, &c.fallback.client),
        ("server", c.fallback.server_total, &c.fallback.server),
    ] {
        f.counter(
            "smc_fallbacks_total",
            "Connections that fell back to TCP, by role",
            &[("role", role)],
            total,
        );
        for rc in list {
            let hex = format!("0x{:08x}", rc.code);
            let name = reasons::describe(rc.code).name;
            f.counter(
                "smc_fallback_reasons_total",
                "Fallbacks to TCP by role and decoded reason; the kernel counts each reason modulo 65536 (rate() takes a wrap for a reset)",
                &[("role", role), ("reason", &hex), ("reason_name", &name)],
                u64::from(rc.count),
            );
        }
    }
}

fn info(f: &mut Families, i: &Info) {
    let version = format!("{}.{}", i.sys.version, i.sys.release);
    f.gauge(
        "smc_info",
        "What this kernel's SMC is: its version and whether it can do SMC-Rv2 and SMC-Dv2",
        &[
            ("version", &version),
            ("smcr_v2", if i.sys.smcr_v2 { "true" } else { "false" }),
            ("smcd_v2", if i.sys.ism_v2 { "true" } else { "false" }),
        ],
        1.0,
    );
    if let Some(u) = &i.ueids {
        f.gauge(
            "smc_ueids",
            "User EIDs configured (SMC-Rv2 needs one both peers share)",
            &[],
            u.len() as f64,
        );
    }
}

/// A link group's buffer memory, where the kernel reports it.
fn group_buffers(f: &mut Families, tech: &str, id: &str, sndbuf: Option<u64>, rmb: Option<u64>) {
    let l = [("technology", tech), ("link_group", id)];
    if let Some(b) = sndbuf {
        f.gauge(
            "smc_link_group_sndbuf_bytes",
            "Bytes of send buffers the link group holds",
            &l,
            b as f64,
        );
    }
    if let Some(b) = rmb {
        f.gauge(
            "smc_link_group_rmb_bytes",
            "Bytes of receive buffers (SMC-R RMBs, SMC-D DMBs) the link group holds",
            &l,
            b as f64,
        );
    }
}

fn topology(f: &mut Families, t: &Topology) {
    for (tech, n) in [
        ("smcr", t.link_groups.len()),
        ("smcd", t.smcd_link_groups.len()),
    ] {
        f.gauge(
            "smc_link_groups",
            "Link groups of this network namespace (each SMC-R one holds a set of RDMA QPs, MRs and PDs)",
            &[("technology", tech)],
            n as f64,
        );
    }
    for g in &t.link_groups {
        let id = format!("{:08x}", g.id);
        let role = reasons::role(g.role);
        let kind = reasons::lgr_type(g.lgr_type);
        f.gauge(
            "smc_link_group_connections",
            "Connections in the link group",
            &[
                ("technology", "smcr"),
                ("link_group", &id),
                ("role", &role),
                ("type", &kind),
            ],
            f64::from(g.conns),
        );
        group_buffers(f, "smcr", &id, g.sndbuf_alloc, g.rmb_alloc);
        for link in &g.links {
            let link_id = link.id.to_string();
            let port = link.ib_port.to_string();
            let net_dev = ifname(link.net_dev);
            let l = [
                ("link_group", id.as_str()),
                ("link_id", link_id.as_str()),
                ("device", link.ib_dev.as_str()),
                ("port", port.as_str()),
                ("net_dev", net_dev.as_str()),
            ];
            let state = reasons::link_state(link.state);
            f.gauge(
                "smc_link_up",
                "1 when the SMC-R link is ACTIVE, 0 in any other state",
                &l,
                if state == "ACTIVE" { 1.0 } else { 0.0 },
            );
            f.gauge(
                "smc_link_connections",
                "Connections on the SMC-R link",
                &l,
                f64::from(link.conn_count),
            );
            let mut with_state = l.to_vec();
            with_state.push(("state", &state));
            f.gauge(
                "smc_link_info",
                "The SMC-R link's state by name (UNUSED, INACTIVE, ACTIVATING, ACTIVE)",
                &with_state,
                1.0,
            );
        }
    }
    for g in &t.smcd_link_groups {
        let id = format!("{:08x}", g.id);
        f.gauge(
            "smc_link_group_connections",
            "Connections in the link group",
            &[("technology", "smcd"), ("link_group", &id)],
            f64::from(g.conns),
        );
        group_buffers(f, "smcd", &id, g.sndbuf_alloc, g.dmb_alloc);
    }
    for (tech, devs) in [("smcr", &t.smcr_devices), ("smcd", &t.smcd_devices)] {
        for d in devs {
            let name = if d.ib_name.is_empty() {
                d.pci_id.clone()
            } else {
                d.ib_name.clone()
            };
            for (i, p) in d.ports.iter().enumerate().filter(|(_, p)| p.valid) {
                let port = (i + 1).to_string();
                let net_dev = ifname(p.netdev);
                let l = [
                    ("technology", tech),
                    ("device", name.as_str()),
                    ("port", port.as_str()),
                    ("net_dev", net_dev.as_str()),
                ];
                f.gauge(
                    "smc_device_port_up",
                    "1 when SMC sees the device port active, 0 when inactive",
                    &l,
                    if p.state != 0 { 1.0 } else { 0.0 },
                );
                f.gauge(
                    "smc_device_port_links",
                    "SMC links on the device port",
                    &l,
                    f64::from(p.link_count),
                );
            }
        }
    }
}

/// The mode label of an SMC socket.
fn mode_label(m: Mode) -> &'static str {
    match m {
        Mode::SmcR => "smcr",
        Mode::SmcD => "smcd",
        Mode::Fallback => "tcp",
        Mode::Unknown(_) => "unknown",
    }
}

fn sockets(f: &mut Families, socks: &[(u8, Mode)]) {
    let mut counts: Vec<((&'static str, u8), u64)> = Vec::new();
    for (state, mode) in socks {
        let key = (mode_label(*mode), *state);
        match counts.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => counts.push((key, 1)),
        }
    }
    counts.sort_unstable();
    for ((mode, state), n) in counts {
        f.gauge(
            "smc_sockets",
            "SMC sockets of this network namespace by mode (smcr, smcd, tcp: fell back) and state",
            &[("mode", mode), ("state", &reasons::socket_state(state))],
            n as f64,
        );
    }
}

fn rdma(f: &mut Families, devs: &[RdmaDevice]) {
    for d in devs {
        let name = d.device.name.as_str();
        for p in &d.device.ports {
            let port = p.index.to_string();
            let l = [
                ("device", name),
                ("port", port.as_str()),
                ("net_dev", p.netdev.as_deref().unwrap_or("")),
            ];
            if let Some(st) = p.state {
                f.gauge(
                    "smc_rdma_port_up",
                    "1 when the RDMA port is ACTIVE, 0 in any other state",
                    &l,
                    if port_state(st) == "ACTIVE" { 1.0 } else { 0.0 },
                );
            }
        }
        let Some(s) = &d.used else { continue };
        for k in ResourceKind::ALL {
            let Some(u) = used(s, k) else { continue };
            let l = [("device", name), ("type", k.name())];
            f.gauge(
                "smc_rdma_resources_used",
                "RDMA objects in use on the device by type (qp, cq, mr, pd, cm_id, ctx, srq), as `rdma res show` counts them",
                &l,
                u as f64,
            );
            let m = max(d.limits.as_ref(), k);
            if let Some(m) = m {
                f.gauge(
                    "smc_rdma_resources_max",
                    "The device's maximum of that type (from its verbs interface; absent where it does not answer)",
                    &l,
                    f64::from(m),
                );
            }
            if let Some(r) = usage_ratio(Some(u), m) {
                f.gauge(
                    "smc_rdma_resources_usage_ratio",
                    "used / max of that type on the device (0 to 1)",
                    &l,
                    r,
                );
            }
        }
    }
}

/// The per-process series: the `cap` busiest running programs (most connections first, then by
/// pid).
pub fn processes(f: &mut Families, p: &Processes, cap: usize) {
    let mut list: Vec<&ProcessReport> = p.running.iter().collect();
    list.sort_by_key(|r| (std::cmp::Reverse(r.connections.total), r.pid));
    f.gauge(
        "smcrun_processes",
        "Programs running under smcrun whose reports this exporter can read",
        &[],
        list.len() as f64,
    );
    f.gauge(
        "smcrun_processes_not_exported",
        "Running programs left out of the per-process series (beyond the cap) or whose report could not be read",
        &[],
        (list.len().saturating_sub(cap) as u64 + p.unreadable) as f64,
    );
    for r in list.into_iter().take(cap) {
        let pid = r.pid.to_string();
        let prog = r.program.as_str();
        let c = &r.connections;
        f.gauge(
            "smcrun_process_settings_info",
            "1 per program under smcrun, labelled with what it runs with: mode (--mode), fallback (--fallback), policy (canonical; empty: none, every TCP socket is made SMC)",
            &[
                ("pid", &pid),
                ("program", prog),
                ("mode", &r.mode),
                ("fallback", &r.fallback),
                ("policy", &r.policy),
            ],
            1.0,
        );
        for (mode, v) in [
            ("smcr", c.smc_r),
            ("smcd", c.smc_d),
            ("smc", c.smc_unknown),
            ("tcp", c.tcp),
        ] {
            f.counter(
                "smcrun_process_connections_total",
                "Connections of a program under smcrun by how they ran (smcr, smcd, smc: SMC closed before its mode was read, tcp)",
                &[("pid", &pid), ("program", prog), ("mode", mode)],
                v,
            );
        }
        f.gauge(
            "smcrun_process_connections_unclassified",
            "Connections of a program not (yet) classified: still waiting, or gone before they could be",
            &[("pid", &pid), ("program", prog)],
            c.not_classified() as f64,
        );
        f.counter(
            "smcrun_process_failed_connects_total",
            "Connects of a program that failed (refused, timed out, unreachable): not connections",
            &[("pid", &pid), ("program", prog)],
            c.failed_connects,
        );
        f.counter(
            "smcrun_process_sockets_converted_total",
            "TCP sockets of a program made as SMC sockets",
            &[("pid", &pid), ("program", prog)],
            r.sockets.converted,
        );
        f.counter(
            "smcrun_process_details_dropped_total",
            "Connections of a program counted but missing from its recent list and endpoint totals",
            &[("pid", &pid), ("program", prog)],
            r.detail_dropped,
        );
    }
}

/// BPF mode's scopes: sockets the kernel's socket() hook made SMC or kept TCP, per scope
/// (`cgroup PATH`, `netns PATH`, or `tree PROGRAM-ID` for a `smcrun --bpf` command).
pub fn bpf_scopes(f: &mut Families, s: &smcrun_bpf::scopes::Scopes) {
    let scopes = s
        .cgroups
        .iter()
        .map(|c| (format!("cgroup {}", c.path.display()), &c.counters))
        .chain(
            s.netns
                .iter()
                .map(|n| (format!("netns {}", n.path.display()), &n.counters)),
        )
        .chain(
            s.trees
                .iter()
                .map(|t| (format!("tree {}", t.program_id), &t.counters)),
        );
    for (scope, c) in scopes {
        f.counter(
            "smcrun_bpf_sockets_converted_total",
            "TCP sockets BPF mode made SMC in a scope (an attached cgroup or network namespace, or a smcrun --bpf command's tree)",
            &[("scope", &scope)],
            c.converted,
        );
        f.counter(
            "smcrun_bpf_sockets_kept_tcp_total",
            "TCP sockets BPF mode kept TCP in a scope, by a program rule",
            &[("scope", &scope)],
            c.kept_tcp,
        );
    }
}

/// The sockets collector's series while the agent is attached: this network namespace's SMC
/// sockets open now by role and mode, from the agent's record (no smc_diag dump, so no
/// `smc_sockets`: the agent does not know a socket's TCP-like state). Always 3 roles x 4 modes.
fn agent_sockets(f: &mut Families, live: &crate::agent_state::Live) {
    for (role, m) in [
        ("client", &live.client),
        ("server", &live.server),
        ("listen", &live.listen),
    ] {
        for (mode, v) in [
            ("smcr", m.smcr),
            ("smcd", m.smcd),
            ("tcp", m.tcp),
            ("undecided", m.undecided),
        ] {
            f.gauge(
                "smcrun_agent_sockets",
                "SMC sockets of this network namespace open now, from the smcrun agent's record (served instead of smc_sockets while the agent is attached and its record is complete), by role (client, server, listen) and mode (smcr, smcd, tcp: fell back, undecided: no mode yet, as a listening socket)",
                &[("role", role), ("mode", mode)],
                v as f64,
            );
        }
    }
}

/// The agent's series: connections by mode, fallbacks by reason and bytes, per cgroup and per
/// program (at most `agent_state::MAX_GROUPS` names of each, the rest under `other`; reasons are
/// the kernel's fallback codes), and what it lost.
pub fn agent(f: &mut Families, s: &crate::agent_state::Summary) {
    f.gauge(
        "smcrun_agent_attached",
        "1 when the smcrun agent's probes are attached to smc (0: smc is not loaded, or attaching failed)",
        &[],
        if s.attached { 1.0 } else { 0.0 },
    );
    let o = &s.overflow;
    for (what, v) in [
        ("live_full", o.live_full),
        ("done_full", o.done_full),
        ("inflight_full", o.inflight_full),
        ("stale", o.stale),
        ("processes_dropped", o.processes_dropped),
    ]
    .into_iter()
    .chain(o.probes_missed.map(|n| ("probes_missed", n)))
    {
        f.counter(
            "smcrun_agent_lost_total",
            "What the agent could not record: sockets (live_full: its table of open sockets was full; done_full: its ring buffer of ended ones), byte counts (inflight_full), releases not seen (stale), processes' counts (processes_dropped), probe runs the kernel missed (probes_missed, 6.7+: a record or byte count lost)",
            &[("what", what)],
            v,
        );
    }
    let groups = s
        .cgroups
        .iter()
        .map(|g| ("cgroup", g))
        .chain(s.programs.iter().map(|g| ("program", g)));
    for (scope, g) in groups {
        let name = g.name.as_str();
        for (role, c) in [("client", &g.sides.client), ("server", &g.sides.server)] {
            for (mode, v) in [
                ("smcr", c.smcr),
                ("smcd", c.smcd),
                ("tcp", c.tcp),
                ("not_seen", c.not_seen),
            ] {
                f.counter(
                    "smcrun_agent_connections_total",
                    "SMC sockets' connections as the kernel saw them, per cgroup or program (name), role and mode (not_seen: ended before a mode)",
                    &[("scope", scope), ("name", name), ("role", role), ("mode", mode)],
                    v,
                );
            }
            for (reason, v) in &c.reasons {
                f.counter(
                    "smcrun_agent_fallbacks_total",
                    "Connections that fell back to TCP, per cgroup or program, role and the kernel's reason code",
                    &[("scope", scope), ("name", name), ("role", role), ("reason", reason)],
                    *v,
                );
            }
            for (direction, v) in [("tx", c.tx_bytes), ("rx", c.rx_bytes)] {
                f.counter(
                    "smcrun_agent_bytes_total",
                    "Bytes through SMC sockets (any mode), per cgroup or program, role and direction",
                    &[("scope", scope), ("name", name), ("role", role), ("direction", direction)],
                    v,
                );
            }
        }
    }
}

fn ifname(index: u32) -> String {
    crate::this_netns::ifname(index).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::snapshot as captured;
    use crate::snapshot::{Part, Processes};
    use smcrun_kernel::uverbs::Limits;

    /// (labels, value) of every sample of family `name` in the text.
    fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, v) = l.rsplit_once(' ')?;
                let (n, labels) = match series.find('{') {
                    Some(i) => (&series[..i], &series[i..]),
                    None => (series, ""),
                };
                (n == name).then(|| (labels.to_string(), v.parse().unwrap()))
            })
            .collect()
    }

    fn one(text: &str, name: &str, labels: &str) -> f64 {
        let found: Vec<f64> = samples(text, name)
            .into_iter()
            .filter(|(l, _)| l == labels)
            .map(|(_, v)| v)
            .collect();
        assert_eq!(found.len(), 1, "{name}{labels} in:\n{text}");
        found[0]
    }

    /// The snapshot's text, from the `prometheus` encoder; every test through here also checks
    /// that the exporter's own writer ([`render`]) gives it byte for byte.
    fn text_of(s: &Snapshot) -> String {
        let meta = ScrapeMeta {
            errors_total: 3,
            duration_seconds: 0.125,
        };
        let text = encode(&families(s, &meta)).unwrap();
        assert_eq!(render(s, &meta), text);
        text
    }

    /// What `add` makes of `fill`'s samples: the encoder's text and the writer's.
    fn both(fill: impl Fn(&mut Families)) -> (String, String) {
        let mut f = Families::default();
        fill(&mut f);
        let mut t = Families {
            text_only: true,
            ..Families::default()
        };
        fill(&mut t);
        assert!(
            t.list.is_empty(),
            "a text-only Families built prometheus families"
        );
        (encode(&f.into_vec()).unwrap(), t.text())
    }

    #[test]
    fn the_writer_is_the_encoder_byte_for_byte() {
        let (encoded, written) = both(|f| {
            f.gauge("g_plain", "", &[], 1.0);
            f.gauge(
                "g_escapes",
                "help with \\ and a\nnewline and \"quotes\"",
                &[("a", "back\\slash"), ("b", "new\nline"), ("c", "\"q\"")],
                -0.5,
            );
            f.gauge(
                "g_escapes",
                "ignored: the first help stays",
                &[("a", "é ü 𝄞")],
                f64::NAN,
            );
            f.gauge("g_odd", "values", &[], f64::INFINITY);
            f.gauge("g_odd", "values", &[("x", "")], f64::NEG_INFINITY);
            f.gauge("g_odd", "values", &[("x", "y")], 1e21);
            f.gauge("g_odd", "values", &[("x", "z")], 1.5e-7);
            f.counter("c_total", "a counter", &[("k", "v")], u64::MAX);
            f.counter("c_total", "a counter", &[("k", "w")], 0);
            f.gauge("g_plain", "", &[("late", "1")], 2.0);
        });
        assert_eq!(written, encoded);
        for p in [1, 30] {
            let procs = Processes {
                running: (0..p)
                    .map(|i| report(i, "we\"ird\\name\n", u64::from(i) * 7))
                    .collect(),
                unreadable: 2,
            };
            let (encoded, written) = both(|f| processes(f, &procs, 10));
            assert_eq!(written, encoded);
        }
    }

    #[test]
    fn captured_smcr_counters_are_the_kernels() {
        let s = captured("smcr");
        let text = text_of(&s);
        let c = s.counters.get().unwrap();
        let t = &c.stats.smcr;
        assert_eq!(one(&text, "smc_up", ""), 1.0);
        assert_eq!(
            one(
                &text,
                "smc_connections_total",
                r#"{technology="smcr",role="client",version="v2"}"#
            ),
            t.client_v2_success as f64
        );
        assert!(t.client_v2_success > 0);
        assert_eq!(
            one(
                &text,
                "smc_bytes_total",
                r#"{technology="smcr",direction="rx"}"#
            ),
            t.rx_bytes as f64
        );
        assert_eq!(
            one(
                &text,
                "smc_requests_total",
                r#"{technology="smcr",direction="tx"}"#
            ),
            t.tx_count as f64
        );
        assert_eq!(
            one(
                &text,
                "smc_buffer_usage_bytes",
                r#"{technology="smcr",direction="rx"}"#
            ),
            t.rx_buffer_usage.unwrap() as f64
        );
        // Every bucket of the kernel's histogram is a series, and they add up.
        let rx_bufs: Vec<(String, f64)> = samples(&text, "smc_buffers_by_size_total")
            .into_iter()
            .filter(|(l, _)| l.contains(r#"technology="smcr",direction="rx""#))
            .collect();
        assert_eq!(rx_bufs.len(), 9);
        let sum: f64 = rx_bufs.iter().map(|x| x.1).sum();
        let h = &t.rx_buffer_sizes;
        let want = h.total();
        assert_eq!(sum, want as f64);
        assert!(want > 0);
        // 7 buffer event counters per technology and direction.
        for name in [
            "smc_buffer_full_total",
            "smc_buffer_full_remote_total",
            "smc_buffer_too_small_total",
            "smc_buffer_too_small_remote_total",
            "smc_buffer_allocations_total",
            "smc_buffer_reuses_total",
            "smc_buffer_downgrades_total",
        ] {
            assert_eq!(samples(&text, name).len(), 4, "{name}");
        }
        assert_eq!(
            one(
                &text,
                "smc_buffer_allocations_total",
                r#"{technology="smcr",direction="rx"}"#
            ),
            t.rx_buffers.alloc as f64
        );
        assert_eq!(samples(&text, "smc_special_socket_calls_total").len(), 10);
        assert_eq!(
            one(&text, "smc_handshake_errors_total", r#"{role="client"}"#),
            c.stats.client_handshake_errors as f64
        );
    }

    #[test]
    fn captured_fallbacks_by_role_and_decoded_reason() {
        let s = captured("fallback");
        let text = text_of(&s);
        let f = &s.counters.get().unwrap().fallback;
        assert_eq!(
            one(&text, "smc_fallbacks_total", r#"{role="server"}"#),
            f.server_total as f64
        );
        assert!(f.server_total >= 2 && f.client_total >= 1);
        let srv = |code: u32| {
            f.server
                .iter()
                .find(|r| r.code == code)
                .map_or(0, |r| r.count)
        };
        assert_eq!(
            one(
                &text,
                "smc_fallback_reasons_total",
                r#"{role="server",reason="0x03010000",reason_name="PEERNOSMC"}"#
            ),
            f64::from(srv(0x0301_0000))
        );
        assert!(srv(0x0301_0000) >= 1);
        assert!(text.contains(r#"reason="0x05000000",reason_name="PEERDECL""#));
        assert!(text.contains(
            r#"smc_fallback_reasons_total{role="client",reason="0x03030000",reason_name="NOSMCDEV"}"#
        ));
        // The fallback phase's open connections are TCP sockets in smc_diag.
        let tcp: f64 = samples(&text, "smc_sockets")
            .into_iter()
            .filter(|(l, _)| l.contains(r#"mode="tcp""#))
            .map(|x| x.1)
            .sum();
        assert!(tcp >= 3.0, "{text}");
    }

    #[test]
    fn captured_link_groups_links_devices_and_rdma() {
        let s = captured("smcr");
        let text = text_of(&s);
        let t = s.topology.get().unwrap();
        assert_eq!(
            one(&text, "smc_link_groups", r#"{technology="smcr"}"#),
            t.link_groups.len() as f64
        );
        let conns: f64 = samples(&text, "smc_link_group_connections")
            .iter()
            .map(|x| x.1)
            .sum();
        let want: u32 = t.link_groups.iter().map(|g| g.conns).sum();
        assert_eq!(conns, f64::from(want));
        assert!(want >= 4, "4 SMC-R sockets were open");
        let g = &t.link_groups[0];
        let id = format!("{:08x}", g.id);
        assert!(text.contains(&format!(
            r#"smc_link_group_rmb_bytes{{technology="smcr",link_group="{id}"}} {}"#,
            g.rmb_alloc.unwrap()
        )));
        let up = samples(&text, "smc_link_up");
        assert!(!up.is_empty() && up.iter().all(|x| x.1 == 1.0), "{up:?}");
        assert!(up[0].0.contains(r#"device="rxe_lo",port="1""#), "{up:?}");
        assert!(text.contains(r#"state="ACTIVE"} 1"#));
        let dev = samples(&text, "smc_device_port_up");
        assert_eq!(dev.len(), 1, "{dev:?}");
        assert!(dev[0].0.contains(r#"device="rxe_lo",port="1""#) && dev[0].1 == 1.0);
        assert_eq!(
            one(
                &text,
                "smc_rdma_resources_used",
                r#"{device="rxe_lo",type="qp"}"#
            ),
            3.0
        );
        // The capture has no verbs limits: no max and no ratio, rather than a made-up one.
        assert!(samples(&text, "smc_rdma_resources_max").is_empty());
        assert!(samples(&text, "smc_rdma_resources_usage_ratio").is_empty());
        let rp = samples(&text, "smc_rdma_port_up");
        assert_eq!(rp.len(), 1);
        assert_eq!(rp[0].1, 1.0);
        assert!(
            text.contains(r#"smc_info{version="2.1",smcr_v2="true""#),
            "{text}"
        );
        assert_eq!(one(&text, "smc_ueids", ""), 1.0);
        assert_eq!(
            one(&text, "smc_sockets", r#"{mode="smcr",state="ACTIVE"}"#),
            4.0
        );
    }

    #[test]
    fn usage_ratio_with_the_devices_limits() {
        let mut s = captured("smcr");
        if let Part::Read(d) = &mut s.rdma {
            d[0].limits = Some(Limits {
                max_qp: 4,
                max_cq: 16384,
                max_mr: 5,
                max_pd: 32764,
                max_srq: 0,
            });
        }
        let text = text_of(&s);
        assert_eq!(
            one(
                &text,
                "smc_rdma_resources_usage_ratio",
                r#"{device="rxe_lo",type="qp"}"#
            ),
            0.75
        );
        assert_eq!(
            one(
                &text,
                "smc_rdma_resources_max",
                r#"{device="rxe_lo",type="mr"}"#
            ),
            5.0
        );
        // srq max 0: a maximum, but no ratio; cm_id has no maximum at all.
        assert!(!text.contains(r#"smc_rdma_resources_usage_ratio{device="rxe_lo",type="srq"}"#));
        assert!(!text.contains(r#"smc_rdma_resources_max{device="rxe_lo",type="cm_id"}"#));
    }

    #[test]
    fn a_kernel_without_smc_netlink_counters_is_still_up() {
        // 5.10: smc and smc_diag answer, the SMC generic netlink family does not exist (5.11)
        let mut s = Snapshot::empty("x");
        s.counters = Part::Lacking("this kernel (Linux 5.10.0-46-amd64) has no ...".into());
        s.sockets = Part::Read(crate::snapshot::Sockets::Diag(Vec::new()));
        assert_eq!(one(&text_of(&s), "smc_up", ""), 1.0);
        // without smc_diag's answer either, nothing shows SMC is there
        s.sockets = Part::Absent("no smc_diag".into());
        assert_eq!(one(&text_of(&s), "smc_up", ""), 0.0);
    }

    #[test]
    fn every_numeric_sysctl_is_exported_by_name() {
        let mut s = Snapshot::empty("x");
        s.sysctls = [
            ("hs_ctrl", ""),
            ("smcr_max_send_wr", "16"),
            ("smcr_max_conns_per_lgr", "255"),
            ("wmem", "65536"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let text = text_of(&s);
        assert_eq!(
            one(&text, "smc_sysctl", "{name=\"smcr_max_send_wr\"}"),
            16.0
        );
        assert_eq!(
            one(&text, "smc_sysctl", "{name=\"smcr_max_conns_per_lgr\"}"),
            255.0
        );
        assert_eq!(one(&text, "smc_sysctl", "{name=\"wmem\"}"), 65536.0);
        assert_eq!(samples(&text, "smc_sysctl").len(), 3, "{text}");
    }

    #[test]
    fn without_smc_only_smc_up_0_and_the_exporters_own() {
        let s = Snapshot::empty("this kernel has no `smc`");
        let text = encode(&families(
            &s,
            &ScrapeMeta {
                errors_total: 3,
                duration_seconds: 0.25,
            },
        ))
        .unwrap();
        assert_eq!(one(&text, "smc_up", ""), 0.0);
        let names: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("# TYPE "))
            .map(|l| l.split(' ').nth(2).unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "smc_up",
                "smcrun_scrape_collector_success",
                "smcrun_scrape_collector_duration_seconds",
                "smcrun_scrape_duration_seconds",
                "smcrun_scrape_errors_total",
                "smcrun_build_info"
            ]
        );
        assert_eq!(one(&text, "smcrun_scrape_errors_total", ""), 3.0);
        assert_eq!(
            one(
                &text,
                "smcrun_scrape_collector_success",
                r#"{collector="counters"}"#
            ),
            0.0
        );
        assert_eq!(s.failures(), 0, "a missing module is not an error");
    }

    /// Issue 24: the exporter's size buckets (to 1024k) and `stats --json`'s (to 512k) differed;
    /// now every `size` label is a key of `bufs`/`reqs` with the same count, and back.
    #[test]
    fn size_buckets_agree_with_stats_json() {
        use crate::counters::Sample;
        use crate::stats::json::StatsView;
        for phase in ["smcr", "smcd", "fallback"] {
            let s = captured(phase);
            let text = text_of(&s);
            let c = s.counters.get().unwrap();
            let sample = Sample {
                stats: c.stats,
                fallback: c.fallback.clone(),
            };
            let json = serde_json::to_value(StatsView::new(&sample, None)).unwrap();
            let mut compared = 0;
            for (family, key) in [
                ("smc_buffers_by_size_total", "bufs"),
                ("smc_requests_by_size_total", "reqs"),
            ] {
                for (labels, v) in samples(&text, family) {
                    let label = |k: &str| {
                        let start = labels.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
                        labels[start..].split('"').next().unwrap().to_string()
                    };
                    let (tech, dir, size) =
                        (label("technology"), label("direction"), label("size"));
                    assert_eq!(
                        json[&tech][&dir][key][&size], v as u64,
                        "{phase} {family}{labels}"
                    );
                    compared += 1;
                }
                for tech in TECHS {
                    for dir in ["rx", "tx"] {
                        let keys: Vec<&String> = json[tech][dir][key]
                            .as_object()
                            .unwrap()
                            .keys()
                            .filter(|k| *k != "gt_512k")
                            .collect();
                        let mut want: Vec<&str> = smcrun_kernel::smc_genl::SIZE_BUCKETS.to_vec();
                        want.sort();
                        let mut keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
                        keys.sort();
                        assert_eq!(keys, want, "{phase} {tech} {dir} {key}");
                    }
                }
            }
            assert_eq!(compared, 2 * 2 * 2 * 9, "{phase}");
        }
    }

    #[test]
    fn the_content_type_is_the_encoders_with_its_charset() {
        assert_eq!(
            CONTENT_TYPE,
            format!("{}; charset=utf-8", prometheus::TEXT_FORMAT)
        );
    }

    /// Issue 24: a collector switched off leaves no series at all, not even its own
    /// `smcrun_scrape_collector_*`; the others are as before.
    #[test]
    fn a_collector_off_has_no_series() {
        use crate::snapshot::{Collector, Collectors};
        let all = captured("smcr");
        let text = text_of(&all);
        assert!(!samples(&text, "smc_sockets").is_empty());
        let on = Collectors::ALL.with(Collector::Sockets, false);
        let fewer = text_of(&all.clone().only(on));
        assert!(samples(&fewer, "smc_sockets").is_empty(), "{fewer}");
        assert!(!fewer.contains(r#"collector="sockets""#), "{fewer}");
        assert_eq!(
            samples(&fewer, "smc_bytes_total"),
            samples(&text, "smc_bytes_total")
        );
        let collectors = |t: &str, name: &str| -> Vec<String> {
            samples(t, name).into_iter().map(|(l, _)| l).collect()
        };
        assert_eq!(
            collectors(&fewer, "smcrun_scrape_collector_success"),
            collectors(&fewer, "smcrun_scrape_collector_duration_seconds")
        );
        assert_eq!(
            collectors(&fewer, "smcrun_scrape_collector_success").len(),
            Collector::ALL.len() - 1
        );
        // Only the RDMA collector: no SMC series, smc_up 0.
        let rdma = text_of(&all.only(Collectors::NONE.with(Collector::Rdma, true)));
        assert_eq!(
            collectors(&rdma, "smcrun_scrape_collector_success"),
            [r#"{collector="rdma"}"#]
        );
        assert!(samples(&rdma, "smc_bytes_total").is_empty());
        // Nothing on could tell whether SMC is there: no smc_up rather than a 0 that alerts.
        assert!(samples(&rdma, "smc_up").is_empty(), "{rdma}");
        let info = text_of(&captured("smcr").only(Collectors::NONE.with(Collector::Info, true)));
        assert_eq!(one(&info, "smc_up", ""), 1.0);
        assert!(!samples(&rdma, "smc_rdma_resources_used").is_empty());
    }

    #[test]
    fn a_failed_part_is_counted_and_leaves_no_series() {
        let mut s = captured("smcr");
        s.rdma = Part::Failed("RDMA RES_GET reply: malformed".into());
        assert_eq!(s.failures(), 1);
        let text = text_of(&s);
        assert!(samples(&text, "smc_rdma_resources_used").is_empty());
        assert_eq!(
            one(
                &text,
                "smcrun_scrape_collector_success",
                r#"{collector="rdma"}"#
            ),
            0.0
        );
        assert_eq!(one(&text, "smc_up", ""), 1.0);
    }

    fn report(pid: u32, program: &str, total: u64) -> ProcessReport {
        let mut r = ProcessReport {
            pid,
            program: program.into(),
            mode: "auto".into(),
            fallback: "tcp".into(),
            policy: "smc port 6379; tcp".into(),
            ..ProcessReport::default()
        };
        r.connections.total = total;
        r.connections.smc_r = total.saturating_sub(1);
        r.connections.tcp = total.min(1);
        r.sockets.converted = total;
        r
    }

    #[test]
    fn process_series_are_capped_busiest_first() {
        let p = Processes {
            running: vec![
                report(10, "redis-server", 5),
                report(11, "idle", 0),
                report(12, "redis-benchmark", 50),
            ],
            unreadable: 1,
        };
        let mut f = Families::default();
        processes(&mut f, &p, 2);
        let text = encode(&f.into_vec()).unwrap();
        assert_eq!(one(&text, "smcrun_processes", ""), 3.0);
        assert_eq!(one(&text, "smcrun_processes_not_exported", ""), 2.0);
        assert_eq!(
            one(
                &text,
                "smcrun_process_connections_total",
                r#"{pid="12",program="redis-benchmark",mode="smcr"}"#
            ),
            49.0
        );
        assert!(text.contains(r#"pid="10",program="redis-server""#));
        assert!(!text.contains(r#"program="idle""#), "{text}");
        // What each runs with, one info series a program.
        assert_eq!(
            one(
                &text,
                "smcrun_process_settings_info",
                r#"{pid="12",program="redis-benchmark",mode="auto",fallback="tcp",policy="smc port 6379; tcp"}"#
            ),
            1.0
        );
    }

    #[test]
    fn names_follow_the_conventions() {
        let mut s = captured("smcr");
        if let Part::Read(p) = &mut s.processes {
            p.running.push(report(1, "x", 1));
        }
        let fams = families(&s, &ScrapeMeta::default());
        let valid = |n: &str| {
            let mut cs = n.chars();
            cs.next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let mut seen = std::collections::HashSet::new();
        for f in &fams {
            let n = f.name();
            assert!(valid(n), "{n}");
            assert!(n.starts_with("smc_") || n.starts_with("smcrun_"), "{n}");
            assert_eq!(
                n.ends_with("_total"),
                f.get_field_type() == MetricType::COUNTER,
                "{n}"
            );
            assert!(!f.help().is_empty(), "{n}");
            for m in f.get_metric() {
                let labels: Vec<String> = m
                    .get_label()
                    .iter()
                    .map(|l| {
                        assert!(valid(l.name()), "{n}: {}", l.name());
                        format!("{}={}", l.name(), l.value())
                    })
                    .collect();
                assert!(
                    seen.insert((n.to_string(), labels.clone())),
                    "duplicate {n} {labels:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod agent_tests {
    use super::*;
    use crate::agent_state::{Counts, Group, Live, Modes, Overflow, Sides, Summary};

    #[test]
    fn the_agents_series_are_per_group_role_and_mode() {
        let mut c = Counts {
            smcr: 500,
            tcp: 2,
            tx_bytes: 7,
            ..Counts::default()
        };
        c.reasons.insert("0x03010000".into(), 2);
        let sides = Sides {
            client: c,
            server: Counts::default(),
        };
        let st = Summary {
            agent_pid: 1,
            agent_start_ticks: 1,
            written_ms: 1,
            attached: true,
            error: None,
            attachments: 1,
            total: sides.clone(),
            cgroups: vec![Group {
                name: "/a".into(),
                sides: sides.clone(),
            }],
            programs: vec![Group {
                name: "shapes".into(),
                sides,
            }],
            overflow: Overflow {
                done_full: 3,
                probes_missed: Some(4),
                ..Overflow::default()
            },
            ..Summary::default()
        };
        // A kernel that does not count missed probe runs has no such series (not a 0).
        let mut uncounted = st.clone();
        uncounted.overflow.probes_missed = None;
        let mut f = Families::default();
        agent(&mut f, &uncounted);
        let text = encode(&f.into_vec()).unwrap();
        assert!(!text.contains("what=\"probes_missed\""), "{text}");
        let mut f = Families::default();
        agent(&mut f, &st);
        let text = encode(&f.into_vec()).unwrap();
        for want in [
            "smcrun_agent_attached 1",
            "smcrun_agent_lost_total{what=\"done_full\"} 3",
            "smcrun_agent_lost_total{what=\"probes_missed\"} 4",
            "smcrun_agent_connections_total{scope=\"cgroup\",name=\"/a\",role=\"client\",mode=\"smcr\"} 500",
            "smcrun_agent_connections_total{scope=\"program\",name=\"shapes\",role=\"client\",mode=\"tcp\"} 2",
            "smcrun_agent_fallbacks_total{scope=\"program\",name=\"shapes\",role=\"client\",reason=\"0x03010000\"} 2",
            "smcrun_agent_bytes_total{scope=\"cgroup\",name=\"/a\",role=\"client\",direction=\"tx\"} 7",
        ] {
            assert!(text.lines().any(|l| l == want), "{want} not in:\n{text}");
        }
        // 2 groups x 2 roles x 4 modes: the series are bounded by the groups, not the traffic.
        let n = text
            .lines()
            .filter(|l| l.starts_with("smcrun_agent_connections_total{"))
            .count();
        assert_eq!(n, 16);
    }

    #[test]
    fn sockets_from_the_agent_are_its_own_series_and_no_smc_sockets() {
        use crate::snapshot::{Part, Snapshot, Sockets};
        let mut s = Snapshot::empty("none");
        s.sockets = Part::Read(Sockets::Agent(Live {
            netns_cookie: 1,
            listen: Modes {
                undecided: 10_000,
                ..Modes::default()
            },
            client: Modes {
                smcr: 2,
                tcp: 1,
                ..Modes::default()
            },
            ..Live::default()
        }));
        let text = encode(&families(&s, &Default::default())).unwrap();
        for want in [
            "smcrun_agent_sockets{role=\"listen\",mode=\"undecided\"} 10000",
            "smcrun_agent_sockets{role=\"client\",mode=\"smcr\"} 2",
            "smcrun_agent_sockets{role=\"client\",mode=\"tcp\"} 1",
            "smcrun_agent_sockets{role=\"server\",mode=\"smcd\"} 0",
            "smcrun_scrape_collector_success{collector=\"sockets\"} 1",
        ] {
            assert!(text.lines().any(|l| l == want), "{want} not in:\n{text}");
        }
        // 3 roles x 4 modes, whatever the number of sockets; never a smc_sockets with a state
        // the agent cannot give.
        let n = text
            .lines()
            .filter(|l| l.starts_with("smcrun_agent_sockets{"))
            .count();
        assert_eq!(n, 12);
        assert!(
            !text.lines().any(|l| l.starts_with("smc_sockets")),
            "{text}"
        );
    }
}
