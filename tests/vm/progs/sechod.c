// sechod: a TCP echo server and client that make their sockets with plain socket(2) calls, built
// statically (no dynamic loader, so LD_PRELOAD cannot reach it): BPF mode's test program.
//
//   sechod server ADDR PORT COUNT        accept COUNT connections (one child each), echo until EOF
//   sechod client ADDR PORT BYTES [HOLD] send BYTES in 16 KiB chunks, read each back, compare,
//                                        print "ok BYTES proto=P" (P: SO_PROTOCOL, 256 for SMC),
//                                        keep the connection HOLD seconds (HOLD "stdin": until
//                                        stdin ends; HOLD "again": until stdin ends, then
//                                        echo BYTES once more on the same connection and print
//                                        "again BYTES proto=P", P read anew), then close
//   sechod dial ADDR PORT BYTES          for each line on stdin, one client connection as above
//                                        (protocol IPPROTO_TCP instead of 0), one line each
// Exit status 0 when every byte came back as sent, 1 otherwise.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK 16384

static int addr_of(const char *a, const char *p, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)atoi(p));
	return inet_pton(AF_INET, a, &sa->sin_addr) == 1 ? 0 : -1;
}

static int full(int fd, char *b, size_t n, int writing)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = writing ? write(fd, b + done, n - done) : read(fd, b + done, n - done);
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static int echo(int c)
{
	char buf[CHUNK];
	ssize_t n;
	while ((n = read(c, buf, sizeof(buf))) > 0)
		if (full(c, buf, (size_t)n, 1))
			return 1;
	return n < 0;
}

static int server(struct sockaddr_in *sa, int count)
{
	int one = 1, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s, (struct sockaddr *)sa, sizeof(*sa)) || listen(s, 64)) {
		perror("sechod server");
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	for (int i = 0; i < count; i++) {
		int c = accept(s, NULL, NULL);
		if (c < 0) {
			perror("accept");
			return 1;
		}
		if (fork() == 0)
			_exit(echo(c));
		close(c);
	}
	int st, bad = 0;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	printf("served %d\n", count);
	return bad;
}

// BYTES through connection s and back, compared; 0 when all came back as sent.
static int round_trip(int s, long bytes, int proto)
{
	char out[CHUNK], in[CHUNK];
	for (long sent = 0; sent < bytes;) {
		size_t n = bytes - sent < CHUNK ? (size_t)(bytes - sent) : CHUNK;
		for (size_t i = 0; i < n; i++)
			out[i] = (char)((sent + (long)i) * 131 % 251);
		if (full(s, out, n, 1) || full(s, in, n, 0) || memcmp(out, in, n)) {
			printf("CORRUPT after %ld bytes proto=%d\n", sent, proto);
			return 1;
		}
		sent += (long)n;
	}
	return 0;
}

static int protocol_of(int s)
{
	int proto = -1;
	socklen_t len = sizeof(proto);
	getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &proto, &len);
	return proto;
}

// hold: seconds to keep the connection, -1 until stdin ends, -2 until stdin ends then once more.
static int client(struct sockaddr_in *sa, long bytes, int hold, int protocol)
{
	int proto, s = socket(AF_INET, SOCK_STREAM, protocol);
	if (s < 0 || connect(s, (struct sockaddr *)sa, sizeof(*sa))) {
		perror("sechod client");
		return 1;
	}
	proto = protocol_of(s);
	if (round_trip(s, bytes, proto))
		return 1;
	printf("ok %ld proto=%d\n", bytes, proto);
	fflush(stdout);
	if (hold > 0)
		sleep((unsigned)hold);
	if (hold < 0) {
		char b[256];
		while (read(0, b, sizeof(b)) > 0)
			;
	}
	if (hold == -2) {
		proto = protocol_of(s);
		if (round_trip(s, bytes, proto))
			return 1;
		printf("again %ld proto=%d\n", bytes, proto);
		fflush(stdout);
	}
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	if (argc < 5 || addr_of(argv[2], argv[3], &sa)) {
		fprintf(stderr, "usage: sechod server|client|dial ADDR PORT COUNT|BYTES [HOLD]\n");
		return 2;
	}
	if (!strcmp(argv[1], "server"))
		return server(&sa, atoi(argv[4]));
	if (!strcmp(argv[1], "client"))
		return client(&sa, atol(argv[4]),
			      argc > 5 ? (!strcmp(argv[5], "stdin")   ? -1
					  : !strcmp(argv[5], "again") ? -2
								      : atoi(argv[5]))
				       : 0,
			      0);
	if (!strcmp(argv[1], "dial")) {
		char line[64];
		int bad = 0;
		while (fgets(line, sizeof(line), stdin)) {
			bad |= client(&sa, atol(argv[4]), 0, IPPROTO_TCP);
			fflush(stdout);
		}
		return bad;
	}
	return 2;
}
