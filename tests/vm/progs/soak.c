// soak: an integrity soak for stream sockets. Every byte of every transfer is checked against a
// pattern of the transfer and the offset; each transfer has a deadline, so a hang is a failure.
//
//   soak server FAMILY ADDR PORT
//   soak client FAMILY ADDR PORT [-s SEED] [-n TRANSFERS] [-w WORKERS] [-m MAXBYTES]
//                               [-b [CASE:]BYTES,...] [-c CASE,...] [-d SECONDS] [-r BYTES/S]
//                               [-l SECONDS] [-v]
//
// FAMILY: `smc` (a native AF_SMC socket, AF_SMC=43 with protocol SMCPROTO_SMC and an AF_INET
// address: SMC with no shim) or `inet` (a plain AF_INET socket, which `smcrun` or `smcrun --bpf`
// makes SMC). ADDR is an IPv4 address.
//
// The client runs TRANSFERS transfers (default 200), one connection each, spread over WORKERS
// forked processes (default 4, each one transfer at a time, like the Java echo's 4 connections):
// transfer i goes to worker i % WORKERS. The first transfers are the big ones of -b (a case may be
// named, else it rotates like the others); the sizes of the rest are log-uniform in 1..MAXBYTES
// (default 1 MiB) from a PRNG seeded with SEED and i (default 1), so that a run is reproducible. The
// cases (-c picks some; by default all four, in turn by i):
//
//   echo    the client writes BYTES, shutdown(SHUT_WR), reads the echo to EOF (the Java echo);
//           the server also checks what it read and says when its EOF came early
//   down    the server writes BYTES and closes; the client reads to EOF and must get every byte
//   sink    the client writes BYTES; the server reads exactly BYTES, checks them and answers with
//           an ack (status, count), then closes; the client reads the ack, then EOF
//   unread  the client writes BYTES; the server reads BYTES/2, acks and closes with the rest
//           unread; the client must see EOF or an error (never a hang, never a wrong byte)
//   late    (only with -c or -b) the server writes BYTES and closes at once; the client waits
//           SLOW_S seconds before it reads, then reads to EOF and must get every byte. Linux's SMC
//           waits at most 2 s in close() too for its send buffer to drain
//   slow    (only with -c or -b) the client writes BYTES and shutdown(SHUT_WR); the server waits
//           SLOW_S seconds before it reads, then reads to EOF, checks, acks the count and closes;
//           the client reads the ack (every byte must have arrived), then EOF. Linux's SMC waits
//           at most 2 s in shutdown(SHUT_WR) for its send buffer to drain (see tests/vm/README.md)
//
// Deadline of a transfer: -d SECONDS (default 60) + its bytes (both ways) / -r BYTES/S (default
// 65536). A transfer fails on any wrong byte, a short or long stream, an error (but in `unread`'s
// reading and writing), or a missed deadline; each failure is one line
//   soak: FAIL id=I case=C size=N sent=S got=G after=T s: WHAT
// and the client ends with one summary line
//   soak: family=F seed=S workers=W transfers=N bytes=B verified=V seconds=T failures=K (echo f/n ... slow f/n late f/n)
// (bytes: the transfers' sizes added up, the same for any mover with the same options; verified:
// the bytes the client checked, and those the server acked as right). With -v each transfer also prints `soak: ok ...`.
// -l SECONDS sets SO_LINGER (on, SECONDS) on the client's sockets: SMC's shutdown(SHUT_WR) and
// close() then wait that long, not 2 s, for the send buffer to drain.
// SOAK_CLOSE=dup2 or SOAK_CLOSE=close_range (server): each connection is closed by dup2(2)ing
// /dev/null over its descriptor, or by close_range(2) over it alone, instead of close(2): the
// other calls that close a socket, which the shim's close preparation must cover too.
// SOAK_CLOSE=exit or SOAK_CLOSE=_exit (server): the first connection's thread ends the whole
// server with exit(3) or _exit(2) instead of closing: the kernel closes the socket of an exiting
// process without waiting for its send buffer at all.
// The server prints "listening" when it accepts, serves each connection in a thread until it is
// killed, and writes `soak server: FAIL ...` lines to stderr for what it saw go wrong.
// Exit status: 0 every transfer intact, 1 a failure, 2 bad usage.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC 0

