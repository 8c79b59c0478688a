// SPDX-License-Identifier: MIT OR GPL-2.0
//
// smcrun agent: the kernel's own record of every SMC socket (AF_SMC and IPPROTO_SMC alike).
//
// kprobes on smc.ko's functions (not fentry/tp_btf: a trampoline or a raw tracepoint on a module
// holds a reference to it, so `rmmod smc` would fail while the agent runs; a kprobe does not, it
// goes quiet when the module goes and the agent attaches again when it comes back):
//   smc_connect            a client socket starts: its process (tgid, comm, cgroup id), netns
//   smc_listen             a listening socket: the process a server socket is attributed to
//   smc_listen_out         a server socket's handshake ended (in the listen worker, a kworker:
//                          its process is the listening socket's)
//   smc_conn_save_peer_info   the SMC handshake succeeded: SMC-R (with its RDMA device) or SMC-D
//   smc_switch_to_fallback    TCP, with the reason
//   smc_sendmsg/smc_recvmsg   bytes each way (the return value, through a kretprobe); the first
//                          one in another process than the recorded one (a prefork worker
//                          accepting a parent's listener) takes the socket over
//   __smc_release          the socket ends: its record goes to the ring buffer `ended`, its
//                          slot is freed.
//
// The agent reads all of it without a bpf() system call: a map system call runs with the
// CPU's BPF tracing programs held off (bpf_disable_instrumentation), and on a preemptible kernel
// a task preempted onto that CPU meanwhile runs smc's functions unprobed (measured on 7.3: 78
// runs missed with the maps read every 100 ms). So:
//   slots       the open sockets' records, an mmapable array the agent reads through mmap. A
//               socket claims a free slot (from the queue `free_slots`, or a never used one past
//               `agent_stats.slots_used`); `by_addr` maps its smc_sock's address to the slot. Each
//               slot has a sequence count, odd while a socket holds it: written before the count
//               goes odd, read by the agent only while it is odd and the same before and after.
//   ended       a ring buffer (mmapped by the agent, which waits on it with epoll): the record
//               of each ended socket, with its slot and sequence count (so the agent does not
//               count a record both open and ended). The agent is woken only when the ring is
//               half full; it reads it every interval anyway.
//   agent_stats what did not fit, an mmapable array.
// Every map is bounded; a record that does not fit is counted in `agent_stats`, never dropped
// silently.
//
// Built by bpf/build.sh like smcrun.bpf.c; no header is included, the few kernel structures read
// are declared below with their CO-RE relocated fields. x86_64 (struct pt_regs).

typedef unsigned char __u8;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define INLINE static __attribute__((always_inline))

#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_QUEUE 22
#define BPF_MAP_TYPE_RINGBUF 27
#define BPF_F_MMAPABLE 1024
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_get_current_comm)(void *buf, __u32 size) = (void *)16;
static __u64 (*bpf_get_current_cgroup_id)(void) = (void *)80;
static long (*bpf_map_push_elem)(void *map, const void *value, __u64 flags) = (void *)87;
static long (*bpf_map_pop_elem)(void *map, void *value) = (void *)88;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;
static __u64 (*bpf_ktime_get_boot_ns)(void) = (void *)125;
static void *(*bpf_ringbuf_reserve)(void *ringbuf, __u64 size, __u64 flags) = (void *)131;
static void (*bpf_ringbuf_submit)(void *data, __u64 flags) = (void *)132;
static __u64 (*bpf_ringbuf_query)(void *ringbuf, __u64 flags) = (void *)134;

// The registers of a kprobe's context (x86_64's struct pt_regs, a fixed ABI).
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip,
		cs, flags, sp, ss;
};
#define ARG1(ctx) ((ctx)->di)
#define ARG2(ctx) ((ctx)->si)
#define RET(ctx) ((ctx)->ax)

