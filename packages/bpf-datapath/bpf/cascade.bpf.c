// SPDX-License-Identifier: GPL-2.0
/* The Cascade network-policy datapath: tc programs on an endpoint's host-side interface.
 * from_endpoint judges the pod's egress, to_endpoint its ingress. Every packet: the endpoint (hash)
 * and its conntrack entry (LRU hash, one per flow and endpoint, found by both directions). A packet
 * without a current conntrack entry: the remote identity (an exact hash for host addresses, the LPM
 * trie only for CIDRs), then the verdict cache (LRU hash keyed by the endpoint's table ids, identity,
 * protocol and port). Only a cache miss walks the rule sets: up to three LPM lookups per layer
 * (identity, all-pods class, wildcard) in the admin layer and, when it passes or misses, in the lower
 * layer; the result is cached. So the per-packet cost does not depend on the number of rules. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "cascade.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct ipcache_key);
	__type(value, struct ipcache_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_ipcache SEC(".maps");

/* host addresses (/32, /128) -> identity: the exact lookup that pods and nodes take */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, struct ipcache_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_hosts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, struct endpoint_value);
	__uint(max_entries, 65536);
} cascade_endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct policy_key);
	__type(value, struct policy_value);
	__uint(max_entries, 1048576);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_policy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct ct_value);
	__uint(max_entries, 262144);
} cascade_ct SEC(".maps");

/* first fragments' protocol and ports, for their later fragments */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct frag_key);
	__type(value, struct frag_value);
	__uint(max_entries, 16384);
} cascade_frags SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct verdict_key);
	__type(value, struct verdict_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
} cascade_verdicts SEC(".maps");

/* Service frontends -> backend list id and size; backends by (list id, slot) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct backend_key);
	__type(value, struct nat_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_backends SEC(".maps");

/* a translated flow: its original tuple (local pod, frontend) -> the backend it was sent to */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct nat_value);
	__uint(max_entries, 262144);
} cascade_nat SEC(".maps");

/* its translated tuple (local pod, backend) -> the frontend, for the replies */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct nat_value);
	__uint(max_entries, 262144);
} cascade_revnat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct config);
	__uint(max_entries, 1);
} cascade_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, CNT_MAX);
} cascade_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} cascade_events SEC(".maps");

#include "parse.h"

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&cascade_counters, &idx);
	if (c)
		*c += 1;
}

static __always_inline int same_addr(const __u8 *a, const __u8 *b)
{
	const __u64 *x = (const __u64 *)a;
	const __u64 *y = (const __u64 *)b;
	return x[0] == y[0] && x[1] == y[1];
}

static __always_inline struct policy_value *lpm(__u32 table, __u32 identity, __u8 proto, __u16 port)
{
	struct policy_key k = {
		.prefixlen = 88,
		.table = table,
		.identity = identity,
		.proto = proto,
		.port = bpf_htons(port),
	};
	return bpf_map_lookup_elem(&cascade_policy, &k);
}

/* precedence, then longer match, then deny (the low bit of precedence already) */
static __always_inline struct policy_value *better(struct policy_value *a, struct policy_value *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->precedence != b->precedence)
		return a->precedence > b->precedence ? a : b;
	return a->match_len >= b->match_len ? a : b;
}

static __always_inline struct policy_value *layer(__u32 table, __u32 identity, __u8 proto, __u16 port)
{
	struct policy_value *best = lpm(table, identity, proto, port);
	if (identity >= CASCADE_POD_FIRST && identity <= CASCADE_POD_LAST)
		best = better(best, lpm(table, CASCADE_ID_ALL_PODS, proto, port));
	return better(best, lpm(table, CASCADE_ID_WILDCARD, proto, port));
}

struct decision {
	__u8 verdict;
	__u32 rule;
	__u32 precedence;
	__u32 identity;
};

static __always_inline struct config *config(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cascade_config, &zero);
}

static __always_inline __u32 identity_of(__u8 *addr)
{
	struct endpoint_key hk;
	__builtin_memcpy(hk.addr, addr, 16);
	struct ipcache_value *iv = bpf_map_lookup_elem(&cascade_hosts, &hk);
	if (iv)
		return iv->identity;
	struct ipcache_key ik = { .prefixlen = 128 };
	__builtin_memcpy(ik.addr, addr, 16);
	iv = bpf_map_lookup_elem(&cascade_ipcache, &ik);
	return iv ? iv->identity : CASCADE_ID_WORLD;
}