#define CHUNK (256 * 1024)
#define MAX_WORKERS 64
#define MAX_BIG 64
#define HDR_MAGIC 0x4b414f53u /* "SOAK" */
#define ACK_MAGIC 0x4b434153u /* "SACK" */

enum kase { ECHO, DOWN, SINK, UNREAD, SLOW, LATE, NCASES };
static const char *const case_name[NCASES] = {"echo", "down", "sink", "unread", "slow", "late"};
#define DEFAULT_CASES 4 // all but slow and late
#define SLOW_S 3	// the slow (late) reader's wait: longer than SMC's 2 s in shutdown(SHUT_WR) and close()

// What the client sends first on every connection.
struct hdr {
	uint32_t magic, kase, deadline_s, pad;
	uint64_t id, size, key;
};
// The server's answer in `sink` and `unread`: status 0 and the bytes it read and found right, or
// status 1 and the offset of the first wrong byte.
struct ack {
	uint32_t magic, status;
	uint64_t count;
};

static int family_smc; // 1: AF_SMC, 0: AF_INET
static struct sockaddr_in addr;

// ------------------------------------------------------------------ the pattern
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}
// fill: the n bytes of transfer KEY's stream from offset OFF (byte o is byte o%8 of mix(key^o/8))
static void fill(uint64_t key, uint64_t off, unsigned char *b, size_t n)
{
	while (n > 0) {
		uint64_t w = mix(key ^ (off >> 3));
		unsigned s = (unsigned)(off & 7);
		if (s == 0 && n >= 8) {
			memcpy(b, &w, 8); // little-endian: byte k of the word is (w >> 8k)
			b += 8, off += 8, n -= 8;
			continue;
		}
		*b++ = (unsigned char)(w >> (8 * s));
		off++, n--;
	}
}
// check: the offset (relative to OFF) of the first byte of B that is not KEY's stream, or -1
static long check(uint64_t key, uint64_t off, const unsigned char *b, size_t n, unsigned char *scratch)
{
	fill(key, off, scratch, n);
	if (memcmp(scratch, b, n) == 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (scratch[i] != b[i])
			return (long)i;
	return -1;
}

// ------------------------------------------------------------------ time and I/O
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}
// wait_fd: poll FD for EVENTS until DEADLINE; the revents, 0 at the deadline, -1 on a poll error
static int wait_fd(int fd, short events, double deadline)
{
	for (;;) {
		double left = deadline - now();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
		if (r > 0)
			return p.revents;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}
// io_full: read (WRITING 0) or write exactly N bytes on a nonblocking FD before DEADLINE;
// 0, or -1 with errno (ETIMEDOUT at the deadline, 0 for an EOF)
static int io_full(int fd, void *b, size_t n, int writing, double deadline)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = writing ? send(fd, (char *)b + done, n - done, MSG_NOSIGNAL)
				    : read(fd, (char *)b + done, n - done);
		if (r > 0) {
			done += (size_t)r;
			continue;
		}
		if (r == 0) {
			errno = 0;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		int ev = wait_fd(fd, writing ? POLLOUT : POLLIN, deadline);
		if (ev == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (ev < 0)
			return -1;
	}
	return 0;
}
static int nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}
static int new_socket(void)
{
	return family_smc ? socket(AF_SMC, SOCK_STREAM | SOCK_CLOEXEC, SMCPROTO_SMC)
			  : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}
static double deadline_of(uint32_t base_s, uint64_t bytes, uint64_t rate)
{
	return (double)base_s + (double)bytes / (double)rate;
}

// say: ends LINE (a FAIL line of SAY_MAX bytes, its first N already written) with FMT's text, cut
// to fit, and a newline, and writes it to FD in one write(2), so that the lines of the server's
// threads and of the client's workers do not interleave
#define SAY_MAX 400
static void say(int fd, char *line, int n, const char *fmt, va_list ap)
{
	n += vsnprintf(line + n, SAY_MAX - (size_t)n - 1, fmt, ap);
	if (n > SAY_MAX - 2)
		n = SAY_MAX - 2;
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) < 0) {
		// nothing else to tell it to: the client's exit status still tells
	}
}

