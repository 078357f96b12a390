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

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct verdict_key);
	__type(value, struct verdict_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
} cascade_verdicts SEC(".maps");

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

struct flow {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;
	__u16 dport; /* host order */
	__u8 proto;
	__u8 tcp_flags;
};

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&cascade_counters, &idx);
	if (c)
		*c += 1;
}

static __always_inline void v4mapped(__u8 *out, __u32 addr)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &addr, 4);
}

/* Parses Ethernet + IPv4/IPv6 + the L4 ports. Returns 0 ok, 1 not IP (pass), -1 malformed (drop). */
static __always_inline int parse(struct __sk_buff *skb, struct flow *f)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	__u16 proto = eth->h_proto;
	void *l4;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return -1;
		if (ip->ihl < 5)
			return -1;
		v4mapped(f->src, ip->saddr);
		v4mapped(f->dst, ip->daddr);
		f->proto = ip->protocol;
		/* later fragments carry no ports: judged with port 0 */
		if (ip->frag_off & bpf_htons(0x1fff)) {
			f->sport = f->dport = 0;
			return 0;
		}
		l4 = (void *)ip + ip->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return -1;
		__builtin_memcpy(f->src, &ip6->saddr, 16);
		__builtin_memcpy(f->dst, &ip6->daddr, 16);
		f->proto = ip6->nexthdr; /* extension headers are not walked: judged as that protocol */
		l4 = (void *)(ip6 + 1);
	} else {
		return 1;
	}
	f->sport = f->dport = 0;
	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP || f->proto == IPPROTO_SCTP) {
		__u16 *ports = l4;
		if ((void *)(ports + 2) > end)
			return -1;
		f->sport = bpf_ntohs(ports[0]);
		f->dport = bpf_ntohs(ports[1]);
		/* TCP flags when the header is there (a shorter one is judged by its ports alone) */
		__u8 *tcp = l4;
		if (f->proto == IPPROTO_TCP && (void *)(tcp + 14) <= end)
			f->tcp_flags = tcp[13];
	}
	return 0;
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

static __always_inline int handle(struct __sk_buff *skb, int dir)
{
	struct flow f = {};
	int r = parse(skb, &f);
	if (r > 0)
		return TC_ACT_OK;
	if (r < 0) {
		count(CNT_MALFORMED);
		return TC_ACT_SHOT;
	}
	/* a pod reaching itself is never subject to policy */
	if (same_addr(f.src, f.dst))
		return TC_ACT_OK;
	/* the endpoint is the packet's source when it leaves the pod, its destination when it enters */
	__u8 *local = dir == DIR_EGRESS ? f.src : f.dst;
	__u8 *remote = dir == DIR_EGRESS ? f.dst : f.src;

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
#ifdef CASCADE_BENCH_NEW_FLOWS
	ct = NULL; /* bench build only: every repeat is the first packet of a flow */
#endif
	struct config *cfg = config();
	__u32 generation = cfg ? cfg->generation : 0;
	__u32 clock = cfg ? cfg->clock : 0;
	/* a denied flow's entry drops packets of its own direction only: the other direction may open
	 * the same 5-tuple as a flow of its own; a SYN on a closing connection opens a new one */
	if (ct && ct->verdict == VERDICT_DENY && ct->dir != dir)
		ct = NULL;
	if (ct && ct->closing && (f.tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN)
		ct = NULL;
	if (ct) {
		/* at most one write per flow and clock tick */
		if (ct->seen != clock)
			ct->seen = clock;
		if ((f.tcp_flags & (TCP_FIN | TCP_RST)) && !ct->closing)
			ct->closing = 1;
	}
	if (ct && ct->generation == generation) {
		count(CNT_CT_HIT);
		if (ct->verdict == VERDICT_DENY) {
			count(CNT_DENY);
			return TC_ACT_SHOT;
		}
		return TC_ACT_OK;
	}

	struct endpoint_key ek;
	__builtin_memcpy(ek.addr, local, 16);
	struct endpoint_value *ep = bpf_map_lookup_elem(&cascade_endpoints, &ek);
	if (!ep) {
		count(CNT_NOT_ENDPOINT);
		return TC_ACT_OK;
	}
	if (ct && ct->revision == ep->revision) {
		ct->generation = generation;
		count(CNT_CT_HIT);
		if (ct->verdict == VERDICT_DENY) {
			count(CNT_DENY);
			return TC_ACT_SHOT;
		}
		return TC_ACT_OK;
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
			.seen = clock,
			.created_ns = bpf_ktime_get_ns(),
		};
		bpf_map_update_elem(&cascade_ct, &ck, &nv, BPF_ANY);
	}
	if (d.verdict == VERDICT_DENY) {
		count(CNT_DENY);
		if (reason != 0xff)
			report(&f, dir, &d, reason);
		return TC_ACT_SHOT;
	}
	count(CNT_ALLOW);
	if (ep->flags & EP_AUDIT_ALLOW)
		report(&f, dir, &d, reason);
	return TC_ACT_OK;
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