static __always_inline void judge(struct endpoint_value *ep, int dir, __u8 *remote, __u8 proto, __u16 port, struct decision *d)
{
	__u32 identity = identity_of(remote);
	d->identity = identity;
	d->rule = 0;
	d->precedence = 0;
	if (identity == CASCADE_ID_HOST) { /* a pod and its own node always talk */
		d->verdict = VERDICT_ALLOW;
		return;
	}
	struct verdict_key vk = {
		.admin = dir == DIR_INGRESS ? ep->tables[DIR_INGRESS][0] : ep->tables[DIR_EGRESS][0],
		.lower = dir == DIR_INGRESS ? ep->tables[DIR_INGRESS][1] : ep->tables[DIR_EGRESS][1],
		.identity = identity,
		.proto = proto,
		.port = port,
	};
	struct config *cfg = config();
	__u32 epoch = cfg ? cfg->epoch : 0;
	struct verdict_value *cached = bpf_map_lookup_elem(&cascade_verdicts, &vk);
#ifdef CASCADE_BENCH_COLD
	cached = NULL; /* bench build only: every verdict walks the rule sets */
#endif
	if (cached && cached->epoch == epoch) {
		count(CNT_VERDICT_CACHED);
		d->verdict = cached->verdict;
		d->rule = cached->rule;
		d->precedence = cached->precedence;
		return;
	}
	struct policy_value *v = layer(vk.admin, identity, proto, port);
	if (!v || v->verdict == VERDICT_PASS)
		v = layer(vk.lower, identity, proto, port);
	if (v) {
		d->verdict = v->verdict == VERDICT_DENY ? VERDICT_DENY : VERDICT_ALLOW;
		d->rule = v->rule;
		d->precedence = v->precedence;
	} else {
		d->verdict = VERDICT_ALLOW;
	}
	struct verdict_value nv = { .epoch = epoch, .precedence = d->precedence, .rule = d->rule, .verdict = d->verdict };
	bpf_map_update_elem(&cascade_verdicts, &vk, &nv, BPF_ANY);
}

static __always_inline void report(struct flow *f, int dir, struct decision *d, __u8 reason)
{
	struct flow_event *e = bpf_ringbuf_reserve(&cascade_events, sizeof(*e), 0);
	if (!e)
		return;
	__builtin_memcpy(e->src, f->src, 16);
	__builtin_memcpy(e->dst, f->dst, 16);
	e->sport = f->sport;
	e->dport = f->dport;
	e->proto = f->proto;
	e->dir = dir;
	e->verdict = d->verdict;
	e->reason = reason;
	e->remote_identity = d->identity;
	e->rule = d->rule;
	e->precedence = d->precedence;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int is_zero(const __u8 *a)
{
	const __u64 *x = (const __u64 *)a;
	return x[0] == 0 && x[1] == 0;
}

static __always_inline int is_link_local6(const __u8 *a)
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

/* 0.0.0.0 as ::ffff:0.0.0.0 (an ARP probe's sender) */
static __always_inline int is_zero4(const __u8 *a)
{
	return a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] == 0;
}

/* The endpoint that owns addr on this interface, or NULL: the binding that stops spoofing. */
static __always_inline struct endpoint_value *endpoint_on(const __u8 *addr, __u32 ifindex)
{
	struct endpoint_key ek;
	__builtin_memcpy(ek.addr, addr, 16);
	struct endpoint_value *ep = bpf_map_lookup_elem(&cascade_endpoints, &ek);
	return ep && ep->ifindex == ifindex ? ep : NULL;
}

static __always_inline int spoofed(void)
{
	count(CNT_SPOOFED);
	return TC_ACT_SHOT;
}

static __always_inline void remember_fragment(struct flow *f)
{
	if (f->frag != FRAG_FIRST)
		return;
	struct frag_key fk = { .id = f->frag_id, .proto = f->frag_proto };
	__builtin_memcpy(fk.src, f->src, 16);
	__builtin_memcpy(fk.dst, f->dst, 16);
	struct frag_value fv = { .sport = f->sport, .dport = f->dport, .proto = f->proto };
	bpf_map_update_elem(&cascade_frags, &fk, &fv, BPF_ANY);
}

