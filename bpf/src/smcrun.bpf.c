// SPDX-License-Identifier: MIT OR GPL-2.0
//
// smcrun's BPF mode: the kernel's socket() hook makes TCP sockets SMC sockets.
//
// socket(2) asks update_socket_protocol(family, type, protocol) which protocol to create (Linux 6.6,
// made for MPTCP; its fmod_ret registration lives in net/mptcp/bpf.c). A non-zero return of a
// BPF_MODIFY_RETURN program becomes the protocol: returning IPPROTO_SMC (256, Linux 6.11) for an
// AF_INET/AF_INET6 stream socket of protocol 0 or IPPROTO_TCP makes it an SMC socket that falls back
// to TCP by itself when the peer or the path cannot do SMC.
//
// Two kinds of instance, each its own programs (userspace loads what one needs from this object):
//   smcrun_tree    the tgids in `tree` (the command smcrun started and its descendants,
//                  added by smcrun_fork, removed by smcrun_exit);
//   smcrun_attach  `smcrun attach`'s scopes: tasks in the cgroup v2 subtrees in `cgroups`
//                  (cgroup id -> slot) and tasks in the network namespaces in `netns` (netns
//                  cookie -> slot); an attached cgroup, the narrower scope, decides before the
//                  task's network namespace.
// Both apply the slot's per-program rules (`rules`, `policies`) and count per slot (`counters`)
// and per slot and program name (`by_program`).
//
// Built by bpf/build.sh (clang -target bpf); the object beside this file is committed and
// .ci/run checks that it is what this source compiles to. No header is included, so clang is
// the only tool the build needs: the few kernel ABI numbers used are defined below.
//
// The socket programs sit in "fentry/" sections only because aya-obj 0.3 (the object parser
// the loader uses) does not parse "fmod_ret/" yet: smcrun loads them as BPF_MODIFY_RETURN.

typedef unsigned char __u8;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

// Kernel ABI numbers (include/uapi/linux/bpf.h, socket.h, in.h).
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1
#define SOCK_TYPE_MASK 0xf
#define IPPROTO_TCP 6
#define IPPROTO_SMC 256

// Helpers, by their number in the kernel's BPF ABI.
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;
static __u64 (*bpf_get_current_ancestor_cgroup_id)(int level) = (void *)123;
static struct task_struct *(*bpf_get_current_task_btf)(void) = (void *)158;

// The fields read from the kernel's structures; their offsets are relocated (CO-RE) against the
// running kernel's BTF when the programs are loaded.
typedef struct {
	int counter;
} atomic_t;
struct signal_struct {
	atomic_t live;
} __attribute__((preserve_access_index));
// A network namespace's cookie: set when it is made and never reused (its nsfs inode number is).
struct net {
	__u64 net_cookie;
} __attribute__((preserve_access_index));
struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));
struct task_struct {
	int pid;
	int tgid;
	struct task_struct *group_leader;
	struct signal_struct *signal;
	struct nsproxy *nsproxy;
	char comm[16];
} __attribute__((preserve_access_index));

// Sizes shared with bpf/src/layout.rs (which checks them against these names at build time of
// the tests: see layout.rs).
#define MAX_SCOPES 64
#define MAX_RULES 16
#define COMM_LEN 16
#define MAX_CGROUP_LEVEL 32

#define ACTION_NONE 0
#define ACTION_SMC 1
#define ACTION_TCP 2

#define MATCH_END 0
#define MATCH_EXACT 1
#define MATCH_PREFIX 2
#define MATCH_ANY 3

// One program-name rule: `name` of `len` bytes ('?' matches any one byte), the whole name
// (MATCH_EXACT), its beginning (MATCH_PREFIX: the glob ended in '*'), or any name (MATCH_ANY).
struct rule {
	__u32 match;
	__u32 len;
	__u32 action;
	__u32 pad;
	char name[COMM_LEN];
};

// A slot's default action (when no rule matches) and how many rules it has.
struct policy {
	__u32 nrules;
	__u32 default_action;
};

// Sockets seen per slot: made SMC, kept TCP by a rule.
struct counters {
	__u64 converted;
	__u64 kept_tcp;
};

struct program_key {
	__u32 slot;
	char comm[COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);   // tgid
	__type(value, __u32); // slot
} tree SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SCOPES);
	__type(key, __u64);   // cgroup id (the cgroup2 directory's inode number)
	__type(value, __u32); // slot
} cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SCOPES);
	__type(key, __u64);   // netns cookie (SO_NETNS_COOKIE of a socket made in it)
	__type(value, __u32); // slot
} netns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SCOPES *MAX_RULES);
	__type(key, __u32); // slot * MAX_RULES + rule
	__type(value, struct rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SCOPES);
	__type(key, __u32);
	__type(value, struct policy);
} policies SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SCOPES);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct program_key);
	__type(value, __u64);
} by_program SEC(".maps");