// ------------------------------------------------------------------ server
static void serr(const struct hdr *h, const char *fmt, ...)
{
	char line[SAY_MAX];
	int n = snprintf(line, sizeof(line), "soak server: FAIL id=%llu case=%s size=%llu: ",
			 (unsigned long long)h->id, h->kase < NCASES ? case_name[h->kase] : "?",
			 (unsigned long long)h->size);
	va_list ap;
	va_start(ap, fmt);
	say(2, line, n, fmt, ap);
	va_end(ap);
}
// serve_read: read and check N bytes of H's stream (from offset 0) before DEADLINE, or until EOF
// when TO_EOF; the count read; *bad the first wrong offset or -1; *err errno of the failure
static uint64_t serve_read(int fd, const struct hdr *h, uint64_t n, int to_eof, int echo, double deadline,
			   long long *bad, int *err, unsigned char *buf, unsigned char *scratch)
{
	uint64_t got = 0;
	*bad = -1, *err = 0;
	while (to_eof || got < n) {
		size_t want = CHUNK;
		if (!to_eof && n - got < want)
			want = (size_t)(n - got);
		ssize_t r = read(fd, buf, want);
		if (r == 0)
			return got;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				int ev = wait_fd(fd, POLLIN, deadline);
				if (ev == 0) {
					*err = ETIMEDOUT;
					return got;
				}
				if (ev < 0) {
					*err = errno;
					return got;
				}
				continue;
			}
			*err = errno;
			return got;
		}
		if (*bad < 0 && got + (uint64_t)r <= h->size) {
			long at = check(h->key, got, buf, (size_t)r, scratch);
			if (at >= 0)
				*bad = (long long)(got + (uint64_t)at);
		} else if (*bad < 0) {
			*bad = (long long)h->size; // more than the client said it sends
		}
		if (echo && io_full(fd, buf, (size_t)r, 1, deadline)) {
			*err = errno ? errno : EPIPE;
			return got + (uint64_t)r;
		}
		got += (uint64_t)r;
	}
	return got;
}
// How the server closes a connection: close(2), or the call SOAK_CLOSE names (see the top).
static const char *close_how;
static void close_conn(int fd)
{
	if (close_how && !strcmp(close_how, "dup2")) {
		int z = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (z < 0 || dup2(z, fd) < 0)
			fprintf(stderr, "soak server: dup2 over fd %d: %s\n", fd, strerror(errno));
		if (z >= 0)
			close(z);
	} else if (close_how && !strcmp(close_how, "exit")) {
		exit(0);
	} else if (close_how && !strcmp(close_how, "_exit")) {
		_exit(0);
	} else if (close_how && !strcmp(close_how, "close_range")) {
		if (close_range((unsigned)fd, (unsigned)fd, 0) == 0)
			return;
		fprintf(stderr, "soak server: close_range of fd %d: %s\n", fd, strerror(errno));
	}
	close(fd);
}
// send_ack: answers a `sink`, `unread` or `slow` client with what serve_read found: status 0 and GOT
// (the bytes read, all right), or status 1 and BAD (the first wrong offset), which serr also says
static void send_ack(int fd, const struct hdr *h, long long bad, uint64_t got, double deadline)
{
	struct ack a = {.magic = ACK_MAGIC, .status = bad >= 0, .count = bad >= 0 ? (uint64_t)bad : got};
	if (bad >= 0)
		serr(h, "byte %lld came in wrong", bad);
	if (io_full(fd, &a, sizeof(a), 1, deadline))
		serr(h, "writing the ack: %s", strerror(errno ? errno : EPIPE));
}
static void serve_one(int fd)
{
	struct hdr h;
	unsigned char *buf = malloc(CHUNK), *scratch = malloc(CHUNK);
	if (!buf || !scratch || nonblocking(fd))
		goto out;
	memset(&h, 0, sizeof(h));
	if (io_full(fd, &h, sizeof(h), 0, now() + 60)) {
		serr(&h, "reading the header: %s", errno ? strerror(errno) : "EOF");
		goto out;
	}
	if (h.magic != HDR_MAGIC || h.kase >= NCASES) {
		serr(&h, "bad header (magic %08x, case %u)", h.magic, h.kase);
		goto out;
	}
	double deadline = now() + h.deadline_s;
	long long bad;
	int err;
	uint64_t got;
	switch (h.kase) {
	case ECHO:
		got = serve_read(fd, &h, 0, 1, 1, deadline, &bad, &err, buf, scratch);
		if (bad >= 0)
			serr(&h, "byte %lld came in wrong", bad);
		if (err)
			serr(&h, "after %llu bytes in: %s", (unsigned long long)got, strerror(err));
		else if (got != h.size)
			serr(&h, "EOF after %llu of %llu bytes in", (unsigned long long)got,
			     (unsigned long long)h.size);
		break;
	case DOWN:
	case LATE:
		for (uint64_t off = 0; off < h.size;) {
			size_t n = h.size - off < CHUNK ? (size_t)(h.size - off) : CHUNK;
			fill(h.key, off, buf, n);
			if (io_full(fd, buf, n, 1, deadline)) {
				serr(&h, "writing after %llu bytes out: %s", (unsigned long long)off,
				     strerror(errno ? errno : EPIPE));
				break;
			}
			off += n;
		}
		break;
	case SINK:
	case UNREAD: {
		uint64_t want = h.kase == SINK ? h.size : h.size / 2;
		got = serve_read(fd, &h, want, 0, 0, deadline, &bad, &err, buf, scratch);
		if (err || got != want) {
			serr(&h, "%s after %llu of %llu bytes in", err ? strerror(err) : "EOF",
			     (unsigned long long)got, (unsigned long long)want);
			break;
		}
		send_ack(fd, &h, bad, got, deadline);
		break;
	}
	case SLOW:
		sleep(SLOW_S);
		got = serve_read(fd, &h, 0, 1, 0, deadline, &bad, &err, buf, scratch);
		if (err) {
			serr(&h, "%s after %llu bytes in", strerror(err), (unsigned long long)got);
			break;
		}
		if (got != h.size)
			serr(&h, "EOF after %llu of %llu bytes in", (unsigned long long)got, (unsigned long long)h.size);
		send_ack(fd, &h, bad, got, deadline);
		break;
	}
out:
	free(buf);
	free(scratch);
	close_conn(fd);
}
static void *serve_thread(void *p)
{
	serve_one((int)(intptr_t)p);
	return NULL;
}
static int server(void)
{
	close_how = getenv("SOAK_CLOSE");
	if (close_how && strcmp(close_how, "dup2") && strcmp(close_how, "close_range") &&
	    strcmp(close_how, "exit") && strcmp(close_how, "_exit")) {
		fprintf(stderr, "soak server: SOAK_CLOSE=%s: expected dup2, close_range, exit or _exit\n",
			close_how);
		return 2;
	}
	int one = 1, s = new_socket();
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s, (struct sockaddr *)&addr, sizeof(addr)) || listen(s, 128)) {
		perror("soak server");
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (;;) {
		int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("soak server: accept");
			return 1;
		}
		pthread_t t;
		if (pthread_create(&t, &at, serve_thread, (void *)(intptr_t)c)) {
			fprintf(stderr, "soak server: pthread_create failed\n");
			close(c);
		}
	}
}

