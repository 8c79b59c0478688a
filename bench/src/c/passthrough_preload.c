/* The cheapest hook a preload can have, for reference in bench/run's hook measurement: socket(),
 * close(), getsockopt() and bind() each call the next definition (glibc's) and nothing else. What
 * such a hook adds to a call over no preload (the program's call lands in this library, which calls
 * glibc through a pointer) is the floor of every pass-through hook on the machine measured; the
 * shim's pass-through hooks are held to it. Built by bench/run with `cc -O2 -shared -fPIC`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/socket.h>

static int (*next_socket)(int, int, int);
static int (*next_close)(int);
static int (*next_getsockopt)(int, int, int, void *, socklen_t *);
static int (*next_bind)(int, const struct sockaddr *, socklen_t);

__attribute__((constructor)) static void init(void)
{
	next_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	next_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
	next_getsockopt = (int (*)(int, int, int, void *, socklen_t *))dlsym(RTLD_NEXT, "getsockopt");
	next_bind = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
}

int socket(int domain, int type, int protocol)
{
	return next_socket(domain, type, protocol);
}

int close(int fd)
{
	return next_close(fd);
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return next_getsockopt(fd, level, name, val, len);
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	return next_bind(fd, addr, len);
}
