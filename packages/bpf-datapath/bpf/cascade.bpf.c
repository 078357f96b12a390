// SPDX-License-Identifier: GPL-2.0
/* The Cascade network-policy datapath: tc programs on an endpoint's host-side interface.
 * from_endpoint judges the pod's egress, to_endpoint its ingress. This file holds the two entry
 * points and handle(), which reads top to bottom as a packet's path; each stage is a header:
 *
 *   maps.h        the maps and the count()/config() accessors every stage uses
 *   addr.h        address predicates the stages share
 * and a packet meets them in this order:
 *   1 parse.h     Ethernet, IPv4/IPv6 with extension headers, fragments, L4 ports, ICMP errors
 *   2 endpoint.h  not an IP packet (not_ip): ARP/NDP claims checked from a pod, the rest dropped
 *   3 fragments.h a later fragment takes its first fragment's protocol and ports
 *   4 conntrack.h an ICMP error passes with the allowed flow it reports about (cascade_icmp_related),
 *                 cut to the headers a stack reads (cascade_icmp_trim);
 *                 then (here) a current conntrack entry answers in one lookup
 *   5 endpoint.h  without an entry, the endpoint must own the local address on this interface
 *                 (spoofing, unknown endpoints), before anything is created for the packet
 *   6 services.h  a pod's new flow to a Service frontend is translated to a backend
 *   7 policy.h    the remote identity, the verdict cache, on a miss the two rule-set layers
 *   8 conntrack.h an allowed new flow is tracked (within its endpoint's budget); a denied one leaves
 *                 no state
 *   9 events.h    denials (and audited allows) into the ring the agent drains, within the
 *                 endpoint's event budget
 *
 * Per packet: the endpoint (hash) and its conntrack entry (LRU hash, one per flow and endpoint,
 * found by both directions). A packet without a current entry: the remote identity (an exact hash
 * for host addresses, the LPM trie only for CIDRs), then the verdict cache; only a cache miss walks
 * the rule sets, so the per-packet cost does not depend on the number of rules. */
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

#include "maps.h"
#include "addr.h"
#include "parse.h"
#include "endpoint.h"
#include "fragments.h"
#include "conntrack.h"
#include "flowcache.h"
#include "services.h"
#include "policy.h"
#include "events.h"

#if defined(CASCADE_BENCH_UNIQUE) || defined(CASCADE_BENCH_FLOOD)
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} bench_seq SEC(".maps");

/* bench builds only: the key of this repeat marked as a flow of its own (its remote port and three
 * bytes of its remote address: this CPU's count of repeats and the CPU, so a run that moves to
 * another CPU does not meet its own keys again; the packet is not touched) */
static __always_inline void bench_new_flow(struct ct_key *ck)
{
	__u32 zero = 0;
	__u32 *n = bpf_map_lookup_elem(&bench_seq, &zero);
	if (n) {
		*n += 1;
		ck->rport ^= (__u16)*n;
		ck->remote[0] ^= (__u8)(*n >> 16);
		ck->remote[1] ^= (__u8)(*n >> 24);
		ck->remote[2] ^= (__u8)bpf_get_smp_processor_id();
	}
}
#endif