// ------------------------------------------------------------------ client
struct opts {
	uint64_t seed, transfers, max, rate;
	unsigned workers, deadline_s, verbose, linger_s;
	unsigned ncases, cases[NCASES];
	unsigned nbig;
	uint64_t big[MAX_BIG];
	int big_case[MAX_BIG]; // -1: rotates
};
// What a worker counts, per case (in shared memory: the parent adds them up).
struct tally {
	uint64_t transfers[NCASES], failures[NCASES], bytes, verified;
};
struct xfer {
	uint64_t id, size, key, sent, got;
	enum kase kase;
	double t0, deadline;
};

static void plan(const struct opts *o, uint64_t id, struct xfer *x)
{
	uint64_t r = mix(o->seed ^ mix(id));
	memset(x, 0, sizeof(*x));
	x->id = id;
	x->kase = (enum kase)o->cases[id % o->ncases];
	if (id < o->nbig) {
		x->size = o->big[id];
		if (o->big_case[id] >= 0)
			x->kase = (enum kase)o->big_case[id];
	} else {
		// log-uniform: a power of two 2^b (b uniform in 0..floor(log2 max)), then uniform in [2^b, 2^(b+1))
		unsigned nb = 0;
		while ((o->max >> (nb + 1)) != 0)
			nb++;
		unsigned b = (unsigned)(r % (nb + 1));
		uint64_t lo = 1ull << b, hi = (lo << 1) - 1;
		if (hi > o->max)
			hi = o->max;
		x->size = lo + mix(r) % (hi - lo + 1);
	}
	x->key = mix(o->seed * 0x100000001b3ull ^ mix(id ^ ((uint64_t)x->kase << 56)));
}