// The fields read, relocated (CO-RE) against the running kernel's and smc.ko's BTF at load time.
struct net {
	__u64 net_cookie;
} __attribute__((preserve_access_index));
typedef struct {
	struct net *net;
} possible_net_t;
struct sock_common {
	possible_net_t skc_net;
} __attribute__((preserve_access_index));
struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));
struct socket {
	struct sock *sk;
} __attribute__((preserve_access_index));
struct inode {
	unsigned long i_ino;
} __attribute__((preserve_access_index));
struct socket_alloc {
	struct socket socket;
	struct inode vfs_inode;
} __attribute__((preserve_access_index));
struct smc_link {
	char ibname[64];
	__u8 ibport;
} __attribute__((preserve_access_index));
struct smc_link_group {
	_Bool is_smcd;
} __attribute__((preserve_access_index));
struct smc_connection {
	struct smc_link_group *lgr;
	struct smc_link *lnk;
} __attribute__((preserve_access_index));
// The struct sock is at offset 0 of struct smc_sock (alone or in a union, by kernel version):
// the smc_sock's address is the sock's.
struct smc_sock {
	struct smc_connection conn;
	struct smc_sock *listen_smc;
	_Bool use_fallback;
	int fallback_rsn;
	__u32 peer_diagnosis;
} __attribute__((preserve_access_index));

#define RD(dst, src) bpf_probe_read_kernel(&(dst), sizeof(dst), &(src))

// Shared with bpf/src/agent_probes.rs (struct Record, Slot, Ended, AgentStats, constants below).
#define COMM_LEN 16
#define DEV_LEN 16
#define MAX_LIVE 16384
#define MAX_INFLIGHT 4096
// The ring buffer's bytes: 16384 ended records of 8 header bytes + sizeof(struct ended), 128.
#define RING_BYTES (2 * 1024 * 1024)

#define ROLE_CLIENT 1
#define ROLE_SERVER 2
#define ROLE_LISTEN 3

#define MODE_UNKNOWN 0
#define MODE_SMCR 1
#define MODE_SMCD 2
#define MODE_TCP 3

#define FLAG_INHERITED 1 // the process is the listening socket's (not yet seen in its own)
#define FLAG_ENDED 2	 // __smc_release was seen
#define FLAG_STALE 4	 // replaced by a new socket at the same address without a release

struct record {
	__u64 start_ns; // CLOCK_BOOTTIME
	__u64 end_ns;
	__u64 cgroup_id;
	__u64 netns_cookie;
	__u64 tx_bytes;
	__u64 rx_bytes;
	__u64 inode; // the socket's inode (0 until a process holds it)
	__u32 tgid;
	__u32 fallback_rsn;
	__u32 peer_diagnosis;
	__u8 role;
	__u8 mode;
	__u8 flags;
	__u8 ibport;
	char comm[COMM_LEN];
	char dev[DEV_LEN];
};

// One open socket's place: `seq` odd while a socket holds it (each claim and each release adds 1).
struct slot {
	__u64 seq;
	struct record r;
};

// An ended socket's record on the ring buffer, with the slot it held and that slot's `seq` then.
struct ended {
	__u64 seq;
	__u32 slot;
	__u32 pad;
	struct record r;
};

// What did not fit, and how often each program ran.
struct agent_stats {
	__u64 live_full;     // a socket found no free slot (or `by_addr` full): not recorded
	__u64 done_full;     // an ended record found the ring buffer full: lost
	__u64 inflight_full; // a send/recv whose bytes could not be counted
	__u64 stale;	     // records ended without their release being seen
	__u64 events;
	__u64 slots_used; // slots ever handed out from the top (the agent reads those below)
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_LIVE);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LIVE);
	__type(key, __u64);   // the smc_sock's address
	__type(value, __u32); // its slot
} by_addr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, MAX_LIVE);
	__type(value, __u32); // a freed slot
} free_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RING_BYTES);
} ended SEC(".maps");

// The socket of a send/recv in progress: its slot, and the slot's `seq` then, so that the return
// counts the bytes only if that socket still holds the slot (a stale entry, left by a return the
// kernel missed, never counts bytes for a later socket at the same place). A thread's next
// send/recv replaces its entry; one that ends right after a missed return leaves its entry behind
// (each such miss is in probes_missed, and a full map in inflight_full). A plain hash, not an LRU
// one: measured in the VM (bench vm-agent, 5 pairs each), the LRU hash made the machine's CPU
// 1.14x [1.13-1.20] of no agent, this one 1.12x [1.11-1.14].
struct io {
	__u64 seq;
	__u32 slot;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u64); // pid_tgid
	__type(value, struct io);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct agent_stats);
} agent_stats SEC(".maps");

