// SPDX-License-Identifier: MIT OR GPL-2.0
//
// smcrun's handshake policy: the kernel's smc_hs_ctrl hook (Linux 6.19, CONFIG_SMC_HS_CTRL_BPF)
// decides per connection whether an SMC socket's SYN (client) or SYN-ACK (server) carries the SMC
// option. Without it the connection is plain TCP (both sides fall back with SMC_CLC_DECL_PEERNOSMC),
// for every SMC socket of the network namespace: AF_SMC, IPPROTO_SMC, preloaded or not.
//
//   smcrun_hs_syn     smc_hs_ctrl.syn_option(struct tcp_sock *tp): the client's SYN; the service
//                     port is the remote one (skc_dport)
//   smcrun_hs_synack  smc_hs_ctrl.synack_option(const struct tcp_sock *tp,
//                     struct inet_request_sock *ireq): the server's SYN-ACK; the service port is
//                     the local one (skc_num)
// Both return 0 (no SMC option: TCP) or 1 (SMC) from the rules in `hs_rules` and the default in
// `hs_policy` (first match wins, as the preload's matcher), and count in `hs_counters`.
//
// smcrun builds the struct_ops value (the name written to net.smc.hs_ctrl, these programs) from
// the kernel's BTF itself and registers it with BPF_MAP_UPDATE_ELEM (see handshake.rs); the
// programs sit in "fentry/" sections only because aya-obj 0.3, the object parser the loader uses,
// does not parse "struct_ops/" (smcrun loads them as BPF_PROG_TYPE_STRUCT_OPS).
//
// Built by bpf/build.sh like smcrun.bpf.c; no header is included, the kernel fields read are
// declared below with their CO-RE relocated offsets.

typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name
#define INLINE static __attribute__((always_inline))

#define BPF_MAP_TYPE_ARRAY 2
#define AF_INET 2
#define AF_INET6 10

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;

// The fields read, relocated (CO-RE) against the running kernel's BTF at load time.
struct in6_addr {
	union {
		__u32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));
struct sock_common {
	__u32 skc_daddr;     // remote IPv4 address (network order)
	__u32 skc_rcv_saddr; // local IPv4 address
	__u16 skc_dport;     // remote port (network order)
	__u16 skc_num;       // local port (host order)
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));
struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));
struct inet_sock {
	struct sock sk;
} __attribute__((preserve_access_index));
struct inet_connection_sock {
	struct inet_sock icsk_inet;
} __attribute__((preserve_access_index));
struct tcp_sock {
	struct inet_connection_sock inet_conn;
} __attribute__((preserve_access_index));
struct request_sock {
	struct sock_common __req_common;
} __attribute__((preserve_access_index));
struct inet_request_sock {
	struct request_sock req;
} __attribute__((preserve_access_index));

// Sizes and codes shared with bpf/src/hsrules.rs (its tests check them against this object's maps).
#define HS_MAX_RULES 16
#define HS_MAX_LIST 8

#define ACTION_SMC 1
#define ACTION_TCP 2

#define ROLE_ANY 0
#define ROLE_CLIENT 1
#define ROLE_SERVER 2

#define NET_V4 4
#define NET_V6 6

// An address range: the network's and the mask's bytes in network order, word by word (an IPv4
// range uses word 0 only), so `(addr & mask) == net` holds word by word for an address inside.
struct hs_net {
	__u32 family; // NET_V4, NET_V6
	__u32 net[4];
	__u32 mask[4];
};

struct hs_ports {
	__u16 low;
	__u16 high;
};

// One rule: every qualifier given must hold (an empty list is not given).
struct hs_rule {
	__u32 action;
	__u32 role;
	__u32 nports;
	__u32 nremote;
	__u32 nlocal;
	__u32 pad;
	struct hs_ports ports[HS_MAX_LIST];
	struct hs_net remote[HS_MAX_LIST];
	struct hs_net local[HS_MAX_LIST];
};

struct hs_policy {
	__u32 nrules;
	__u32 default_action;
};

// Connections decided, by side and answer.
struct hs_counters {
	__u64 client_smc;
	__u64 client_tcp;
	__u64 server_smc;
	__u64 server_tcp;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HS_MAX_RULES);
	__type(key, __u32);
	__type(value, struct hs_rule);
} hs_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hs_policy);
} hs_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hs_counters);
} hs_counters SEC(".maps");

// A connection as the rules see it: a v4-mapped IPv6 address is folded into IPv4 (as the
// preload's matcher does), so `remote 10.0.0.0/8` covers an AF_INET6 socket's ::ffff:10.1.2.3.
struct conn {
	__u32 role;
	__u16 service_port;
	__u32 lfamily, rfamily;
	__u32 laddr[4];
	__u32 raddr[4];
};

