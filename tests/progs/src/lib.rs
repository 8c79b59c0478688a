//! Small real programs that the tests and the VM test bed run under smcrun, each printing what it
//! observed in `key=value` lines that the tests assert on.

/// Fills one loopback connection's send buffer (nonblocking writes until the kernel takes no more), shuts
/// the writing side down with those bytes unsent, then reads them all on the other end until its
/// end of file; prints `drained READ of WRITTEN`.
pub fn drain() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let mut w = std::net::TcpStream::connect(l.local_addr().expect("address")).expect("connect");
    let (mut r, _) = l.accept().expect("accept");
    w.set_nonblocking(true).expect("nonblocking");
    let chunk = [7u8; 65536];
    // Full once the kernel has taken nothing for 3 tries 50 ms apart: SMC moves the send buffer
    // into the peer's receive buffer in the background, so a first EAGAIN may leave nothing unsent.
    let (mut written, mut refused) = (0usize, 0);
    let start = Instant::now();
    while refused < 3 && start.elapsed() < Duration::from_secs(10) {
        match w.write(&chunk) {
            Ok(n) => (written, refused) = (written + n, 0),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("write: {e}"),
        }
    }
    w.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut read = 0usize;
    let mut buf = vec![0u8; 65536];
    loop {
        match r.read(&mut buf).expect("read") {
            0 => break,
            n => read += n,
        }
    }
    println!("drained {read} of {written}");
}