// Keeps the compiler from moving stores across it (x86 keeps stores in order itself).
#define BARRIER() asm volatile("" ::: "memory")

INLINE struct agent_stats *stats(void)
{
	__u32 zero = 0;
	struct agent_stats *s = bpf_map_lookup_elem(&agent_stats, &zero);

	if (s)
		__sync_fetch_and_add(&s->events, 1);
	return s;
}

INLINE void count(__u64 *counter)
{
	__sync_fetch_and_add(counter, 1);
}

INLINE void set_process(struct record *r)
{
	r->tgid = bpf_get_current_pid_tgid() >> 32;
	r->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(r->comm, COMM_LEN);
}

// The mode as the socket says now: TCP once fallen back, SMC-R/SMC-D once it has a link group.
// The mode is written last: a reader seeing it sees the reason or device written before.
INLINE void classify(struct record *r, struct smc_sock *smc)
{
	struct smc_link_group *lgr = 0;
	struct smc_link *lnk = 0;
	_Bool fb = 0, smcd = 0;

	RD(fb, smc->use_fallback);
	if (fb) {
		RD(r->fallback_rsn, smc->fallback_rsn);
		RD(r->peer_diagnosis, smc->peer_diagnosis);
		BARRIER();
		r->mode = MODE_TCP;
		return;
	}
	if (r->mode != MODE_UNKNOWN)
		return;
	RD(lgr, smc->conn.lgr);
	if (!lgr)
		return;
	RD(smcd, lgr->is_smcd);
	if (!smcd) {
		RD(lnk, smc->conn.lnk);
		if (lnk) {
			bpf_probe_read_kernel(r->dev, DEV_LEN - 1, lnk->ibname);
			RD(r->ibport, lnk->ibport);
		}
	}
	BARRIER();
	r->mode = smcd ? MODE_SMCD : MODE_SMCR;
}

// The slot of the socket at `addr` (its number in *idx), or none.
INLINE struct slot *slot_of(__u64 addr, __u32 *idx)
{
	__u32 *i = bpf_map_lookup_elem(&by_addr, &addr);

	if (!i)
		return 0;
	*idx = *i;
	return bpf_map_lookup_elem(&slots, idx);
}

// The record of the socket at `addr`, or none.
INLINE struct record *live_of(__u64 addr)
{
	__u32 idx;
	struct slot *sl = slot_of(addr, &idx);

	return sl ? &sl->r : 0;
}

// The record in slot `idx` ends: onto the ring buffer (or counted lost), and the slot freed.
INLINE void finish(__u64 addr, __u32 idx, struct slot *sl, struct agent_stats *s)
{
	struct ended *e = bpf_ringbuf_reserve(&ended, sizeof(struct ended), 0);

	if (e) {
		e->seq = sl->seq;
		e->slot = idx;
		e->pad = 0;
		__builtin_memcpy(&e->r, &sl->r, sizeof(struct record));
		// Woken only when the ring is half full: the agent reads it every interval anyway.
		bpf_ringbuf_submit(e, bpf_ringbuf_query(&ended, BPF_RB_AVAIL_DATA) > RING_BYTES / 2
					      ? BPF_RB_FORCE_WAKEUP
					      : BPF_RB_NO_WAKEUP);
	} else if (s) {
		count(&s->done_full);
	}
	bpf_map_delete_elem(&by_addr, &addr);
	__sync_fetch_and_add(&sl->seq, 1); // even: free (after the record went out)
	bpf_map_push_elem(&free_slots, &idx, 0);
}