// Fills `fam`/`out` from an IPv4 address or an IPv6 one (folding v4-mapped ones).
INLINE void address(__u32 family, __u32 v4, const struct in6_addr *v6, __u32 *fam, __u32 *out)
{
	__u32 w0, w1, w2, w3;

	if (family != AF_INET6) {
		*fam = NET_V4;
		out[0] = v4;
		out[1] = out[2] = out[3] = 0;
		return;
	}
	w0 = v6->in6_u.u6_addr32[0];
	w1 = v6->in6_u.u6_addr32[1];
	w2 = v6->in6_u.u6_addr32[2];
	w3 = v6->in6_u.u6_addr32[3];
	// ::ffff:a.b.c.d: 80 zero bits, 16 one bits (0x0000ffff in network order is these bytes).
	if (w0 == 0 && w1 == 0 && w2 == __builtin_bswap32(0x0000ffff)) {
		*fam = NET_V4;
		out[0] = w3;
		out[1] = out[2] = out[3] = 0;
		return;
	}
	*fam = NET_V6;
	out[0] = w0;
	out[1] = w1;
	out[2] = w2;
	out[3] = w3;
}

INLINE int in_net(const struct hs_net *n, __u32 fam, const __u32 *a)
{
	if (n->family != fam)
		return 0;
	for (int i = 0; i < 4; i++)
		if ((a[i] & n->mask[i]) != n->net[i])
			return 0;
	return 1;
}

INLINE int in_nets(const struct hs_net *nets, __u32 count, __u32 fam, const __u32 *a)
{
	if (count == 0)
		return 1;
	for (int i = 0; i < HS_MAX_LIST; i++) {
		if (i >= count)
			break;
		if (in_net(&nets[i], fam, a))
			return 1;
	}
	return 0;
}

INLINE int rule_matches(const struct hs_rule *r, const struct conn *c)
{
	if (r->role != ROLE_ANY && r->role != c->role)
		return 0;
	if (r->nports) {
		int hit = 0;

		for (int i = 0; i < HS_MAX_LIST; i++) {
			if (i >= r->nports)
				break;
			if (r->ports[i].low <= c->service_port && c->service_port <= r->ports[i].high) {
				hit = 1;
				break;
			}
		}
		if (!hit)
			return 0;
	}
	return in_nets(r->remote, r->nremote, c->rfamily, c->raddr) &&
	       in_nets(r->local, r->nlocal, c->lfamily, c->laddr);
}

// 1: SMC (the option goes out), 0: TCP. Without a policy (not written yet), SMC: the kernel's
// behaviour without the hook.
INLINE int decide(const struct conn *c)
{
	__u32 zero = 0, action = ACTION_SMC;
	struct hs_policy *pol = bpf_map_lookup_elem(&hs_policy, &zero);
	struct hs_counters *n;

	if (pol) {
		__u32 nrules = pol->nrules;

		action = pol->default_action;
		for (__u32 i = 0; i < HS_MAX_RULES; i++) {
			struct hs_rule *r;

			if (i >= nrules)
				break;
			r = bpf_map_lookup_elem(&hs_rules, &i);
			if (!r)
				break;
			if (rule_matches(r, c)) {
				action = r->action;
				break;
			}
		}
	}
	n = bpf_map_lookup_elem(&hs_counters, &zero);
	if (n) {
		if (c->role == ROLE_CLIENT)
			__sync_fetch_and_add(action == ACTION_SMC ? &n->client_smc : &n->client_tcp, 1);
		else
			__sync_fetch_and_add(action == ACTION_SMC ? &n->server_smc : &n->server_tcp, 1);
	}
	return action == ACTION_SMC;
}

INLINE void fill(struct conn *c, const struct sock_common *s)
{
	__u32 family = s->skc_family;

	address(family, s->skc_daddr, &s->skc_v6_daddr, &c->rfamily, c->raddr);
	address(family, s->skc_rcv_saddr, &s->skc_v6_rcv_saddr, &c->lfamily, c->laddr);
}

SEC("fentry/smc_hs_syn_option")
int smcrun_hs_syn(__u64 *ctx)
{
	struct tcp_sock *tp = (struct tcp_sock *)ctx[0];
	struct conn c = {};

	c.role = ROLE_CLIENT;
	c.service_port = __builtin_bswap16(tp->inet_conn.icsk_inet.sk.__sk_common.skc_dport);
	fill(&c, &tp->inet_conn.icsk_inet.sk.__sk_common);
	return decide(&c);
}

SEC("fentry/smc_hs_synack_option")
int smcrun_hs_synack(__u64 *ctx)
{
	struct inet_request_sock *ireq = (struct inet_request_sock *)ctx[1];
	struct conn c = {};

	c.role = ROLE_SERVER;
	c.service_port = ireq->req.__req_common.skc_num;
	fill(&c, &ireq->req.__req_common);
	return decide(&c);
}

char _license[] SEC("license") = "Dual MIT/GPL";