static __always_inline int handle(struct __sk_buff *skb, int dir)
{
	/* a VLAN tag the kernel took off into the skb: no pod sends tagged frames */
	if (skb->vlan_present) {
		count(CNT_BAD_L2);
		return TC_ACT_SHOT;
	}
	/* an established flow's later packet that this CPU's flow cache answers (flowcache.h) */
#ifndef CASCADE_BENCH_NO_FLOW_CACHE /* bench build only: the stage removed, to time it */
	if (flow_cached(skb, dir) == TC_ACT_OK)
		return TC_ACT_OK;
#endif
	struct flow f = {};
	int r = parse(skb, &f);
	__u32 ifindex = skb->ifindex;
	if (r != P_IP)
		return not_ip(r, &f, dir, ifindex);

	/* the endpoint is the packet's source when it leaves the pod, its destination when it enters */
	__u8 *local = dir == DIR_EGRESS ? f.src : f.dst;
	__u8 *remote = dir == DIR_EGRESS ? f.dst : f.src;

	if (f.frag == FRAG_LATER && later_fragment(&f))
		return TC_ACT_SHOT;

	struct config *cfg = config();
	__u32 generation = cfg ? cfg->generation : 0;
	__u32 clock = cfg ? cfg->clock : 0;

	/* an ICMP error about a flow this endpoint has open and allowed passes with that flow, and only as
	 * errors travel (conntrack.h cascade_icmp_related); any other error is judged by policy as any
	 * ICMP packet */
	if (f.icmp_error && cascade_icmp_related(&f, dir, ifindex, generation, skb->len)) {
		count(CNT_ICMP_RELATED);
		int cut = cascade_icmp_trim(skb, f.l4_off, f.v6);
		if (cut < 0)
			return TC_ACT_SHOT; /* cut but not made whole: never a broken packet */
		if (cut)
			count(CNT_ICMP_TRIMMED);
		return TC_ACT_OK;
	}

	/* conntrack first: one entry per allowed flow at this endpoint, found by both directions. While
	 * the generation has not moved, an entry is current without looking at the endpoint: one lookup. */
	struct ct_key ck __attribute__((aligned(8))) = {
		.lport = dir == DIR_EGRESS ? f.sport : f.dport,
		.rport = dir == DIR_EGRESS ? f.dport : f.sport,
		.proto = f.proto,
	};
	__builtin_memcpy(ck.local, local, 16);
	__builtin_memcpy(ck.remote, remote, 16);
#ifdef CASCADE_BENCH_FLOOD
	/* bench build only: every repeat is a new flow of the same endpoint, through the real budget
	 * and quota: a pod flooding new flows */
	bench_new_flow(&ck);
#endif
	/* ct: what the packet reads of the flow's entry, copied stable, and where it is (conntrack.h) */
	struct ct_view *ctv = ct_scratch();
	if (!ctv)
		return TC_ACT_SHOT;
#ifndef CASCADE_BENCH_NO_CT_LOOKUP /* bench build only: the stage removed, to time it */
	struct ct_view *ct = ct_find(&ck, ctv) ? ctv : NULL;
#else
	struct ct_view *ct = NULL;
#endif
	/* an entry answers only on the interface it was judged on (the source binding, checked then) */
	if (ct && ct->ifindex != ifindex)
		ct = NULL;
	/* the endpoint must own the local address on this interface: from a pod, any other source is
	 * spoofed; towards a pod, any other destination is not for it (default deny for unknown
	 * endpoints: an interface attached before the agent loaded its endpoint passes nothing). Checked
	 * before anything is created for a packet without an entry (no NAT, conntrack or budget state
	 * in a victim's name); a current entry was checked when it was made. */
	struct endpoint_value *ep = NULL;
	if (!ct) {
		ep = endpoint_on(local, ifindex);
		if (!ep)
			return unbound(dir, local);
	}
	/* a pod's flow without an entry of its own may be to a Service: translated, then tracked and
	 * judged by its backend (established flows of other kinds never pay for this) */
	int translated = 0, svc_self = 0;
	struct nat_value front = {}, to = {};
	if (!ct && dir == DIR_EGRESS && has_ports(f.proto)) {
		translated = service(skb, &f, &front, &to);
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
			ct = ct_find(&ck, ctv) ? ctv : NULL;
			if (ct && ct->ifindex != ifindex)
				ct = NULL;
		}
	}
#ifdef CASCADE_BENCH_NEW_FLOWS
	ct = NULL; /* bench build only: every repeat is the first packet of a flow */
#ifdef CASCADE_BENCH_UNIQUE
	/* bench build only: and of a flow of its own (the conntrack insert is an insert, not a rewrite of
	 * the previous repeat's entry) */
	bench_new_flow(&ck);