#define IP4_CSUM_OFF (ETH_HLEN + 10)
#define IP4_SRC_OFF (ETH_HLEN + 12)
#define IP4_DST_OFF (ETH_HLEN + 16)
#define IP6_SRC_OFF (ETH_HLEN + 8)
#define IP6_DST_OFF (ETH_HLEN + 24)

/* Rewrites the packet's source (dst = 0) or destination (dst = 1) address and port, with the IPv4
 * header checksum and the TCP/UDP checksum (pseudo header) kept right, also for checksum offload.
 * SCTP's CRC32c covers no address: only flows whose port stays are translated (see service()).
 * A later fragment has no L4 header: only its address changes. */
static __always_inline int rewrite(struct __sk_buff *skb, struct flow *f, int dst, const __u8 *to, __u16 to_port)
{
	__u8 *from = dst ? f->dst : f->src;
	__u16 from_port = dst ? f->dport : f->sport;
	__u32 csum = 0;
	__u64 mangled = 0;
	if (f->l4_off && f->proto == IPPROTO_TCP)
		csum = f->l4_off + 16;
	else if (f->l4_off && f->proto == IPPROTO_UDP) {
		csum = f->l4_off + 6;
		mangled = BPF_F_MARK_MANGLED_0; /* a zero UDP checksum (none, IPv4) stays zero */
	}
	if (!f->v6) {
		__u32 o, n;
		__builtin_memcpy(&o, from + 12, 4);
		__builtin_memcpy(&n, to + 12, 4);
		if (csum && bpf_l4_csum_replace(skb, csum, o, n, BPF_F_PSEUDO_HDR | mangled | 4))
			return -1;
		if (bpf_l3_csum_replace(skb, IP4_CSUM_OFF, o, n, 4))
			return -1;
		if (bpf_skb_store_bytes(skb, dst ? IP4_DST_OFF : IP4_SRC_OFF, &n, 4, 0))
			return -1;
	} else {
		__u8 o[16], n[16];
		__builtin_memcpy(o, from, 16);
		__builtin_memcpy(n, to, 16);
		if (csum) {
			__s64 d = bpf_csum_diff((__be32 *)o, 16, (__be32 *)n, 16, 0);
			if (d < 0 || bpf_l4_csum_replace(skb, csum, 0, (__u32)d, BPF_F_PSEUDO_HDR | mangled))
				return -1;
		}
		if (bpf_skb_store_bytes(skb, dst ? IP6_DST_OFF : IP6_SRC_OFF, n, 16, 0))
			return -1;
	}
	if (f->l4_off && from_port != to_port) {
		__u16 o = bpf_htons(from_port), n = bpf_htons(to_port);
		if (csum && bpf_l4_csum_replace(skb, csum, o, n, mangled | 2))
			return -1;
		if (bpf_skb_store_bytes(skb, f->l4_off + (dst ? 2 : 0), &n, 2, 0))
			return -1;
	}
	__builtin_memcpy(from, to, 16);
	if (dst)
		f->dport = to_port;
	else
		f->sport = to_port;
	count(CNT_SVC_NAT);
	return 0;
}

/* A pod's packet to a Service frontend: sent to a backend (the flow's, or for a new flow one picked at
 * random) and rewritten; `front` gets the frontend. 1 translated; 0 not a Service (or no backend:
 * kube-proxy answers); 2 the pod itself is the only backend (untranslated, kube-proxy hairpins it, and
 * a pod reaching itself is never subject to policy); -1 the rewrite failed. */