static int xfail(const struct xfer *x, const char *fmt, ...)
{
	char line[SAY_MAX];
	int n = snprintf(line, sizeof(line), "soak: FAIL id=%llu case=%s size=%llu sent=%llu got=%llu after=%.1fs: ",
			 (unsigned long long)x->id, case_name[x->kase], (unsigned long long)x->size,
			 (unsigned long long)x->sent, (unsigned long long)x->got, now() - x->t0);
	va_list ap;
	va_start(ap, fmt);
	say(1, line, n, fmt, ap);
	va_end(ap);
	return 1;
}
static void on_alarm(int sig)
{
	(void)sig; // only interrupts a blocking connect
}
static int transient(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

// one transfer on a new connection: 0 intact, 1 failed (said)
static int transfer(const struct opts *o, struct xfer *x, unsigned char *out, unsigned char *in,
		    unsigned char *scratch, uint64_t *verified)
{
	int fd = new_socket();
	x->t0 = now();
	uint64_t both = x->kase == ECHO ? 2 * x->size : x->size;
	x->deadline = x->t0 + deadline_of(o->deadline_s, both, o->rate) + (x->kase == SLOW || x->kase == LATE ? SLOW_S : 0);
	if (fd < 0)
		return xfail(x, "socket: %s", strerror(errno));
	struct linger lg = {.l_onoff = 1, .l_linger = (int)o->linger_s};
	if (o->linger_s && setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg))) {
		close(fd);
		return xfail(x, "SO_LINGER: %s", strerror(errno));
	}
	// a blocking connect under an alarm (its deadline), then nonblocking I/O under poll
	struct itimerval it = {.it_value = {.tv_sec = (time_t)(x->deadline - x->t0) + 1}};
	setitimer(ITIMER_REAL, &it, NULL);
	int rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	int cerr = errno;
	struct itimerval off = {0};
	setitimer(ITIMER_REAL, &off, NULL);
	if (rc) {
		close(fd);
		return xfail(x, "connect: %s", cerr == EINTR ? "no answer before the deadline (hang)" : strerror(cerr));
	}
	if (nonblocking(fd)) {
		close(fd);
		return xfail(x, "fcntl O_NONBLOCK: %s", strerror(errno));
	}
	struct hdr h = {.magic = HDR_MAGIC,
			.kase = x->kase,
			.deadline_s = (uint32_t)(x->deadline - x->t0) + 1,
			.id = x->id,
			.size = x->size,
			.key = x->key};
	uint64_t to_send = x->kase == DOWN || x->kase == LATE ? 0 : x->size;
	// what comes back: the stream (echo, down) or the ack (sink, unread)
	struct ack want_ack = {.magic = ACK_MAGIC, .status = 0, .count = x->kase == UNREAD ? x->size / 2 : x->size};
	int stream_back = x->kase == ECHO || x->kase == DOWN || x->kase == LATE;
	uint64_t expect = stream_back ? x->size : sizeof(struct ack);
	size_t hdr_sent = 0;
	int writing = 1, eof = 0, res = 0;
	unsigned char ackbuf[sizeof(struct ack)];
	size_t out_len = 0, out_pos = 0; // the chunk being written: out[out_pos..out_len)

	while (!eof) {
		short ev = POLLIN | (writing ? POLLOUT : 0);
		int re = wait_fd(fd, ev, x->deadline);
		if (re == 0) {
			res = xfail(x, "hang: no end before the deadline (%.0f s; %s)", x->deadline - x->t0,
				    writing ? "still writing" : "waiting for the rest and EOF");
			break;
		}
		if (re < 0) {
			res = xfail(x, "poll: %s", strerror(errno));
			break;
		}
		if (writing && (re & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w;
			if (hdr_sent < sizeof(h)) {
				w = send(fd, (char *)&h + hdr_sent, sizeof(h) - hdr_sent, MSG_NOSIGNAL);
				if (w > 0)
					hdr_sent += (size_t)w;
			} else if (x->sent < to_send) {
				if (out_pos == out_len) {
					out_len = to_send - x->sent < CHUNK ? (size_t)(to_send - x->sent) : CHUNK;
					out_pos = 0;
					fill(x->key, x->sent, out, out_len);
				}
				w = send(fd, out + out_pos, out_len - out_pos, MSG_NOSIGNAL);
				if (w > 0)
					out_pos += (size_t)w, x->sent += (uint64_t)w;
			} else {
				w = 0;
			}
			if (w < 0 && !transient(errno)) {
				if (x->kase == UNREAD) {
					writing = 0; // the server may close before it read everything: allowed
				} else {
					res = xfail(x, "write: %s", strerror(errno));
					break;
				}
			}
			if (writing && hdr_sent == sizeof(h) && x->sent == to_send) {
				writing = 0;
				// echo, unread and slow end their stream; sink waits for the ack with the socket open
				if (x->kase == LATE)
					sleep(SLOW_S); // the server wrote it all and closed: read late
				if (x->kase != SINK && x->kase != DOWN && x->kase != LATE && shutdown(fd, SHUT_WR) &&
				    x->kase != UNREAD) {
					res = xfail(x, "shutdown(SHUT_WR): %s", strerror(errno));
					break;
				}
			}
		}
		if (!(re & (POLLIN | POLLERR | POLLHUP)))
			continue;
		ssize_t r = read(fd, in, CHUNK);
		if (r < 0) {
			if (transient(errno))
				continue;
			if (x->kase == UNREAD)
				break; // an error is one of the two allowed ends
			res = xfail(x, "read: %s", strerror(errno));
			break;
		}
		if (r == 0) {
			eof = 1;
			if (x->kase == UNREAD)
				break; // EOF after none, a part or all of the ack: allowed (its bytes were right)
			if (x->got < expect)
				res = xfail(x, "clean EOF after %llu of %llu bytes (short)", (unsigned long long)x->got,
					    (unsigned long long)expect);
			break;
		}
		if (x->got + (uint64_t)r > expect) {
			res = xfail(x, "%llu bytes more than expected (%llu)",
				    (unsigned long long)(x->got + (uint64_t)r - expect), (unsigned long long)expect);
			break;
		}
		if (stream_back) {
			long at = check(x->key, x->got, in, (size_t)r, scratch);
			if (at >= 0) {
				res = xfail(x, "byte %llu is 0x%02x, expected 0x%02x (wrong bytes)",
					    (unsigned long long)(x->got + (uint64_t)at), in[at], scratch[at]);
				break;
			}
			*verified += (uint64_t)r;
		} else {
			memcpy(ackbuf + x->got, in, (size_t)r);
			if (memcmp(ackbuf, &want_ack, x->got + (uint64_t)r)) {
				struct ack a;
				memcpy(&a, ackbuf, sizeof(a));
				if (x->got + (uint64_t)r == sizeof(a) && a.magic == ACK_MAGIC && a.status)
					res = xfail(x, "the server found byte %llu wrong", (unsigned long long)a.count);
				else if (x->got + (uint64_t)r == sizeof(a) && a.magic == ACK_MAGIC)
					res = xfail(x, "the server acked %llu bytes, expected %llu",
						    (unsigned long long)a.count, (unsigned long long)want_ack.count);
				else
					res = xfail(x, "the ack's bytes are wrong");
				break;
			}
			if (x->got + (uint64_t)r == sizeof(struct ack))
				*verified += want_ack.count;
		}
		x->got += (uint64_t)r;
	}
	close(fd);
	if (!res && o->verbose)
		printf("soak: ok id=%llu case=%s size=%llu sent=%llu got=%llu seconds=%.2f\n",
		       (unsigned long long)x->id, case_name[x->kase], (unsigned long long)x->size,
		       (unsigned long long)x->sent, (unsigned long long)x->got, now() - x->t0);
	return res;
}

