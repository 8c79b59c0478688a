/* The smallest useful preload, for reference in bench/run's preload measurement: it hooks socket()
 * alone, as smc-tools' smc_run library does, and turns TCP requests into AF_SMC ones (TCP when the
 * kernel refuses). What loading a C preload of this kind costs a process is the floor the shim is
 * held to. Built by bench/run with `cc -O2 -shared -fPIC`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

static int (*real_socket)(int, int, int);

__attribute__((constructor)) static void init(void)
{
	real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
}

int socket(int domain, int type, int protocol)
{
	if (!real_socket)
		init();
	if ((domain == AF_INET || domain == AF_INET6) && (type & 0xf) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP)) {
		int fd = real_socket(43, type, domain == AF_INET6 ? 1 : 0);
		if (fd >= 0)
			return fd;
	}
	return real_socket(domain, type, protocol);
}