static __always_inline int service(struct __sk_buff *skb, struct flow *f, struct nat_value *front)
{
	struct ct_key nk = { .lport = f->sport, .rport = f->dport, .proto = f->proto };
	__builtin_memcpy(nk.local, f->src, 16);
	__builtin_memcpy(nk.remote, f->dst, 16);
	struct nat_value chosen;
	struct nat_value *known = bpf_map_lookup_elem(&cascade_nat, &nk);
	if (known) {
		__builtin_memcpy(&chosen, known, sizeof(chosen));
	} else {
		if (f->frag == FRAG_LATER)
			return 0;
		struct svc_key sk = { .port = f->dport, .proto = f->proto };
		__builtin_memcpy(sk.addr, f->dst, 16);
		struct svc_value *sv = bpf_map_lookup_elem(&cascade_services, &sk);
		if (!sv) {
			/* a NodePort on one of the node's own addresses */
			struct endpoint_key hk;
			__builtin_memcpy(hk.addr, f->dst, 16);
			struct ipcache_value *iv = bpf_map_lookup_elem(&cascade_hosts, &hk);
			if (!iv || iv->identity != CASCADE_ID_HOST)
				return 0;
			/* the zero address of the packet's family (IPv4: ::ffff:0.0.0.0) */
			__builtin_memset(sk.addr, 0, 16);
			if (!f->v6)
				sk.addr[10] = sk.addr[11] = 0xff;
			sv = bpf_map_lookup_elem(&cascade_services, &sk);
			if (!sv)
				return 0;
		}
		__u32 n = sv->count;
		if (n == 0)
			return 0;
		__u32 slot = bpf_get_prandom_u32() % n;
		struct backend_key bk = { .id = sv->id, .slot = slot };
		struct nat_value *b = bpf_map_lookup_elem(&cascade_backends, &bk);
		if (b && same_addr(b->addr, f->src)) {
			/* the pod is a backend of the Service it calls: another backend, if there is one */
			if (n == 1)
				return 2;
			bk.slot = slot + 1 == n ? 0 : slot + 1;
			b = bpf_map_lookup_elem(&cascade_backends, &bk);
		}
		if (!b)
			return 0;
		if (f->proto == IPPROTO_SCTP && b->port != f->dport)
			return 0;
		__builtin_memcpy(&chosen, b, sizeof(chosen));
		bpf_map_update_elem(&cascade_nat, &nk, &chosen, BPF_ANY);
		count(CNT_SVC_NEW);
	}
	__builtin_memcpy(front->addr, f->dst, 16);
	front->port = f->dport;
	if (rewrite(skb, f, 1, chosen.addr, chosen.port))
		return -1;
	return 1;
}