// A new record for the socket at `addr` (an existing one there is stale: its socket ended
// unseen), started now in the current process.
INLINE struct record *start(__u64 addr, struct smc_sock *smc, __u8 role)
{
	struct agent_stats *s = stats();
	struct net *net = 0;
	struct slot *sl;
	__u32 idx;

	if (!s)
		return 0;
	sl = slot_of(addr, &idx);
	if (sl) {
		sl->r.flags |= FLAG_STALE;
		count(&s->stale);
		finish(addr, idx, sl, s);
	}
	if (bpf_map_pop_elem(&free_slots, &idx)) {
		// No freed slot: one never used, if any is left.
		if (s->slots_used >= MAX_LIVE) {
			count(&s->live_full);
			return 0;
		}
		idx = __sync_fetch_and_add(&s->slots_used, 1);
	}
	sl = bpf_map_lookup_elem(&slots, &idx);
	if (!sl) {
		count(&s->live_full); // past the top: taken by another CPU meanwhile
		return 0;
	}
	// The slot is free (`seq` even): the agent does not read it while it is filled.
	__builtin_memset(&sl->r, 0, sizeof(struct record));
	sl->r.start_ns = bpf_ktime_get_boot_ns();
	sl->r.role = role;
	set_process(&sl->r);
	RD(net, ((struct sock *)smc)->__sk_common.skc_net.net);
	if (net)
		RD(sl->r.netns_cookie, net->net_cookie);
	if (bpf_map_update_elem(&by_addr, &addr, &idx, BPF_NOEXIST)) {
		count(&s->live_full);
		bpf_map_push_elem(&free_slots, &idx, 0);
		return 0;
	}
	__sync_fetch_and_add(&sl->seq, 1); // odd: held (after the record was written)
	return &sl->r;
}

INLINE struct smc_sock *smc_of(struct socket *sock)
{
	struct sock *sk = 0;

	RD(sk, sock->sk);
	return (struct smc_sock *)sk;
}

INLINE __u64 inode_of(struct socket *sock)
{
	__u64 ino = 0;

	RD(ino, ((struct socket_alloc *)sock)->vfs_inode.i_ino);
	return ino;
}

// The record that connect() or listen() on `sock` starts in the role `role`, with the socket's
// inode; none when the socket has one in that role already (connect() again on a socket already
// connecting, EALREADY or EISCONN, keeps its record; listen() again changes the backlog only) or
// no slot is free. `*smcp` is the socket's smc_sock either way.
INLINE struct record *start_call(struct socket *sock, __u8 role, struct smc_sock **smcp)
{
	struct smc_sock *smc = smc_of(sock);
	struct record *r;

	*smcp = smc;
	if (!smc)
		return 0;
	r = live_of((__u64)smc);
	if (r && r->role == role)
		return 0;
	r = start((__u64)smc, smc, role);
	if (r)
		r->inode = inode_of(sock);
	return r;
}

// smc_connect(struct socket *sock, struct sockaddr *addr, int alen, int flags)
SEC("kprobe/smc_connect")
int agent_connect(struct pt_regs *ctx)
{
	struct smc_sock *smc;
	struct record *r = start_call((struct socket *)ARG1(ctx), ROLE_CLIENT, &smc);

	if (r)
		classify(r, smc); // fallen back before connect (TCP_FASTOPEN set)
	return 0;
}

// smc_listen(struct socket *sock, int backlog)
SEC("kprobe/smc_listen")
int agent_listen(struct pt_regs *ctx)
{
	struct smc_sock *smc;

	start_call((struct socket *)ARG1(ctx), ROLE_LISTEN, &smc);
	return 0;
}

// smc_listen_out(struct smc_sock *new_smc): the end of a server socket's handshake, in the
// listen worker. The process is the listener's.
SEC("kprobe/smc_listen_out")
int agent_listen_out(struct pt_regs *ctx)
{
	struct smc_sock *smc = (struct smc_sock *)ARG1(ctx), *lsmc = 0;
	__u64 addr = (__u64)smc;
	struct record *r, *l;

	if (!smc)
		return 0;
	r = live_of(addr);
	if (!r || r->role != ROLE_SERVER)
		r = start(addr, smc, ROLE_SERVER);
	if (!r)
		return 0;
	RD(lsmc, smc->listen_smc);
	l = lsmc ? live_of((__u64)lsmc) : 0;
	if (l) {
		r->tgid = l->tgid;
		r->cgroup_id = l->cgroup_id;
		__builtin_memcpy(r->comm, l->comm, COMM_LEN);
		r->flags |= FLAG_INHERITED;
	}
	classify(r, smc);
	return 0;
}

