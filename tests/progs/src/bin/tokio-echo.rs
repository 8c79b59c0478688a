//! `tokio-echo serve ADDR` / `tokio-echo client ADDR CONNECTIONS BYTES`: an asynchronous echo
//! server and client on tokio (epoll, nonblocking connects and accepts, a multi-threaded runtime),
//! as Rust network services are written. The client runs its connections at once, each sending
//! BYTES of a known pattern and checking what comes back, and prints one line per result.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn usage() -> ! {
    eprintln!("usage: tokio-echo serve ADDR | client ADDR CONNECTIONS BYTES");
    std::process::exit(2)
}

fn addr(s: Option<&String>) -> SocketAddr {
    s.and_then(|s| s.parse().ok()).unwrap_or_else(|| usage())
}

async fn serve(at: SocketAddr) -> std::io::Result<()> {
    let l = TcpListener::bind(at).await?;
    println!("listening={}", l.local_addr()?);
    loop {
        let (mut s, _) = l.accept().await?;
        tokio::spawn(async move {
            let (mut r, mut w) = s.split();
            let _ = tokio::io::copy(&mut r, &mut w).await;
        });
    }
}

fn pattern(conn: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i * 13 + conn * 7 + i / 509) as u8)
        .collect()
}

async fn one(to: SocketAddr, conn: usize, len: usize) -> std::io::Result<bool> {
    let s = TcpStream::connect(to).await?;
    s.set_nodelay(true)?;
    let (mut r, mut w) = s.into_split();
    let data = pattern(conn, len);
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        w.write_all(&sent).await?;
        w.shutdown().await
    });
    let mut back = Vec::with_capacity(len);
    r.read_to_end(&mut back).await?;
    writer.await.map_err(std::io::Error::other)??;
    Ok(back == data)
}

async fn client(to: SocketAddr, n: usize, len: usize) {
    let tasks: Vec<_> = (0..n)
        .map(|c| {
            tokio::spawn(tokio::time::timeout(
                Duration::from_secs(60),
                one(to, c, len),
            ))
        })
        .collect();
    let (mut intact, mut failed) = (0, Vec::new());
    for t in tasks {
        match t.await {
            Ok(Ok(Ok(true))) => intact += 1,
            Ok(Ok(Ok(false))) => failed.push("corrupted".to_string()),
            Ok(Ok(Err(e))) => failed.push(e.kind().to_string()),
            Ok(Err(_)) => failed.push("timed out".into()),
            Err(e) => failed.push(e.to_string()),
        }
    }
    println!("connections={n} bytes_each={len} intact={intact}");
    if !failed.is_empty() {
        println!("failed={failed:?}");
        std::process::exit(1);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match args.first().map(String::as_str) {
        Some("serve") => {
            if let Err(e) = rt.block_on(serve(addr(args.get(1)))) {
                eprintln!("tokio-echo: {e}");
                std::process::exit(1);
            }
        }
        Some("client") => {
            let n = args
                .get(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| usage());
            let len = args
                .get(3)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| usage());
            rt.block_on(client(addr(args.get(1)), n, len));
        }
        _ => usage(),
    }
}
