//! The operator's tools on this machine: the exporter's output passes `promtool check metrics`
//! and says what the real-kernel fixtures hold; a real Prometheus server scrapes it on 127.0.0.1
//! and answers queries for `smc_up` and a counter; the alert rules pass `promtool test rules`;
//! the textfile is written whole; doctor's warnings and failures on this host; enable/disable
//! checked by `systemd-analyze verify`; completions; closed pipes and full disks; the
//! did-you-mean rule. (The same tools on a real SMC kernel: the VM test bed's `ops` checks.)
//!
//! Needs promtool and prometheus (Debian's prometheus package) and systemd-analyze (systemd);
//! `tests/deps` installs them.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, fresh_dir, kernel_has_af_smc, ok, run, smcrun, tool};
use smcrun_kernel::smc_genl::{parse_fallback_stats, parse_stats};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures(phase: &str) -> PathBuf {
    repo().join("kernel/tests/fixtures").join(phase)
}

/// `promtool check metrics` on `text`: (passed, what it said).
fn promtool_check(text: &str) -> (bool, String) {
    let mut c = tool("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// The value of the one sample `name{labels}` (labels exactly as written) in exposition text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn metrics_of(args: &[&str]) -> String {
    let mut c = smcrun();
    c.arg("metrics").args(args);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "smcrun metrics {args:?}: {err}");
    out
}

#[test]
fn this_kernels_metrics_pass_promtool() {
    let text = metrics_of(&[]);
    let (ok, said) = promtool_check(&text);
    assert!(ok, "promtool check metrics: {said}\n{text}");
    let up = sample(&text, "smc_up").expect("smc_up is always there");
    assert_eq!(up, if kernel_has_af_smc() { up } else { 0.0 }, "{text}");
    if !kernel_has_af_smc() {
        // Fewer series, not zeros that look like measurements.
        assert!(!text.contains("smc_bytes_total"), "{text}");
        assert_eq!(sample(&text, "smcrun_scrape_errors_total"), Some(0.0));
    }
    // The check can fail: a counter without _total is refused.
    assert!(!promtool_check("# TYPE x counter\nx 1\n").0);
}