// smc_conn_save_peer_info(struct smc_sock *smc, struct smc_clc_msg_accept_confirm *clc): the
// SMC handshake succeeded (client: after the accept; server: after the confirm).
SEC("kprobe/smc_conn_save_peer_info")
int agent_peer_info(struct pt_regs *ctx)
{
	struct smc_sock *smc = (struct smc_sock *)ARG1(ctx);
	struct record *r = smc ? live_of((__u64)smc) : 0;

	if (r)
		classify(r, smc);
	return 0;
}

// smc_switch_to_fallback(struct smc_sock *smc, int reason_code)
SEC("kprobe/smc_switch_to_fallback")
int agent_fallback(struct pt_regs *ctx)
{
	struct smc_sock *smc = (struct smc_sock *)ARG1(ctx);
	struct record *r = smc ? live_of((__u64)smc) : 0;

	if (!r)
		return 0; // a server socket: smc_listen_out records it with the reason
	r->fallback_rsn = (__u32)ARG2(ctx);
	RD(r->peer_diagnosis, smc->peer_diagnosis);
	BARRIER();
	r->mode = MODE_TCP;
	return 0;
}

// smc_sendmsg(struct socket *sock, ...), smc_recvmsg(struct socket *sock, ...): remember the
// socket until the return says how many bytes went.
INLINE int io_entry(struct pt_regs *ctx)
{
	struct socket *sock = (struct socket *)ARG1(ctx);
	struct smc_sock *smc = smc_of(sock);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct io io = {};
	struct record *r;
	struct slot *sl;

	if (!smc)
		return 0;
	sl = slot_of((__u64)smc, &io.slot);
	if (!sl)
		return 0;
	io.seq = sl->seq;
	r = &sl->r;
	if (r->flags & FLAG_INHERITED || !r->inode) {
		// The first I/O in the process that holds the socket: a server socket's own process
		// (a worker that accepted from a listener its parent made), its inode.
		if (r->tgid != tgid)
			set_process(r);
		r->flags &= ~FLAG_INHERITED;
		r->inode = inode_of(sock);
	}
	if (bpf_map_update_elem(&inflight, &id, &io, BPF_ANY)) {
		struct agent_stats *s = stats();

		if (s)
			count(&s->inflight_full);
	}
	return 0;
}

INLINE int io_return(struct pt_regs *ctx, int tx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct io *io = bpf_map_lookup_elem(&inflight, &id);
	__s64 n = (__s64)RET(ctx);
	struct slot *sl;
	__u32 idx;
	__u64 seq;

	if (!io)
		return 0;
	idx = io->slot;
	seq = io->seq;
	bpf_map_delete_elem(&inflight, &id);
	sl = n > 0 ? bpf_map_lookup_elem(&slots, &idx) : 0;
	// the same socket still holds the slot (a release and a new claim change `seq`)
	if (!sl || sl->seq != seq)
		return 0;
	if (tx)
		__sync_fetch_and_add(&sl->r.tx_bytes, n);
	else
		__sync_fetch_and_add(&sl->r.rx_bytes, n);
	return 0;
}

SEC("kprobe/smc_sendmsg")
int agent_send(struct pt_regs *ctx)
{
	return io_entry(ctx);
}

SEC("kretprobe/smc_sendmsg")
int agent_send_ret(struct pt_regs *ctx)
{
	return io_return(ctx, 1);
}

SEC("kprobe/smc_recvmsg")
int agent_recv(struct pt_regs *ctx)
{
	return io_entry(ctx);
}

SEC("kretprobe/smc_recvmsg")
int agent_recv_ret(struct pt_regs *ctx)
{
	return io_return(ctx, 0);
}

// __smc_release(struct smc_sock *smc): close() of a socket, or of a server socket never accepted.
SEC("kprobe/__smc_release")
int agent_release(struct pt_regs *ctx)
{
	struct smc_sock *smc = (struct smc_sock *)ARG1(ctx);
	__u64 addr = (__u64)smc;
	struct slot *sl;
	__u32 idx;

	if (!smc)
		return 0;
	sl = slot_of(addr, &idx);
	if (!sl)
		return 0;
	classify(&sl->r, smc);
	sl->r.end_ns = bpf_ktime_get_boot_ns();
	sl->r.flags |= FLAG_ENDED;
	finish(addr, idx, sl, stats());
	return 0;
}

char _license[] SEC("license") = "Dual MIT/GPL";