// The sockets BPF mode converts: AF_INET/AF_INET6, SOCK_STREAM (type may carry SOCK_NONBLOCK and
// SOCK_CLOEXEC), protocol 0 or IPPROTO_TCP.
static __attribute__((always_inline)) int is_tcp(__u64 family, __u64 type, __u64 protocol)
{
	int f = (int)family, t = (int)type, p = (int)protocol;

	if (f != AF_INET && f != AF_INET6)
		return 0;
	if ((t & SOCK_TYPE_MASK) != SOCK_STREAM)
		return 0;
	return p == 0 || p == IPPROTO_TCP;
}

static __attribute__((always_inline)) int rule_matches(const struct rule *r, const char *comm)
{
	if (r->match == MATCH_ANY)
		return 1;
	for (int i = 0; i < COMM_LEN; i++) {
		if (i >= r->len)
			return r->match == MATCH_PREFIX || comm[i] == 0;
		if (comm[i] == 0)
			return 0;
		if (r->name[i] != '?' && r->name[i] != comm[i])
			return 0;
	}
	// A 16-byte pattern cannot occur (userspace refuses names over 15 bytes).
	return 0;
}

// The slot's action for the calling process, by the program name the kernel keeps for it (the
// thread group leader's comm: the executable's basename at exec, 15 bytes at most).
static __attribute__((always_inline)) __u32 decide(__u32 slot, char *comm)
{
	struct policy *pol = bpf_map_lookup_elem(&policies, &slot);
	__u32 nrules, dflt;

	if (!pol)
		return ACTION_NONE;
	nrules = pol->nrules;
	dflt = pol->default_action;
	for (__u32 i = 0; i < MAX_RULES; i++) {
		__u32 key = slot * MAX_RULES + i;
		struct rule *r;

		if (i >= nrules)
			break;
		r = bpf_map_lookup_elem(&rules, &key);
		if (!r || r->match == MATCH_END)
			break;
		if (rule_matches(r, comm))
			return r->action;
	}
	return dflt;
}

static __attribute__((always_inline)) int convert(__u32 slot)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct program_key pk = {};
	struct counters *c;
	__u32 action;
	__u64 one = 1, *n;

	pk.slot = slot;
	bpf_probe_read_kernel(pk.comm, COMM_LEN, task->group_leader->comm);
	action = decide(slot, pk.comm);
	c = bpf_map_lookup_elem(&counters, &slot);
	if (action != ACTION_SMC) {
		if (c && action == ACTION_TCP)
			__sync_fetch_and_add(&c->kept_tcp, 1);
		return 0;
	}
	if (c)
		__sync_fetch_and_add(&c->converted, 1);
	n = bpf_map_lookup_elem(&by_program, &pk);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&by_program, &pk, &one, BPF_NOEXIST);
	return IPPROTO_SMC;
}

// update_socket_protocol(int family, int type, int protocol): ctx[0..2]; ctx[3] is the return
// value so far. Returning 0 leaves the protocol as the program asked.
SEC("fentry/update_socket_protocol")
int smcrun_tree(__u64 *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 *slot;

	if (!is_tcp(ctx[0], ctx[1], ctx[2]))
		return 0;
	slot = bpf_map_lookup_elem(&tree, &tgid);
	if (!slot)
		return 0;
	return convert(*slot);
}

SEC("fentry/update_socket_protocol")
int smcrun_attach(__u64 *ctx)
{
	struct task_struct *task;
	__u32 *slot, found = MAX_SCOPES;
	__u64 cookie;

	if (!is_tcp(ctx[0], ctx[1], ctx[2]))
		return 0;
	// The deepest attached ancestor (or the cgroup itself) decides.
	for (int level = 0; level < MAX_CGROUP_LEVEL; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);

		if (!id)
			break;
		slot = bpf_map_lookup_elem(&cgroups, &id);
		if (slot)
			found = *slot;
	}
	if (found < MAX_SCOPES)
		return convert(found);
	// Then the network namespace the socket is made in (the task's).
	task = bpf_get_current_task_btf();
	cookie = task->nsproxy->net_ns->net_cookie;
	slot = bpf_map_lookup_elem(&netns, &cookie);
	if (!slot)
		return 0;
	return convert(*slot);
}

// sched_process_fork(struct task_struct *parent, struct task_struct *child): a new process of a
// process in the tree joins it (a new thread is already in it through its tgid).
SEC("tp_btf/sched_process_fork")
int smcrun_fork(__u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u32 *slot;

	if (child->pid != ctgid)
		return 0;
	slot = bpf_map_lookup_elem(&tree, &ptgid);
	if (slot)
		bpf_map_update_elem(&tree, &ctgid, slot, BPF_ANY);
	return 0;
}

// sched_process_exit(struct task_struct *p): when the last thread of a process exits (its
// signal_struct's live count reached 0 before this tracepoint), the process leaves the tree.
SEC("tp_btf/sched_process_exit")
int smcrun_exit(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	__u32 tgid = p->tgid;

	if (p->signal->live.counter != 0)
		return 0;
	bpf_map_delete_elem(&tree, &tgid);
	return 0;
}

char _license[] SEC("license") = "Dual MIT/GPL";