#[test]
fn the_fixtures_metrics_pass_promtool_and_are_the_kernels_numbers() {
    for phase in ["smcr", "fallback"] {
        let dir = fixtures(phase);
        let text = metrics_of(&["--replay", dir.to_str().unwrap()]);
        let (ok, said) = promtool_check(&text);
        assert!(ok, "{phase}: promtool check metrics: {said}");
        let read = |n: &str| std::fs::read(dir.join(format!("{n}.bin"))).unwrap();
        let s = parse_stats(&read("smc_GET_STATS")).unwrap();
        let f = parse_fallback_stats(&read("smc_GET_FBACK_STATS")).unwrap();
        assert_eq!(sample(&text, "smc_up"), Some(1.0));
        for (series, want) in [
            (
                r#"smc_bytes_total{technology="smcr",direction="rx"}"#,
                s.smcr.rx_bytes,
            ),
            (
                r#"smc_bytes_total{technology="smcr",direction="tx"}"#,
                s.smcr.tx_bytes,
            ),
            (
                r#"smc_connections_total{technology="smcr",role="server",version="v2"}"#,
                s.smcr.server_v2_success,
            ),
            (
                r#"smc_requests_total{technology="smcr",direction="rx"}"#,
                s.smcr.rx_count,
            ),
            (
                r#"smc_buffers_by_size_total{technology="smcr",direction="rx",size="64k"}"#,
                s.smcr.rx_buffer_sizes.le_64k,
            ),
            (r#"smc_fallbacks_total{role="client"}"#, f.client_total),
            (r#"smc_fallbacks_total{role="server"}"#, f.server_total),
        ] {
            assert_eq!(
                sample(&text, series),
                Some(want as f64),
                "{phase}: {series}"
            );
        }
        for r in &f.server {
            let name = smcrun_kernel::reasons::describe(r.code).name;
            let series = format!(
                "smc_fallback_reasons_total{{role=\"server\",reason=\"0x{:08x}\",reason_name=\"{name}\"}}",
                r.code
            );
            assert_eq!(sample(&text, &series), Some(f64::from(r.count)), "{series}");
        }
    }
}

/// The `collector` labels of `smcrun_scrape_collector_success` in `text`.
fn collectors_in(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("smcrun_scrape_collector_success{collector=\""))
        .filter_map(|l| l.split('"').next())
        .collect()
}

/// Issue 24: node_exporter's collector flags, on `metrics` (and `exporter`, the same flags).
#[test]
fn collectors_switch_on_and_off_as_node_exporters_do() {
    let smcr = fixtures("smcr");
    let replay = ["--replay", smcr.to_str().unwrap()];
    let all = metrics_of(&replay);
    assert!(all.contains("\nsmc_sockets{"), "{all}");
    for off in ["--no-collector.sockets", "--no-sockets"] {
        let text = metrics_of(&[&replay[..], &[off]].concat());
        assert!(promtool_check(&text).0, "{off}: {text}");
        assert!(!text.contains("smc_sockets"), "{off}: {text}");
        assert!(!collectors_in(&text).contains(&"sockets"), "{off}: {text}");
        assert!(text.contains("\nsmc_bytes_total{"), "{off}: {text}");
    }
    let only = metrics_of(
        &[
            &replay[..],
            &[
                "--collector.disable-defaults",
                "--collector.counters",
                "--collector.rdma",
            ],
        ]
        .concat(),
    );
    assert_eq!(collectors_in(&only), ["counters", "rdma"], "{only}");
    assert!(only.contains("smcrun_scrape_collector_duration_seconds{collector=\"rdma\"}"));
    assert!(!only.contains("smc_link_up"), "topology is off: {only}");
    assert_eq!(sample(&only, "smc_up"), Some(1.0));
    // This kernel, with only the sysctl collector.
    let host = metrics_of(&["--collector.disable-defaults", "--collector.sysctl"]);
    assert_eq!(collectors_in(&host), ["sysctl"], "{host}");
    // An unknown name: one line naming it and every collector, exit 2.
    for bad in ["--collector.nope", "--no-collector.nope"] {
        let mut c = smcrun();
        c.args(["metrics", bad]);
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad}: {err}");
        assert!(err.contains("\"nope\""), "{bad}: {err}");
        assert!(
            err.contains("counters, info, topology, sockets, rdma"),
            "{err}"
        );
    }
    let mut c = smcrun();
    c.args(["exporter", "--collector.sockets", "--no-collector.sockets"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(2), "{err}");
}

/// One HTTP GET on 127.0.0.1: (status, body).
fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    Ok((status, body))
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "timed out after {secs} s waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn start_exporter() -> (Killed, u16) {
    let port = free_port();
    let mut c = smcrun();
    c.args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = Killed(c.spawn().unwrap());
    wait_for("the exporter to listen", 20, || {
        get(port, "/metrics").ok().filter(|r| r.0 == 200)
    });
    (child, port)
}

/// `smcrun exporter --listen 127.0.0.1:PORT ARGS`, once its port takes connections.
fn spawn_exporter(args: &[&str]) -> (Killed, u16) {
    let port = free_port();
    let mut c = smcrun();
    c.args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = Killed(c.spawn().unwrap());
    wait_for("the exporter to listen", 20, || {
        TcpStream::connect(("127.0.0.1", port)).ok()
    });
    (child, port)
}

/// A response as curl got it.
struct Curled {
    /// The HTTP status (0: curl got none; `err` says why).
    status: u16,
    /// The header lines, lower-cased.
    headers: String,
    body: String,
    err: String,
}

