// `java Echo.java server PORT` / `java Echo.java client PORT CONNECTIONS BYTES [HOST,...]`: a Java
// echo server and client on java.net sockets, which the JDK makes AF_INET6 (dual-stack) on a host
// with IPv6: the server listens on the wildcard address, the client connects to 127.0.0.1 (as
// ::ffff:127.0.0.1) and to ::1 (or to the HOSTs given), CONNECTIONS at once each way, each sending
// BYTES of a known pattern and checking the echo. The host tests run it from source (the JDK's
// source launcher); the VM's java check compiles it with javac.
import java.io.*;
import java.net.*;
import java.util.*;
import java.util.concurrent.*;

public class Echo {
    static byte[] pattern(int conn, int len) {
        byte[] b = new byte[len];
        for (int i = 0; i < len; i++) b[i] = (byte) (i * 17 + conn * 5 + i / 503);
        return b;
    }

    static void serve(int port) throws IOException {
        ServerSocket l = new ServerSocket();
        l.setReuseAddress(true);
        l.bind(new InetSocketAddress(port), 128);
        ExecutorService pool = Executors.newCachedThreadPool();
        while (true) {
            Socket s = l.accept();
            pool.submit(() -> {
                long n = -1;
                try (s) {
                    n = s.getInputStream().transferTo(s.getOutputStream());
                } catch (IOException e) {
                    System.err.println("from " + s.getRemoteSocketAddress() + ": " + e);
                }
                // what this side received and sent back (-1: it failed), so that a short echo
                // says which way the bytes went missing
                System.err.println("from " + s.getRemoteSocketAddress() + ": echoed " + n + " bytes");
                return null;
            });
        }
    }

    static boolean one(String host, int port, int conn, int len) throws Exception {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getByName(host), port), 30000);
            s.setSoTimeout(60000);
            byte[] data = pattern(conn, len);
            Thread w = new Thread(() -> {
                try {
                    s.getOutputStream().write(data);
                    s.shutdownOutput();
                } catch (IOException e) {
                    // seen as a short echo below; said, so that a failure can be told apart
                    System.err.println("connection " + conn + " to " + host + ": write failed: " + e);
                }
            });
            w.start();
            byte[] back = s.getInputStream().readAllBytes();
            w.join();
            if (!Arrays.equals(back, data)) {
                // where the echo first differs from what was sent: at back.length, the echo is a
                // clean prefix and only its tail is missing; before it, bytes were lost or changed
                // in the middle
                int at = Arrays.mismatch(back, data);
                System.err.println("connection " + conn + " to " + host + ": " + back.length + " of "
                        + len + " bytes echoed, the first difference at byte " + at);
                return false;
            }
            return true;
        }
    }

    public static void main(String[] a) throws Exception {
        if (a.length == 2 && a[0].equals("server")) {
            serve(Integer.parseInt(a[1]));
            return;
        }
        if (a.length < 4 || a.length > 5 || !a[0].equals("client")) {
            System.err.println("usage: java Echo.java server PORT | client PORT CONNECTIONS BYTES [HOST,...]");
            System.exit(2);
        }
        int port = Integer.parseInt(a[1]), n = Integer.parseInt(a[2]), len = Integer.parseInt(a[3]);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        boolean allGood = true;
        String[] hosts = a.length == 5 ? a[4].split(",") : new String[] {"127.0.0.1", "::1"};
        for (String host : hosts) {
            List<Future<Boolean>> fs = new ArrayList<>();
            for (int c = 0; c < n; c++) {
                final int conn = c;
                fs.add(pool.submit(() -> one(host, port, conn, len)));
            }
            int intact = 0;
            for (Future<Boolean> f : fs) if (f.get()) intact++;
            System.out.println(host + " connections=" + n + " intact=" + intact);
            allGood &= intact == n;
        }
        pool.shutdown();
        System.exit(allGood ? 0 : 1);
    }
}
