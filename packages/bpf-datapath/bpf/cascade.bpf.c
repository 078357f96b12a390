// SPDX-License-Identifier: GPL-2.0
/* The Cascade network-policy datapath: tc programs on an endpoint's host-side interface.
 * from_endpoint judges the pod's egress, to_endpoint its ingress. Per new flow: ipcache LPM for the
 * remote identity, then up to three LPM lookups per layer (identity, all-pods class, wildcard) in the
 * admin layer and, when it passes or misses, in the lower layer. Established flows hit conntrack. */
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
};

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

static __always_inline void judge(struct endpoint_value *ep, int dir, __u8 *remote, __u8 proto, __u16 port, struct decision *d)
{
	struct ipcache_key ik = { .prefixlen = 128 };
	__builtin_memcpy(ik.addr, remote, 16);
	struct ipcache_value *iv = bpf_map_lookup_elem(&cascade_ipcache, &ik);
	__u32 identity = iv ? iv->identity : CASCADE_ID_WORLD;
	d->identity = identity;
	d->rule = 0;
	d->precedence = 0;
	if (identity == CASCADE_ID_HOST) { /* a pod and its own node always talk */
		d->verdict = VERDICT_ALLOW;
		return;
	}
	__u32 admin = dir == DIR_INGRESS ? ep->tables[DIR_INGRESS][0] : ep->tables[DIR_EGRESS][0];
	__u32 lower = dir == DIR_INGRESS ? ep->tables[DIR_INGRESS][1] : ep->tables[DIR_EGRESS][1];
	struct policy_value *v = layer(admin, identity, proto, port);
	if (!v || v->verdict == VERDICT_PASS)
		v = layer(lower, identity, proto, port);
	if (!v) {
		d->verdict = VERDICT_ALLOW;
		return;
	}
	d->verdict = v->verdict == VERDICT_DENY ? VERDICT_DENY : VERDICT_ALLOW;
	d->rule = v->rule;
	d->precedence = v->precedence;
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
	/* the endpoint is the packet's source when it leaves the pod, its destination when it enters */
	struct endpoint_key ek;
	__u8 *local = dir == DIR_EGRESS ? f.src : f.dst;
	__u8 *remote = dir == DIR_EGRESS ? f.dst : f.src;
	__builtin_memcpy(ek.addr, local, 16);
	struct endpoint_value *ep = bpf_map_lookup_elem(&cascade_endpoints, &ek);
	if (!ep) {
		count(CNT_NOT_ENDPOINT);
		return TC_ACT_OK;
	}
	if (!(ep->flags & (dir == DIR_EGRESS ? EP_ENFORCE_EGRESS : EP_ENFORCE_INGRESS)))
		return TC_ACT_OK;
	/* a pod reaching itself is never subject to policy */
	if (same_addr(f.src, f.dst))
		return TC_ACT_OK;

	/* conntrack: our own entry for this flow, or the entry of the opposite direction for replies */
	struct ct_key ck = { .sport = f.sport, .dport = f.dport, .proto = f.proto, .dir = dir };
	__builtin_memcpy(ck.src, f.src, 16);
	__builtin_memcpy(ck.dst, f.dst, 16);
	struct ct_value *ct = bpf_map_lookup_elem(&cascade_ct, &ck);
	int reply = 0;
	if (!ct) {
		struct ct_key rk = { .sport = f.dport, .dport = f.sport, .proto = f.proto, .dir = dir ^ 1 };
		__builtin_memcpy(rk.src, f.dst, 16);
		__builtin_memcpy(rk.dst, f.src, 16);
		ct = bpf_map_lookup_elem(&cascade_ct, &rk);
		if (ct) {
			reply = 1;
			ck = rk;
		}
	}
	if (ct && ct->revision == ep->revision) {
		count(CNT_CT_HIT);
		return TC_ACT_OK;
	}

	struct decision d = {};
	int odir = reply ? dir ^ 1 : dir;
	if (ep->flags & EP_FAIL_CLOSED) {
		d.verdict = VERDICT_DENY;
		count(CNT_DENY);
		report(&f, dir, &d, 1);
		return TC_ACT_SHOT;
	}
	/* a reply is re-judged as the original flow: the remote was its destination */
	if (reply)
		judge(ep, odir, f.src, f.proto, f.sport, &d);
	else
		judge(ep, dir, remote, f.proto, f.dport, &d);
	if (d.verdict == VERDICT_DENY) {
		if (ct)
			bpf_map_delete_elem(&cascade_ct, &ck);
		count(CNT_DENY);
		report(&f, dir, &d, ct ? 2 : 0);
		return TC_ACT_SHOT;
	}
	if (ct) {
		ct->revision = ep->revision;
		count(CNT_CT_REJUDGED);
	} else {
		struct ct_value nv = { .revision = ep->revision, .created_ns = bpf_ktime_get_ns() };
		bpf_map_update_elem(&cascade_ct, &ck, &nv, BPF_ANY);
	}
	count(CNT_ALLOW);
	if (ep->flags & EP_AUDIT_ALLOW)
		report(&f, dir, &d, 0);
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