/* A packet passes; a reply of a translated flow gets its frontend back as its source first. */
static __always_inline int pass(struct __sk_buff *skb, struct flow *f, struct ct_key *ck, int revnat)
{
	if (!revnat)
		return TC_ACT_OK;
	struct nat_value *front = bpf_map_lookup_elem(&cascade_revnat, ck);
	if (front && rewrite(skb, f, 0, front->addr, front->port))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

static __always_inline int handle(struct __sk_buff *skb, int dir)
{
	/* a VLAN tag the kernel took off into the skb: no pod sends tagged frames */
	if (skb->vlan_present) {
		count(CNT_BAD_L2);
		return TC_ACT_SHOT;
	}
	struct flow f = {};
	int r = parse(skb, &f);
	__u32 ifindex = skb->ifindex;
	switch (r) {
	case P_IP:
		break;
	case P_ARP:
		/* a pod announces only its own IPv4 address (or probes with 0.0.0.0) */
		if (dir == DIR_EGRESS && !is_zero4(f.claimed) && !endpoint_on(f.claimed, ifindex))
			return spoofed();
		return TC_ACT_OK;
	case P_NDP:
		if (dir == DIR_EGRESS) {
			/* no pod is a router: router advertisements and redirects from pods are dropped */
			if (f.icmp_type == 134 || f.icmp_type == 137)
				return spoofed();
			if (!is_link_local6(f.src) && !is_zero(f.src) && !endpoint_on(f.src, ifindex))
				return spoofed();
			/* a neighbour advertisement claims only the pod's own (or link-local) address */
			if (f.icmp_type == 136 && !is_link_local6(f.claimed) && !endpoint_on(f.claimed, ifindex))
				return spoofed();
		}
		count(CNT_NDP);
		return TC_ACT_OK;
	case P_BAD_L2:
		count(CNT_BAD_L2);
		return TC_ACT_SHOT;
	case P_EXTHDRS:
		count(CNT_EXTHDRS);
		return TC_ACT_SHOT;
	case P_FRAG_BAD:
		count(CNT_FRAG_BAD);
		return TC_ACT_SHOT;
	default:
		count(CNT_MALFORMED);
		return TC_ACT_SHOT;
	}
	/* the endpoint is the packet's source when it leaves the pod, its destination when it enters */
	__u8 *local = dir == DIR_EGRESS ? f.src : f.dst;
	__u8 *remote = dir == DIR_EGRESS ? f.dst : f.src;

	/* a later fragment carries no L4 header: it takes its first fragment's protocol and ports */
	if (f.frag == FRAG_LATER) {
		struct frag_key fk = { .id = f.frag_id, .proto = f.frag_proto };
		__builtin_memcpy(fk.src, f.src, 16);
		__builtin_memcpy(fk.dst, f.dst, 16);
		struct frag_value *fv = bpf_map_lookup_elem(&cascade_frags, &fk);
		if (!fv) {
			count(CNT_FRAG_UNTRACKED);
			return TC_ACT_SHOT;
		}
		/* overlapping the L4 header of the first fragment (rewriting ports or flags) */
		if (f.frag_off < l4_min(fv->proto)) {
			count(CNT_FRAG_BAD);
			return TC_ACT_SHOT;
		}
		f.proto = fv->proto;
		f.sport = fv->sport;
		f.dport = fv->dport;
	}

	struct config *cfg = config();
	__u32 generation = cfg ? cfg->generation : 0;
	__u32 clock = cfg ? cfg->clock : 0;

	/* an ICMP error about a flow this endpoint has open and allowed passes with that flow */
	if (f.icmp_error) {
		struct ct_key rk = { .proto = f.iproto };
		int related = 1;
		if (same_addr(f.isrc, local)) {
			__builtin_memcpy(rk.local, f.isrc, 16);
			__builtin_memcpy(rk.remote, f.idst, 16);
			rk.lport = f.isport;
			rk.rport = f.idport;
		} else if (same_addr(f.idst, local)) {
			__builtin_memcpy(rk.local, f.idst, 16);
			__builtin_memcpy(rk.remote, f.isrc, 16);
			rk.lport = f.idport;
			rk.rport = f.isport;
		} else {
			related = 0;
		}
		struct ct_value *rc = related ? bpf_map_lookup_elem(&cascade_ct, &rk) : NULL;
		if (rc && rc->ifindex == ifindex && rc->verdict == VERDICT_ALLOW && rc->generation == generation) {
			count(CNT_ICMP_RELATED);
			return TC_ACT_OK;
		}
		/* otherwise judged by policy as any ICMP packet */
	}

	/* conntrack first: one entry per flow at this endpoint, found by both directions. While the
	 * generation has not moved, an entry is current without looking at the endpoint: one lookup. */
	struct ct_key ck = {
		.lport = dir == DIR_EGRESS ? f.sport : f.dport,
		.rport = dir == DIR_EGRESS ? f.dport : f.sport,
		.proto = f.proto,
	};
	__builtin_memcpy(ck.local, local, 16);
	__builtin_memcpy(ck.remote, remote, 16);
	struct ct_value *ct = bpf_map_lookup_elem(&cascade_ct, &ck);
	/* a pod's flow without an entry of its own may be to a Service: translated, then tracked and
	 * judged by its backend (established flows of other kinds never pay for this) */
	int translated = 0, svc_self = 0;
	struct nat_value front = {};
	if (!ct && dir == DIR_EGRESS && has_ports(f.proto)) {
		translated = service(skb, &f, &front);
		if (translated == 2) {
			translated = 0;
			svc_self = 1;
		}
		if (translated < 0) {
			count(CNT_MALFORMED);
			return TC_ACT_SHOT;
		}
		if (translated) {
			__builtin_memcpy(ck.remote, f.dst, 16);
			ck.rport = f.dport;
			ct = bpf_map_lookup_elem(&cascade_ct, &ck);
		}
	}
#ifdef CASCADE_BENCH_NEW_FLOWS
	ct = NULL; /* bench build only: every repeat is the first packet of a flow */
#endif
	/* an entry answers only on the interface it was judged on (the source binding, checked then) */
	if (ct && ct->ifindex != ifindex)
		ct = NULL;
	/* a denied flow's entry drops packets of its own direction only: the other direction may open
	 * the same 5-tuple as a flow of its own; a SYN on a closing connection opens a new one */
	if (ct && ct->verdict == VERDICT_DENY && ct->dir != dir)
		ct = NULL;
	if (ct && ct->closing && (f.tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN)
		ct = NULL;
	/* a reply of a translated flow, towards the pod: its source becomes the frontend again */
	int revnat = ct && ct->nat && dir == DIR_INGRESS && ct->dir == DIR_EGRESS;
	if (ct) {
		/* at most one write per flow and clock tick */
		if (ct->seen != clock)
			ct->seen = clock;
		if ((f.tcp_flags & (TCP_FIN | TCP_RST)) && !ct->closing)
			ct->closing = 1;
	}
	if (ct && ct->generation == generation) {
		count(CNT_CT_HIT);
		remember_fragment(&f);
		if (ct->verdict == VERDICT_DENY) {
			count(CNT_DENY);
			return TC_ACT_SHOT;
		}
		return pass(skb, &f, &ck, revnat);
	}

	/* the endpoint must own the local address on this interface: from a pod, any other source is
	 * spoofed; towards a pod, any other destination is not for it (default deny for unknown
	 * endpoints: an interface attached before the agent loaded its endpoint passes nothing) */
	struct endpoint_value *ep = endpoint_on(local, ifindex);
	if (!ep) {
		if (dir == DIR_EGRESS)
			return spoofed();
		count(CNT_NOT_ENDPOINT);
		return TC_ACT_SHOT;
	}
	/* a pod reaching itself (also through a Service it alone backs) is never subject to policy */
	if (same_addr(f.src, f.dst) || svc_self)
		return pass(skb, &f, &ck, revnat);
	if (ct && ct->revision == ep->revision) {
		ct->generation = generation;
		count(CNT_CT_HIT);
		remember_fragment(&f);
		if (ct->verdict == VERDICT_DENY) {
			count(CNT_DENY);
			return TC_ACT_SHOT;
		}
		return pass(skb, &f, &ck, revnat);
	}

	struct decision d = {};
	if (ep->flags & EP_FAIL_CLOSED) {
		/* not remembered in conntrack: the endpoint gets its rule set soon */
		d.verdict = VERDICT_DENY;
		count(CNT_DENY);
		report(&f, dir, &d, 1);
		return TC_ACT_SHOT;
	}
	/* a flow is judged in the direction of the packet that opened it (a reply re-judged after a
	 * policy change too): the remote is its peer, the port the destination port of that packet */
	int odir = ct ? ct->dir : dir;
	if (ep->flags & (odir == DIR_EGRESS ? EP_ENFORCE_EGRESS : EP_ENFORCE_INGRESS)) {
		judge(ep, odir, remote, f.proto, odir == DIR_EGRESS ? ck.rport : ck.lport, &d);
	} else {
		d.verdict = VERDICT_ALLOW; /* not enforced, but tracked: its replies pass the other direction */
		d.identity = identity_of(remote);
	}
	__u8 reason = ct ? 2 : 0;
	if (ct) {
		if (ct->verdict == VERDICT_DENY && d.verdict == VERDICT_DENY)
			reason = 0xff; /* still denied: reported when it was first denied */
		ct->revision = ep->revision;
		ct->generation = generation;
		ct->verdict = d.verdict;
		count(CNT_CT_REJUDGED);
	} else {
		struct ct_value nv = {
			.revision = ep->revision,
			.generation = generation,
			.dir = dir,
			.verdict = d.verdict,
			.closing = (f.tcp_flags & (TCP_FIN | TCP_RST)) ? 1 : 0,
			.nat = translated ? 1 : 0,
			.seen = clock,
			.ifindex = ifindex,
			.created_ns = bpf_ktime_get_ns(),
		};
		bpf_map_update_elem(&cascade_ct, &ck, &nv, BPF_ANY);
		if (translated)
			bpf_map_update_elem(&cascade_revnat, &ck, &front, BPF_ANY);
	}
	remember_fragment(&f);
	if (d.verdict == VERDICT_DENY) {
		count(CNT_DENY);
		if (reason != 0xff)
			report(&f, dir, &d, reason);
		return TC_ACT_SHOT;
	}
	count(CNT_ALLOW);
	if (ep->flags & EP_AUDIT_ALLOW)
		report(&f, dir, &d, reason);
	return pass(skb, &f, &ck, revnat);
}

SEC("tc")
int from_endpoint(struct __sk_buff *skb)
{
	return handle(skb, DIR_EGRESS);
}

SEC("tc")
int to_endpoint(struct __sk_buff *skb)
{
	return handle(skb, DIR_INGRESS);
}

/* Bench only (never attached): parses Ethernet + IP and returns, the floor that npm run bench
 * divides every per-packet figure by (this VM's speed swings several times over minutes). */
SEC("tc")
int bench_baseline(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_SHOT;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return TC_ACT_SHOT;
		return ip->protocol == 255 ? TC_ACT_SHOT : TC_ACT_OK;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return TC_ACT_SHOT;
		return ip6->nexthdr == 255 ? TC_ACT_SHOT : TC_ACT_OK;
	}
	return TC_ACT_OK;
}
