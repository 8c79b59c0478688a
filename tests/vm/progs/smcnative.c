// smcnative: an echo server and client on native AF_SMC sockets (no smcrun, no preload): a program
// written for SMC, which only the kernel's handshake policy (smcrun handshake) can keep on TCP.
//
//   smcnative server PORT                 listen on 127.0.0.1:PORT, echo each connection until EOF
//                                         (one child each)
//   smcnative client PORT BYTES HOLD      connect to 127.0.0.1:PORT, send BYTES, read them back,
//                                         compare, print "ok BYTES", keep the connection HOLD
//                                         seconds, then close
// Exit status 0 when every byte came back as sent, 1 otherwise (2: bad usage).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define AF_SMC_NATIVE 43 // AF_SMC (include/linux/socket.h); protocol 0 is SMCPROTO_SMC (IPv4)
#define CHUNK 16384

static struct sockaddr_in loopback(const char *port)
{
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(port));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sa;
}

static int smc_socket(void)
{
	int fd = socket(AF_SMC_NATIVE, SOCK_STREAM, 0);

	if (fd < 0)
		perror("socket(AF_SMC)");
	return fd;
}

static int serve(const char *port)
{
	struct sockaddr_in sa = loopback(port);
	int one = 1, fd = smc_socket();

	if (fd < 0)
		return 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 16)) {
		perror("bind/listen");
		return 1;
	}
	signal(SIGCHLD, SIG_IGN);
	for (;;) {
		char buf[CHUNK];
		ssize_t n;
		int c = accept(fd, NULL, NULL);

		if (c < 0)
			continue;
		if (fork() != 0) {
			close(c);
			continue;
		}
		close(fd);
		while ((n = read(c, buf, sizeof(buf))) > 0)
			if (write(c, buf, (size_t)n) != n)
				_exit(1);
		_exit(0);
	}
}

static int client(const char *port, long bytes, int hold)
{
	struct sockaddr_in sa = loopback(port);
	static char out[CHUNK], in[CHUNK];
	long done = 0;
	int fd = smc_socket();

	if (fd < 0)
		return 1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("connect");
		return 1;
	}
	while (done < bytes) {
		size_t want = bytes - done < CHUNK ? (size_t)(bytes - done) : CHUNK, got = 0;

		for (size_t i = 0; i < want; i++)
			out[i] = (char)((done + i) * 31 + 7);
		if (write(fd, out, want) != (ssize_t)want) {
			perror("write");
			return 1;
		}
		while (got < want) {
			ssize_t n = read(fd, in + got, want - got);

			if (n <= 0) {
				fprintf(stderr, "read: connection ended after %ld bytes\n", done + (long)got);
				return 1;
			}
			got += (size_t)n;
		}
		if (memcmp(in, out, want)) {
			fprintf(stderr, "echo differs after %ld bytes\n", done);
			return 1;
		}
		done += (long)want;
	}
	printf("ok %ld\n", done);
	fflush(stdout);
	sleep((unsigned)hold);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return serve(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atol(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: smcnative server PORT | smcnative client PORT BYTES HOLD\n");
	return 2;
}