#endif
#endif
	/* an entry denied by a re-judgement drops packets of its own direction only: the other direction
	 * may open the same 5-tuple as a flow of its own; a SYN on a closing connection opens a new one */
	if (ct && ct->verdict == VERDICT_DENY && ct->dir != dir)
		ct = NULL;
	if (ct && ct->closing && (f.tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN)
		ct = NULL;
	/* a reply of a translated flow, towards the pod: its source becomes the frontend again */
	int revnat = ct && ct->nat && dir == DIR_INGRESS && ct->dir == DIR_EGRESS;
	if (ct) {
		/* at most one write per flow and clock tick: its slot is looked up again only then */
		int closing = (f.tcp_flags & (TCP_FIN | TCP_RST)) && !ct->closing;
		if (ct->seen != clock || closing)
			ct_touch(ct, clock, closing);
		if (closing)
			ct->closing = 1;
	}
	if (ct && ct->generation == generation) {
		count(CNT_CT_HIT);
		if (ct->verdict == VERDICT_DENY) {
			count(CNT_DENY);
			return TC_ACT_SHOT;
		}
		remember_fragment(&f);
		flow_fill(&f, &ck, ct, ifindex, generation, clock);
		return pass(skb, &f, &ck, revnat);
	}

	if (!ep) {
		ep = endpoint_on(local, ifindex);
		if (!ep)
			return unbound(dir, local);
	}
	/* a pod reaching itself (also through a Service it alone backs) is never subject to policy */
	if (same_addr(f.src, f.dst) || svc_self)
		return pass(skb, &f, &ck, revnat);
	if (ct && ct->revision == ep->revision) {
		ct_refresh(ct, generation);
		count(CNT_CT_HIT);
		if (ct->verdict == VERDICT_DENY) {
			count(CNT_DENY);
			return TC_ACT_SHOT;
		}
		remember_fragment(&f);
		flow_fill(&f, &ck, ct, ifindex, generation, clock);
		return pass(skb, &f, &ck, revnat);
	}

	struct decision d = {};
	if (ep->flags & EP_FAIL_CLOSED) {
		/* not remembered in conntrack: the endpoint gets its rule set soon */
		d.verdict = VERDICT_DENY;
		count(CNT_DENY);
		report(ep, clock, &f, dir, &d, 1, NULL);
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
	/* a new flow of an endpoint that staged policies would judge otherwise: judged by those too, never
	 * enforced; where the two differ the flow's event says so (established packets never get here) */
	struct decision sd = {};
	int staged_differs = 0;
#ifndef CASCADE_BENCH_NO_STAGED /* bench build only: the step removed, to time what it costs */
	if (!ct && (ep->flags & EP_STAGED) && (ep->flags & (odir == DIR_EGRESS ? EP_ENFORCE_EGRESS : EP_ENFORCE_INGRESS))) {
		staged_differs = judge_staged(local, odir, &d, f.proto, odir == DIR_EGRESS ? ck.rport : ck.lport, &sd);
		if (staged_differs)
			count(CNT_STAGED_DIFFER);
	}
#endif
	__u8 reason = ct ? 2 : 0;
	if (ct) {
		if (ct->verdict == VERDICT_DENY && d.verdict == VERDICT_DENY)
			reason = 0xff; /* still denied: reported when it was first denied */
		ct_rejudge(ct, ep->revision, generation, d.verdict);
		count(CNT_CT_REJUDGED);
	} else if (d.verdict == VERDICT_ALLOW) {
		/* a new allowed flow is tracked within its endpoint's budget of new flows (the node's maps
		 * are shared); over it the flow is dropped. A denied new flow leaves no state at all. */
#ifndef CASCADE_BENCH_NEW_FLOWS
		if (!take_token(&ep->flow_tokens, &ep->flow_second, clock, FLOWS_PER_SEC, FLOWS_BURST)) {
			count(CNT_FLOW_BUDGET);
			return TC_ACT_SHOT;
		}
		/* and within its quota of conntrack entries: the table is shared, a full set evicts */
		if (!take_ct_place(ck.local)) {
			count(CNT_CT_QUOTA);
			return TC_ACT_SHOT;
		}
#else
		/* bench build: every repeat is a new flow of one endpoint; the budget is timed, never refused */
		if (!take_token(&ep->flow_tokens, &ep->flow_second, clock, FLOWS_PER_SEC, FLOWS_BURST))
			ep->flow_tokens = FLOWS_BURST;
#ifndef CASCADE_BENCH_NO_CT_QUOTA /* bench build only: the stage removed, to time it */
		(void)take_ct_place(ck.local); /* timed, never refused */
#endif
#endif
#ifndef CASCADE_BENCH_NO_TRACK /* bench build only: the stage removed, to time it */
		track(&ck, dir, &f, ep->revision, generation, clock, ifindex, translated ? &front : NULL,
		      translated ? &to : NULL);
#endif
	}
	if (d.verdict == VERDICT_DENY) {
		count(CNT_DENY);
		if (reason != 0xff)
			report(ep, clock, &f, dir, &d, reason, staged_differs ? &sd : NULL);
		return TC_ACT_SHOT;
	}
	remember_fragment(&f);
	count(CNT_ALLOW);
	if ((ep->flags & EP_AUDIT_ALLOW) || staged_differs)
		report(ep, clock, &f, dir, &d, reason, staged_differs ? &sd : NULL);
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