/// `curl -sS -i ARGS URL`: a real HTTP client's view of the exporter.
fn curl(args: &[&str], url: &str) -> Curled {
    let o = tool("curl")
        .args(["-sS", "-i", "--max-time", "20"])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&o.stdout).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    Curled {
        status: head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        headers: head.to_ascii_lowercase(),
        body: body.to_string(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Issue 24: `/` is an HTML page naming the version, linking the metrics and listing the
/// collectors on; every answer says its charset; an unknown path is 404.
#[test]
fn the_exporter_has_a_landing_page_and_says_its_charset() {
    let (_exporter, port) = spawn_exporter(&["--no-collector.sockets"]);
    let base = format!("http://127.0.0.1:{port}");
    let page = curl(&[], &format!("{base}/"));
    assert_eq!(page.status, 200, "{}", page.err);
    assert!(
        page.headers
            .contains("content-type: text/html; charset=utf-8\r\n"),
        "{}",
        page.headers
    );
    assert!(page.body.starts_with("<!DOCTYPE html>"), "{}", page.body);
    assert!(page.body.contains("<title>smcrun exporter</title>"));
    assert!(page.body.contains("<a href=\"/metrics\">"), "{}", page.body);
    let mut c = smcrun();
    c.arg("--version");
    let (version, _, _) = run(c);
    let version = version.split_whitespace().last().unwrap().to_string();
    assert!(
        page.body.contains(&format!("smcrun {version}")),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<code>sockets</code>: off"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<code>counters</code>: on"),
        "{}",
        page.body
    );
    let metrics = curl(&[], &format!("{base}/metrics"));
    assert_eq!(metrics.status, 200, "{}", metrics.err);
    assert!(
        metrics
            .headers
            .contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{}",
        metrics.headers
    );
    assert!(metrics.body.contains("\nsmc_up "), "{}", metrics.body);
    let missing = curl(&[], &format!("{base}/nope"));
    assert_eq!(missing.status, 404);
    assert!(
        missing.headers.contains("charset=utf-8"),
        "{}",
        missing.headers
    );
    let post = curl(&["-X", "POST"], &format!("{base}/metrics"));
    assert_eq!(post.status, 405);
}

#[test]
fn the_exporter_serves_concurrent_scrapes() {
    let (_exporter, port) = start_exporter();
    let (status, body) = get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(promtool_check(&body).0, "{body}");
    assert_eq!(get(port, "/nope").unwrap().0, 404);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let (s, b) = get(port, "/metrics").unwrap();
                    assert_eq!(s, 200);
                    assert!(b.contains("\nsmc_up "), "{b}");
                    assert!(b.contains("smcrun_build_info"), "a whole scrape: {b}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn the_exporter_listens_on_loopback_unless_told() {
    let mut c = smcrun();
    c.args(["exporter", "--help"]);
    let (out, _, _) = run(c);
    assert!(out.contains("127.0.0.1:9609"), "{out}");
    let mut c = smcrun();
    c.args(["exporter", "--listen", "nonsense"]);
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nonsense"), "{err}");
}

#[test]
fn a_prometheus_server_scrapes_the_exporter() {
    let (exporter, port) = start_exporter();
    let dir = fresh_dir("prom");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             scrape_configs:\n  - job_name: smcrun\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let web = free_port();
    let server = Killed(
        tool("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(dir.join("log")).unwrap()))
            .spawn()
            .unwrap(),
    );
    let query = |q: &str| -> Option<serde_json::Value> {
        let (s, body) = get(web, &format!("/api/v1/query?query={q}")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let r = v["data"]["result"].as_array()?;
        (s == 200 && !r.is_empty()).then(|| r[0].clone())
    };
    let up = wait_for("Prometheus to have scraped smc_up", 90, || query("smc_up"));
    assert_eq!(up["metric"]["job"], "smcrun", "{up}");
    let want = if kernel_has_af_smc() {
        up["value"][1].clone()
    } else {
        "0".into()
    };
    assert_eq!(up["value"][1], want, "{up}");
    let errors = wait_for("a counter", 30, || query("smcrun_scrape_errors_total"));
    assert_eq!(errors["value"][1], "0", "{errors}");
    // The scrape target is healthy in Prometheus' own eyes.
    let target = wait_for("up == 1", 30, || {
        query("up").filter(|u| u["value"][1] == "1")
    });
    assert_eq!(target["metric"]["instance"], format!("127.0.0.1:{port}"));
    // Issue 24: the exporter gone, the SmcrunExporterDown rule's expression (as the rules file
    // has it) finds this target.
    let rules =
        std::fs::read_to_string(repo().join("examples/prometheus/smcrun-rules.yml")).unwrap();
    let expr = rules
        .split("alert: SmcrunExporterDown")
        .nth(1)
        .and_then(|r| r.lines().find_map(|l| l.trim().strip_prefix("expr: ")))
        .expect("SmcrunExporterDown has an expr")
        .to_string();
    let encoded: String = expr
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    assert!(query(&encoded).is_none(), "{expr}: the exporter is up");
    drop(exporter);
    let down = wait_for("the exporter-down expression to match", 30, || {
        query(&encoded)
    });
    assert_eq!(
        down["metric"]["instance"],
        format!("127.0.0.1:{port}"),
        "{down}"
    );
    assert_eq!(down["metric"]["job"], "smcrun", "{down}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_alert_rules_pass_their_unit_tests() {
    let dir = repo().join("examples/prometheus");
    let mut c = tool("promtool");
    c.args(["test", "rules", "smcrun-rules.test.yml"])
        .current_dir(&dir);
    ok(c);
    let mut c = tool("promtool");
    c.args(["check", "config", "prometheus.yml"])
        .current_dir(&dir);
    ok(c);
}

/// Metric names a PromQL text uses (smc_* and smcrun_*).
fn names_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let start_ok = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if start_ok && (text[i..].starts_with("smc_") || text[i..].starts_with("smcrun_")) {
            let end = text[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(b.len(), |n| i + n);
            out.push(text[i..end].to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_rules_and_the_dashboard_use_metrics_the_exporter_has() {
    let source = std::fs::read_to_string(repo().join("views/src/metrics.rs")).unwrap();
    let rules =
        std::fs::read_to_string(repo().join("examples/prometheus/smcrun-rules.yml")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/prometheus/grafana-smcrun.json")).unwrap(),
    )
    .unwrap();
    let exprs: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        // (a row panel has no queries)
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect();
    assert!(exprs.len() >= 10);
    let mut used = names_in(&rules);
    for e in &exprs {
        used.extend(names_in(e));
    }
    assert!(used.len() > 10, "{used:?}");
    for n in used {
        assert!(
            source.contains(&format!("\"{n}\"")),
            "{n} is not a metric the exporter makes"
        );
    }
    // Every dashboard expression is valid PromQL for a real Prometheus (promtool parses the
    // rules; the dashboard's go through a throwaway rules file).
    let dir = fresh_dir("dash");
    let mut file = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$__rate_interval", "1m")
            .replace("$__range", "1h")
            .replace("$instance", ".*");
        file.push_str(&format!(
            "      - record: dashboard:q{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    std::fs::write(dir.join("d.yml"), file).unwrap();
    let mut c = tool("promtool");
    c.args(["check", "rules"]).arg(dir.join("d.yml"));
    ok(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_textfile_is_written_whole_for_node_exporter() {
    let dir = fresh_dir("textfile");
    let mut c = smcrun();
    c.args(["exporter", "--textfile"]).arg(&dir).arg("--once");
    let (_, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    let text = std::fs::read_to_string(dir.join("smcrun.prom")).unwrap();
    assert!(promtool_check(&text).0, "{text}");
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["smcrun.prom"], "no temporary file is left");
    // A symlink in place of the directory is refused, not followed.
    let link = dir.join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let mut c = smcrun();
    c.args(["exporter", "--textfile"]).arg(&link).arg("--once");
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("not a directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 19: `--textfile LINK` was refused but `--textfile LINK/` wrote through the symlink. No
/// spelling of a path through a symlink is written through.
#[test]
fn the_textfile_is_never_written_through_a_symlink() {
    let dir = fresh_dir("textlink");
    let target = dir.join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let d = dir.to_str().unwrap();
    for spelling in [
        format!("{d}/link/"),
        format!("{d}/link/."),
        format!("{d}/link//"),
        format!("{d}/sub/../link/"),
        format!("{d}/link/../target"),
    ] {
        let mut c = smcrun();
        c.args(["exporter", "--textfile", &spelling, "--once"]);
        let (_, err, o) = run(c);
        assert_eq!(o.status.code(), Some(1), "--textfile {spelling}: {err}");
        assert!(err.contains("symlink"), "--textfile {spelling}: {err}");
        assert_eq!(
            std::fs::read_dir(&target).unwrap().count(),
            0,
            "--textfile {spelling} wrote through the symlink"
        );
    }
    // The real directory, however spelled, is written.
    let mut c = smcrun();
    c.args([
        "exporter",
        "--textfile",
        &format!("{d}/sub/../target/."),
        "--once",
    ]);
    let (_, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert!(target.join("smcrun.prom").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 19: another user who made the temporary names the exporter would use stopped every
/// later write (EEXIST on the same names); the exporter picks names that cannot be foreseen.
#[test]
fn planted_temporary_names_do_not_stop_the_textfile() {
    let dir = fresh_dir("textplant");
    let mut c = smcrun();
    c.args(["exporter", "--textfile"])
        .arg(&dir)
        .args(["--interval", "0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let exporter = Killed(c.spawn().unwrap());
    let pid = exporter.0.id();
    // Every name of the form `.smcrun.prom.PID.N.tmp` a counter from 0 would reach, planted.
    for n in 0..64 {
        std::fs::write(dir.join(format!(".smcrun.prom.{pid}.{n}.tmp")), b"planted").unwrap();
    }
    let prom = dir.join("smcrun.prom");
    wait_for("the first textfile", 20, || prom.is_file().then_some(()));
    std::fs::remove_file(&prom).unwrap();
    wait_for("the textfile to be written again", 10, || {
        prom.is_file().then_some(())
    });
    assert!(std::fs::read_to_string(&prom).unwrap().contains("smc_up"));
    drop(exporter);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A field of /proc/PID/status (`VmHWM`, `Threads`...): its number (kB for sizes).
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status:\n{status}"))
}

/// Raises this process's open-file limit to its hard limit (children inherit it) and returns it.
fn raise_nofile() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the one struct given.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
        l.rlim_cur = l.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
    }
    l.rlim_cur
}

/// Sends an unfinished request header, `chunk` after `chunk`, until the exporter cuts the
/// connection or `limit` bytes went; returns the bytes sent and the status it answered (0: none).
fn unfinished_header(port: u16, limit: usize) -> (usize, u16) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, 0);
    };
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let chunk = vec![b'a'; 64 << 10];
    let mut sent = 0;
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Flood: ")
        .is_ok()
    {
        while sent < limit && s.write_all(&chunk).is_ok() {
            sent += chunk.len();
        }
    }
    let mut answer = [0u8; 12];
    let status = match s.read(&mut answer) {
        Ok(12) => std::str::from_utf8(&answer[9..12])
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    (sent, status)
}

/// Issue 19: a client could make the exporter buffer an endless request header, and each
/// connection had a thread of its own. Under a flood of huge unfinished headers and thousands of
/// idle connections, the exporter stays small and few-threaded, and still answers a scrape.
#[test]
fn the_exporter_stays_bounded_and_answers_during_a_flood() {
    // Bounds: the exporter holds at most 512 connections with an 8 KiB header buffer each, and
    // runs one thread plus at most 4 scraping; without bounds this flood takes ~240 MB and
    // ~4,000 threads.
    const MAX_RSS_KB: u64 = 64 << 10;
    const MAX_THREADS: u64 = 8;
    const FLOODERS: usize = 6;
    const FLOOD_BYTES: usize = 40 << 20;
    // 4,000 idle connections need ~4,100 descriptors here (and, unbounded, as many there).
    let idle_count = 4000.min(raise_nofile().saturating_sub(200) as usize);
    assert!(idle_count >= 1000, "RLIMIT_NOFILE is too low for the test");
    let (exporter, port) = start_exporter();
    let pid = exporter.0.id();
    // A header over the limit is refused with 431 (or 400) at once.
    let (_, status) = unfinished_header(port, 1 << 20);
    assert!(
        [400, 431].contains(&status),
        "an oversized header got {status}"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut most = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && most < FLOOD_BYTES {
                    most = most.max(unfinished_header(port, FLOOD_BYTES).0);
                }
                most
            })
        })
        .collect();
    let t_idle = Instant::now();
    let mut idle = Vec::with_capacity(idle_count);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    for _ in 0..idle_count {
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            idle.push(s);
        }
    }
    let threads = proc_status(pid, "Threads");
    eprintln!(
        "flood: {} connections opened in {:?}",
        idle.len(),
        t_idle.elapsed()
    );
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let t0 = Instant::now();
        let (status, body) = get(port, "/metrics").expect("a scrape during the flood");
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\nsmc_up "), "{body}");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "a scrape took {:?} during the flood",
            t0.elapsed()
        );
        slowest = slowest.max(t0.elapsed());
    }
    let threads = threads.max(proc_status(pid, "Threads"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = flooders.into_iter().map(|f| f.join().unwrap()).max();
    let rss = proc_status(pid, "VmHWM");
    drop(idle);
    eprintln!(
        "flood: {threads} threads, a peak of {rss} kB, the slowest scrape {slowest:?}, the \
         longest header {most:?} bytes"
    );
    assert!(
        threads <= MAX_THREADS && rss <= MAX_RSS_KB,
        "with {idle_count} connections open and {FLOODERS} endless headers (one flooder sent \
         {most:?} bytes), the exporter had {threads} threads (at most {MAX_THREADS} expected) \
         and a peak resident memory of {rss} kB (at most {MAX_RSS_KB} kB expected)"
    );
}

/// Issue 19: a client trickling its header one byte at a time held its connection for as long
/// as it liked. The header must be whole within a bounded time from the connection's start.
#[test]
fn a_slow_header_is_cut_off_after_a_bounded_time() {
    let (_exporter, port) = start_exporter();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let t0 = Instant::now();
    let header = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ".iter();
    for b in header.chain(std::iter::repeat(&b'a')) {
        if s.write_all(&[*b]).is_err() {
            break;
        }
        // Waits 200 ms for the exporter to answer or close; a timeout means still connected.
        match s.read(&mut [0u8; 512]) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            _ => break,
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "a client trickling its header was still connected after {:?}",
            t0.elapsed()
        );
    }
}

#[test]
fn doctor_on_this_host() {
    let mut c = smcrun();
    c.arg("doctor");
    let (out, err, o) = run(c);
    let mut c = smcrun();
    c.args(["doctor", "--json"]);
    let (json, _, oj) = run(c);
    let v: serde_json::Value = serde_json::from_str(&json).expect("doctor --json is JSON");
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(oj.status.code(), o.status.code());
    assert_eq!(v["exit_code"].as_i64(), o.status.code().map(i64::from));
    for c in checks {
        assert!(
            ["pass", "warn", "fail", "skip"].contains(&c["status"].as_str().unwrap()),
            "{c}"
        );
    }
    let last = out.lines().last().unwrap_or("");
    assert!(last.starts_with("doctor: "), "{out}");
    if !kernel_has_af_smc() {
        // This machine: no SMC, said plainly, exit 3 (not 2, bad usage), and no advice to
        // modprobe anything.
        assert_eq!(o.status.code(), Some(3), "{out}{err}");
        let smc = out
            .lines()
            .find(|l| l.starts_with("FAIL  smc "))
            .expect(&out);
        assert!(smc.contains("this kernel has no SMC"), "{smc}");
        if !Path::new("/proc/modules").exists() {
            assert!(!out.contains("modprobe"), "{out}");
        }
        let by_id = |id: &str| checks.iter().find(|c| c["id"] == id).unwrap().clone();
        assert_eq!(by_id("smc")["status"], "fail");
        // The kernel row passes nothing on a kernel without SMC.
        assert_eq!(by_id("kernel")["status"], "skip");
        assert!(!out.contains("none of them work"), "{out}");
        assert_eq!(by_id("smc-rv2")["status"], "skip");
    }
    // Without --bpf, BPF mode is one skipped row and decides nothing.
    let ids: Vec<&str> = checks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&"bpf") && !ids.iter().any(|i| i.starts_with("bpf:")),
        "{ids:?}"
    );
    // Bad usage is 2, whatever the checks would say.
    let mut c = smcrun();
    c.args(["doctor", "--no-such-flag"]);
    let (_, _, bad) = run(c);
    assert_eq!(bad.status.code(), Some(2));
    // With --bpf, every prerequisite is a row; smc is not said twice, and the load is not
    // tried when an earlier row already says it cannot work.
    let mut c = smcrun();
    c.args(["doctor", "-j", "--bpf"]);
    let (json, _, ob) = run(c);
    let v: serde_json::Value = serde_json::from_str(&json).expect("doctor -j --bpf is JSON");
    assert_eq!(v["exit_code"].as_i64(), ob.status.code().map(i64::from));
    let rows = v["checks"].as_array().unwrap();
    let row = |id: &str| {
        rows.iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id}: {v}"))
            .clone()
    };
    for id in [
        "kernel",
        "btf",
        "hook",
        "mptcp",
        "capabilities",
        "smc",
        "load",
        "bpffs",
        "cgroup2",
    ] {
        let r = row(&format!("bpf:{id}"));
        assert!(
            !r["detail"].as_str().unwrap().contains(" ()"),
            "an empty verifier line: {r}"
        );
        if r["status"] == "fail" {
            assert!(r["advice"].as_str().unwrap().starts_with("BPF mode"), "{r}");
            assert!(
                ob.status.code() == Some(3),
                "a failed BPF row fails doctor --bpf: {r}"
            );
        }
    }
    if !kernel_has_af_smc() {
        assert_eq!(row("bpf:smc")["status"], "skip");
        assert_eq!(row("bpf:smc")["detail"], "needs smc");
    }
    let load = row("bpf:load");
    let missing_before = ["kernel", "btf", "hook", "mptcp", "capabilities"]
        .iter()
        .find(|id| row(&format!("bpf:{id}"))["status"] == "fail");
    match missing_before {
        Some(id) => assert_eq!(
            load["detail"],
            format!("loading the socket() hook program: not tried: {id} is missing"),
            "{load}"
        ),
        None if load["status"] == "fail" => {
            let advice = load["advice"].as_str().unwrap();
            // Never a guess presented as the cause.
            assert!(!advice.contains("a container or an LSM may"), "{load}");
        }
        None => assert_eq!(load["status"], "pass", "{load}"),
    }
    // A program LD_PRELOAD cannot reach fails its row; a dynamic one passes.
    let program_row = |prog: &[&str]| {
        let mut c = smcrun();
        c.args(["doctor", "--json", "--"]).args(prog);
        let (json, _, _) = run(c);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "program")
            .unwrap()
            .clone()
    };
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if let Some(b) = busybox {
        let p = program_row(&[b, "true"]);
        assert_eq!(p["status"], "fail", "{p}");
        assert!(
            p["detail"].as_str().unwrap().contains("statically linked"),
            "{p}"
        );
    }
    let p = program_row(&["sh", "-c", "true"]);
    assert_eq!(p["status"], "pass", "{p}");
}

/// A fresh folder `tag` holding the one unit file `unit` with `text`, and the SYSTEMD_UNIT_PATH
/// that puts it before the system's units, so `enable` and `disable` touch nothing of the host's.
fn unit_dir(tag: &str, unit: &str, text: &str) -> (PathBuf, String) {
    let dir = fresh_dir(tag);
    std::fs::write(dir.join(unit), text).unwrap();
    let unit_path = format!("{}:", dir.display());
    (dir, unit_path)
}

/// `smcrun ARGS` with the units of `unit_path` (see [`unit_dir`]).
fn with_units(unit_path: &str, args: &[&str]) -> (String, String, std::process::Output) {
    let mut c = smcrun();
    c.env("SYSTEMD_UNIT_PATH", unit_path).args(args);
    run(c)
}

#[test]
fn enable_and_disable_a_systemd_unit() {
    let (dir, unit_path) = unit_dir(
        "units",
        "smcrun-test-redis.service",
        "[Unit]\nDescription=redis for smcrun's test\n[Service]\nType=simple\nExecStart=-/usr/bin/redis-server --port 7777 --save \"\"\n",
    );
    let (out, err, o) = with_units(
        &unit_path,
        &[
            "enable",
            "smcrun-test-redis",
            "--mode",
            "inet",
            "--policy",
            "smc port 6379; tcp",
        ],
    );
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("systemctl daemon-reload"), "{out}");
    let dropin = dir.join("smcrun-test-redis.service.d/smcrun.conf");
    let text = std::fs::read_to_string(&dropin).unwrap();
    let smcrun_path = std::fs::canonicalize(common::bin("smcrun")).unwrap();
    assert!(
        text.contains(&format!(
            "ExecStart=-{} --mode inet --policy \"smc port 6379; tcp\" -- /usr/bin/redis-server --port 7777 --save \"\"",
            smcrun_path.display()
        )),
        "{text}"
    );
    let mut c = tool("systemd-analyze");
    c.env("SYSTEMD_UNIT_PATH", &unit_path)
        .args(["verify", "smcrun-test-redis.service"]);
    ok(c);
    // A bad policy is refused before anything is written.
    let (_, err, o) = with_units(
        &unit_path,
        &["enable", "smcrun-test-redis", "--policy", "smc prot 1"],
    );
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(std::fs::read_to_string(&dropin).unwrap() == text);
    let (out, err, o) = with_units(&unit_path, &["disable", "smcrun-test-redis"]);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("systemctl daemon-reload"), "{out}");
    assert!(!dropin.exists() && !dropin.parent().unwrap().exists());
    let (_, err, o) = with_units(&unit_path, &["enable", "no-such-unit"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("no unit file no-such-unit.service"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let mut c = smcrun();
        c.args(["completions", shell]);
        let (out, err, o) = run(c);
        assert!(o.status.success(), "{err}");
        assert!(
            out.contains("exporter") && out.contains("doctor"),
            "{shell}"
        );
    }
    let mut c = smcrun();
    c.args(["completions", "bash"]);
    let (script, _, _) = run(c);
    let o = Command::new("bash")
        .args(["-c", "eval \"$1\" && complete -p smcrun", "_", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Run `smcrun ARGS` with stdout on /dev/full, and with stdout a pipe closed at once.
fn closed_and_full(args: &[&str]) {
    let mut c = smcrun();
    c.args(args).stdout(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    );
    let (_, err, o) = run(c);
    let code = o.status.code();
    assert_ne!(code, Some(101), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("failed printing"),
        "{args:?}: {err}"
    );
    if err.contains("cannot write to stdout") {
        assert_eq!(code, Some(1), "{args:?}");
        assert_eq!(
            err.lines().filter(|l| l.contains("stdout")).count(),
            1,
            "{err}"
        );
    }
    let mut child = smcrun()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // An exit, not SIGPIPE: smcrun ignores it, and says a failed write itself.
    assert!(o.status.code().is_some(), "{args:?}: {:?} {err}", o.status);
    assert_ne!(o.status.code(), Some(101), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("failed printing"),
        "{args:?}: {err}"
    );
}

#[test]
fn no_view_panics_on_a_closed_pipe_or_a_full_disk() {
    for args in [
        &["metrics"][..],
        &["doctor"],
        &["doctor", "--json"],
        &["ps"],
        &["ps", "--json"],
        &["--help"],
        &["completions", "bash"],
        &[
            "policy",
            "check",
            "--policy",
            "tcp",
            "--program",
            "x",
            "--connect",
            "10.0.0.1:80",
        ],
        &["ss"],
        &["stats", "--json"],
    ] {
        closed_and_full(args);
    }
    // The full disk is said in one line and exit 1.
    let mut c = smcrun();
    c.arg("metrics").stdout(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap(),
    );
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "smcrun: cannot write to stdout: No space left on device (os error 28)"
    );
}

#[test]
fn a_program_named_like_a_subcommand_runs_and_says_so() {
    let mut c = smcrun();
    c.args(["stat", "-c", "%n", "/"]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert_eq!(out.trim(), "/");
    assert!(err.contains("did you mean `smcrun stats`?"), "{err}");
    assert!(err.contains("`smcrun -- stat` to silence"), "{err}");
    let mut c = smcrun();
    c.args(["--", "stat", "-c", "%n", "/"]);
    let (_, err, o) = run(c);
    assert!(o.status.success());
    assert!(!err.contains("did you mean"), "{err}");
    let mut c = smcrun();
    c.arg("doctr");
    let (_, err, o) = run(c);
    assert_eq!(o.status.code(), Some(127));
    assert!(err.contains("did you mean `smcrun doctor`?"), "{err}");
    // Bare smcrun lists the operator's subcommands.
    let (_, err, o) = run(smcrun());
    assert_eq!(o.status.code(), Some(2));
    for sub in [
        "exporter",
        "metrics",
        "doctor",
        "enable",
        "disable",
        "stats",
        "ss",
        "ps",
        "completions",
    ] {
        assert!(err.contains(&format!("  {sub} ")), "{sub}: {err}");
    }
}

/// Every view and command that prints data takes `-j`, prints one pretty JSON document on stdout
/// and, when it fails, an error object there too (`{"error": LINE, "exit_code": N}`, the same
/// line as on stderr), never nothing. On this host most of them fail (no SMC): that is the
/// error object's test; on an SMC kernel the data's.
#[test]
fn every_data_command_takes_dash_j_and_fails_with_an_error_object() {
    let (units, unit_path) = unit_dir(
        "json-units",
        "smcrun-json-test.service",
        "[Service]\nExecStart=/bin/true\n",
    );
    let lines: &[&[&str]] = &[
        &["stats", "-j"],
        &["linkgroup", "-j"],
        &["link", "-j"],
        &["device", "-j"],
        &["info", "-j"],
        &["rdma", "-j"],
        &["ss", "-j"],
        &["ps", "-j"],
        &["why", "-j", "1"],
        &["doctor", "-j"],
        &["ueid", "show", "-j"],
        &["pnet", "show", "-j"],
        &["attach", "--list", "-j"],
        &["policy", "check", "-j", "--policy", "smc port 6379; tcp"],
        &["demo", "-j", "--connections", "1", "--bytes", "1k"],
        &["enable", "-j", "smcrun-json-test", "--mode", "inet"],
        &["disable", "-j", "smcrun-json-test"],
        &["disable", "-j", "smcrun-json-test"],
        // A usage error: the error object names the bad value.
        &["ss", "-j", "--no-such-flag"],
        &["stats", "-j", "bogus"],
    ];
    for args in lines {
        let (out, err, o) = with_units(&unit_path, args);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| {
            panic!("smcrun {args:?}: not one JSON document ({e}): {out:?} {err}")
        });
        assert!(
            out.starts_with("{\n  ") || out.starts_with("[\n  ") || out == "[]\n",
            "smcrun {args:?}: not pretty JSON: {out}"
        );
        let code = o.status.code().unwrap();
        if code != 0 && v.get("error").is_some() {
            let line = v["error"].as_str().unwrap();
            assert!(line.starts_with("smcrun"), "{args:?}: {v}");
            assert_eq!(v["exit_code"], code, "{args:?}: {v}");
            assert!(
                err.lines()
                    .any(|l| l == line || line.ends_with(l.trim_start_matches("error: "))),
                "{args:?}: stderr {err:?} has not {line:?}"
            );
        } else if code != 0 {
            // doctor: its table is the data, the exit status its verdict.
            assert_eq!(
                args[0], "doctor",
                "{args:?} failed without an error object: {out}{err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&units);
}
