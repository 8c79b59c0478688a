//! Real applications under smcrun on this machine: the demo, Python, and Redis with its benchmark.

mod common;
use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn demo_moves_data_intact_and_says_why_each_socket_ran_as_it_did() {
    let mut c = smcrun();
    c.args(["demo", "--json", "--connections", "3", "--bytes", "1m"]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}\n{out}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["data_intact"], true);
    // 1 MiB each way per connection; 3 MiB sent over all of them (and as much echoed back).
    assert_eq!(r["bytes_per_connection"], 1024 * 1024);
    assert_eq!(r["bytes_sent"], 3 * 1024 * 1024);
    let sockets = r["sockets"].as_array().unwrap();
    assert_eq!(sockets.len(), 6);
    if !kernel_has_af_smc() {
        assert_eq!(r["tcp"], 6);
        for s in sockets {
            assert_eq!(s["mode"], "TCP");
            assert!(
                s["why"]
                    .as_str()
                    .unwrap()
                    .contains("the kernel has no AF_SMC"),
                "{s}"
            );
        }
    } else {
        for s in sockets {
            assert_ne!(
                s["socket"], "TCP",
                "with SMC in the kernel every socket must be converted: {s}"
            );
        }
    }
    // One connection is "1 connection", never "1 connections".
    let mut c = smcrun();
    c.args(["demo", "--connections", "1", "--bytes", "1k"]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}\n{out}");
    assert!(
        out.starts_with("smcrun demo: 1 connection to an echo server"),
        "{out}"
    );
    assert!(out.contains("\nresult: 2 sockets: "), "{out}");
    // --require-smc turns "not SMC" into a failure, and only that.
    let mut c = smcrun();
    c.args([
        "demo",
        "--require-smc",
        "--json",
        "--connections",
        "1",
        "--bytes",
        "1k",
    ]);
    let (out, err, o) = run(c);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"));
    let all_smc = r["smc_r"].as_u64().unwrap() + r["smc_d"].as_u64().unwrap()
        == r["sockets"].as_array().unwrap().len() as u64;
    assert_eq!(r["data_intact"], true);
    assert_eq!(o.status.code(), Some(if all_smc { 0 } else { 1 }), "{out}");
    if !kernel_has_af_smc() {
        assert!(
            !all_smc,
            "no SMC in this kernel, yet the demo says SMC: {out}"
        );
    }
}

#[test]
fn python_sees_af_inet() {
    need("python3");

    let mut c = smcrun();
    c.args([
        "python3",
        "-c",
        "import socket; s=socket.socket(); print(s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN), s.family == socket.AF_INET)",
    ]);
    let (out, err, o) = run(c);
    assert!(o.status.success(), "{err}");
    assert_eq!(out.trim(), "2 True");
}

fn wait_for_port(port: u16, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn redis_server_and_benchmark_both_under_smcrun() {
    need("redis-server");
    need("redis-benchmark");

    let port = free_port().to_string();
    let mut server = smcrun()
        .args([
            "redis-server",
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server is needed for this test (.ci/run installs it)");
    let up = wait_for_port(port.parse().unwrap(), Duration::from_secs(20));
    let result = up.then(|| {
        let mut c = smcrun();
        c.arg("redis-benchmark").args(redis_benchmark_args(&port));
        run(c)
    });
    // Debian's redis-server is a symlink to redis-check-rdb: ps names it as it was started.
    let server_pid = server.id();
    let named = (0..50).find_map(|_| {
        let mut c = smcrun();
        c.args(["ps", "--json"]);
        let (out, _, _) = run(c);
        let list: serde_json::Value = serde_json::from_str(&out).ok()?;
        let e = list
            .as_array()?
            .iter()
            .find(|e| e["pid"] == server_pid && !e["report"].is_null())
            .cloned();
        if e.is_none() {
            std::thread::sleep(Duration::from_millis(100));
        }
        e
    });
    server.kill().ok();
    server.wait().ok();
    assert!(up, "redis-server under smcrun did not start listening");
    let (out, err, o) = result.unwrap();
    assert!(o.status.success(), "redis-benchmark failed: {err}\n{out}");
    let e = named.expect("smcrun ps lists the redis-server under smcrun");
    assert_eq!(e["program"], "redis-server", "{e}");
    assert!(e["exe"].as_str().unwrap().starts_with('/'), "{e}");
    assert!(out.contains("SET:") && out.contains("GET:"), "{out}");
    assert!(!out.to_lowercase().contains("error"), "{out}");
}