static int worker(const struct opts *o, unsigned w, struct tally *t)
{
	unsigned char *out = malloc(CHUNK), *in = malloc(CHUNK), *scratch = malloc(CHUNK);
	if (!out || !in || !scratch)
		return 1;
	struct sigaction sa = {.sa_handler = on_alarm}; // no SA_RESTART: the alarm ends a hung connect
	sigaction(SIGALRM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (uint64_t id = w; id < o->transfers; id += o->workers) {
		struct xfer x;
		plan(o, id, &x);
		t->transfers[x.kase]++;
		t->bytes += x.size;
		t->failures[x.kase] += (uint64_t)transfer(o, &x, out, in, scratch, &t->verified);
	}
	return 0;
}

static int usage(const char *fmt, const char *bad)
{
	fprintf(stderr, "soak: ");
	fprintf(stderr, fmt, bad);
	fprintf(stderr, "\nusage: soak server smc|inet ADDR PORT | soak client smc|inet ADDR PORT [-s SEED] [-n TRANSFERS] "
			"[-w WORKERS] [-m MAXBYTES] [-b [CASE:]BYTES,...] [-c CASE,...] [-d SECONDS] [-r BYTES/S] [-l SECONDS] [-v]\n");
	return 2;
}
// number: a decimal count, with an optional k/m/g (KiB, MiB, GiB) suffix; 0 if it is not one
static int number(const char *s, uint64_t min, uint64_t *v)
{
	char *end;
	if (!*s || *s == '-')
		return 0;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	unsigned sh = 0;
	if (*end == 'k' || *end == 'K')
		sh = 10, end++;
	else if (*end == 'm' || *end == 'M')
		sh = 20, end++;
	else if (*end == 'g' || *end == 'G')
		sh = 30, end++;
	if (*end || n > (UINT64_MAX >> sh) || (n << sh) < min)
		return 0;
	*v = (uint64_t)n << sh;
	return 1;
}
static int case_of(const char *s, size_t n)
{
	for (int k = 0; k < NCASES; k++)
		if (strlen(case_name[k]) == n && !strncmp(s, case_name[k], n))
			return k;
	return -1;
}

static int client(int argc, char **argv)
{
	struct opts o = {.seed = 1, .transfers = 200, .max = 1 << 20, .rate = 65536, .workers = 4, .deadline_s = 60,
			 .ncases = DEFAULT_CASES, .cases = {ECHO, DOWN, SINK, UNREAD}};
	int opt;
	uint64_t v;
	opterr = 0; // usage() says what is wrong, in one line
	while ((opt = getopt(argc, argv, "s:n:w:m:b:c:d:r:l:v")) != -1) {
		switch (opt) {
		case 's':
			if (!number(optarg, 0, &o.seed))
				return usage("-s %s: expected a seed (a number)", optarg);
			break;
		case 'n':
			if (!number(optarg, 1, &o.transfers))
				return usage("-n %s: expected a number of transfers >= 1", optarg);
			break;
		case 'w':
			if (!number(optarg, 1, &v) || v > MAX_WORKERS)
				return usage("-w %s: expected 1 to 64 workers", optarg);
			o.workers = (unsigned)v;
			break;
		case 'm':
			if (!number(optarg, 1, &o.max) || o.max > (1ull << 40))
				return usage("-m %s: expected a largest size from 1 to 1T bytes (k, m, g allowed)", optarg);
			break;
		case 'r':
			if (!number(optarg, 1, &o.rate))
				return usage("-r %s: expected a rate >= 1 byte/s (k, m, g allowed)", optarg);
			break;
		case 'd':
			if (!number(optarg, 1, &v) || v > 86400)
				return usage("-d %s: expected 1 to 86400 seconds", optarg);
			o.deadline_s = (unsigned)v;
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'l':
			if (!number(optarg, 1, &v) || v > 3600)
				return usage("-l %s: expected a linger time of 1 to 3600 seconds", optarg);
			o.linger_s = (unsigned)v;
			break;
		case 'c': {
			o.ncases = 0;
			for (char *p = optarg; *p;) {
				size_t n = strcspn(p, ",");
				int k = case_of(p, n);
				if (k < 0 || o.ncases == NCASES)
					return usage("-c %s: expected cases from echo, down, sink, unread, slow, late, comma-separated", optarg);
				o.cases[o.ncases++] = (unsigned)k;
				p += n + (p[n] == ',');
			}
			if (!o.ncases)
				return usage("-c %s: expected at least one case", optarg);
			break;
		}
		case 'b':
			o.nbig = 0;
			for (char *p = optarg; *p;) {
				size_t n = strcspn(p, ","), cn = strcspn(p, ":,");
				char num[32];
				int k = -1;
				if (cn < n) {
					k = case_of(p, cn);
					if (k < 0)
						return usage("-b %s: expected [CASE:]BYTES,... with CASE echo, down, sink, unread, slow or late", optarg);
				}
				const char *ns = cn < n ? p + cn + 1 : p;
				size_t nl = (size_t)(p + n - ns);
				if (o.nbig == MAX_BIG || nl == 0 || nl >= sizeof(num))
					return usage("-b %s: expected 1 to 64 sizes [CASE:]BYTES, comma-separated", optarg);
				memcpy(num, ns, nl);
				num[nl] = 0;
				if (!number(num, 1, &o.big[o.nbig]))
					return usage("-b %s: expected sizes >= 1 (k, m, g allowed)", optarg);
				o.big_case[o.nbig++] = k;
				p += n + (p[n] == ',');
			}
			break;
		default:
			return usage("%s: unknown option or missing value", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return usage("%s: unexpected argument", argv[optind]);
	if (o.nbig > o.transfers)
		return usage("-b %s: more big transfers than -n transfers", "");

	struct tally *t = mmap(NULL, sizeof(struct tally) * o.workers, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED) {
		perror("soak: mmap");
		return 1;
	}
	memset(t, 0, sizeof(struct tally) * o.workers);
	fflush(stdout);
	double t0 = now();
	pid_t pids[MAX_WORKERS];
	for (unsigned w = 0; w < o.workers; w++) {
		pids[w] = fork();
		if (pids[w] < 0) {
			perror("soak: fork");
			return 1;
		}
		if (pids[w] == 0)
			_exit(worker(&o, w, &t[w]));
	}
	int broken = 0;
	for (unsigned w = 0; w < o.workers; w++) {
		int st;
		if (waitpid(pids[w], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("soak: FAIL worker %u ended abnormally (status 0x%x)\n", w, st);
			broken++;
		}
	}
	struct tally sum = {0};
	for (unsigned w = 0; w < o.workers; w++) {
		for (int k = 0; k < NCASES; k++)
			sum.transfers[k] += t[w].transfers[k], sum.failures[k] += t[w].failures[k];
		sum.bytes += t[w].bytes, sum.verified += t[w].verified;
	}
	uint64_t n = 0, f = (uint64_t)broken;
	for (int k = 0; k < NCASES; k++)
		n += sum.transfers[k], f += sum.failures[k];
	printf("soak: family=%s seed=%llu workers=%u transfers=%llu bytes=%llu verified=%llu seconds=%.1f failures=%llu "
	       "(echo %llu/%llu down %llu/%llu sink %llu/%llu unread %llu/%llu slow %llu/%llu late %llu/%llu)\n",
	       family_smc ? "smc" : "inet", (unsigned long long)o.seed, o.workers, (unsigned long long)n,
	       (unsigned long long)sum.bytes, (unsigned long long)sum.verified, now() - t0, (unsigned long long)f,
	       (unsigned long long)sum.failures[ECHO], (unsigned long long)sum.transfers[ECHO],
	       (unsigned long long)sum.failures[DOWN], (unsigned long long)sum.transfers[DOWN],
	       (unsigned long long)sum.failures[SINK], (unsigned long long)sum.transfers[SINK],
	       (unsigned long long)sum.failures[UNREAD], (unsigned long long)sum.transfers[UNREAD],
	       (unsigned long long)sum.failures[SLOW], (unsigned long long)sum.transfers[SLOW],
	       (unsigned long long)sum.failures[LATE], (unsigned long long)sum.transfers[LATE]);
	return f ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 5)
		return usage("expected a role, a family, an address and a port%s", "");
	if (!strcmp(argv[2], "smc"))
		family_smc = 1;
	else if (strcmp(argv[2], "inet"))
		return usage("%s: expected the family smc (AF_SMC) or inet (AF_INET)", argv[2]);
	uint64_t port;
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[3], &addr.sin_addr) != 1)
		return usage("%s: expected an IPv4 address", argv[3]);
	if (!number(argv[4], 1, &port) || port > 65535)
		return usage("%s: expected a port from 1 to 65535", argv[4]);
	addr.sin_port = htons((uint16_t)port);
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "server"))
		return argc == 5 ? server() : usage("%s: the server takes no options", argv[5]);
	if (!strcmp(argv[1], "client")) {
		optind = 5;
		return client(argc, argv);
	}
	return usage("%s: expected the role server or client", argv[1]);
}
