/* The flow cache: an established flow's later packets answered before anything else is parsed.
 * (Step 0 of handle().) A per-CPU, direct-mapped table of slots (an array: its lookup is inlined,
 * no hashing helper, no lock), each holding one flow that conntrack answered on this CPU: the
 * endpoint's local and remote address, the ports, the protocol and the interface it was judged on,
 * with the config generation and clock of that answer. A packet whose slot matches all of them, in
 * the current generation and clock tick, passes on the word of that conntrack answer.
 *
 * What may fill a slot: a conntrack hit in the current generation of an allowed entry that is not
 * closing and not translated, for an unfragmented TCP or UDP packet without SYN, FIN or RST (fill()
 * below, called from handle()). A flow's first packet never fills one: a synthetic packet (netpol
 * trace) leaves no slot behind. What the cache never answers, and handle() judges as before: any
 * other packet shape (IPv4 options, IPv6 extension headers, fragments, ICMP, SCTP, VLAN, non-IP),
 * SYN/FIN/RST, denied or translated flows. What invalidates every slot: a generation bump (an
 * endpoint changed or left; the agent's restart) and the clock tick (every 10 s), so conntrack's
 * `seen` is refreshed once per tick and flow, and an entry the collector removed stops answering
 * within a tick. Per CPU, so a slot is never read while another CPU writes it. A colliding flow only
 * evicts a slot (its packets take handle()'s path).
 *
 * Its size is chosen at load time (bpfctl `load ... FLOW_SLOTS`, from the agent's memory budget and
 * the node's CPU count): the loader sets the map's max_entries and flow_slot_bits below, its own
 * read-only section, so the verifier sees the shift as a constant. FLOW_SLOT_BITS is the default. */
#ifndef CASCADE_FLOWCACHE_H
#define CASCADE_FLOWCACHE_H

#define FLOW_SLOT_BITS 14

/* log2 of cascade_flows' slots per CPU, written by the loader before load (8 to 16) */
const volatile __u32 flow_slot_bits SEC(".rodata.flowcache") = FLOW_SLOT_BITS;

struct flow_slot {
	__u64 local[2];
	__u64 remote[2];
	__u32 ports; /* local port | remote port << 16, each in network order */
	__u32 proto;
	__u32 ifindex;
	__u32 generation;
	__u32 clock;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_slot);
	__uint(max_entries, 1 << FLOW_SLOT_BITS);
} cascade_flows SEC(".maps");

static __always_inline __u32 flow_slot_of(__u64 l1, __u64 r1, __u64 r0, __u32 ports, __u32 proto)
{
	__u64 x = (l1 ^ (r1 * 0x9e3779b97f4a7c15ULL) ^ r0 ^ ((__u64)ports << 8) ^ proto) * 0xff51afd7ed558ccdULL;
	return (__u32)(x >> (64 - flow_slot_bits));
}

/* TC_ACT_OK when the flow cache answers the packet, -1 when handle() must judge it. */
static __always_inline int flow_cached(struct __sk_buff *skb, int dir)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	__u64 s0, s1, d0, d1;
	__u8 proto;
	__u8 *l4;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return -1;
		/* no options, not a fragment */
		if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)))
			return -1;
		proto = ip->protocol;
		s0 = d0 = 0;
		s1 = 0xffff0000ULL | ((__u64)ip->saddr << 32);
		d1 = 0xffff0000ULL | ((__u64)ip->daddr << 32);
		l4 = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return -1;
		proto = ip6->nexthdr; /* an extension header is no TCP or UDP here */
		__u64 *a = (__u64 *)&ip6->saddr;
		s0 = a[0];
		s1 = a[1];
		d0 = a[2];
		d1 = a[3];
		l4 = (void *)(ip6 + 1);
	} else {
		return -1;
	}
	if (proto == IPPROTO_TCP) {
		if ((void *)(l4 + 20) > end || (l4[13] & (TCP_SYN | TCP_FIN | TCP_RST)))
			return -1;
	} else if (proto != IPPROTO_UDP || (void *)(l4 + 8) > end) {
		return -1;
	}
#ifdef CASCADE_BENCH_FAST_PARSE_ONLY /* bench build only: the stages below removed, to time them */
	return TC_ACT_OK;
#endif
	__u32 raw = *(__u32 *)l4; /* source port | destination port << 16, network order each */
	__u64 l0 = s0, l1 = s1, r0 = d0, r1 = d1;
	__u32 ports = raw;
	if (dir == DIR_INGRESS) {
		l0 = d0;
		l1 = d1;
		r0 = s0;
		r1 = s1;
		ports = (raw >> 16) | (raw << 16);
	}
	__u32 idx = flow_slot_of(l1, r1, r0, ports, proto);
	struct flow_slot *s = bpf_map_lookup_elem(&cascade_flows, &idx);
	if (!s || s->local[1] != l1 || s->remote[1] != r1 || s->local[0] != l0 || s->remote[0] != r0 ||
	    s->ports != ports || s->proto != proto || s->ifindex != skb->ifindex)
		return -1;
#ifndef CASCADE_BENCH_FAST_NO_CONFIG /* bench build only: the stage removed, to time it */
	struct config *cfg = config();
	if (!cfg || s->generation != cfg->generation || s->clock != cfg->clock)
		return -1;
#endif
#ifndef CASCADE_BENCH_FAST_NO_COUNT /* bench build only: the stage removed, to time it */
	count(CNT_CT_HIT);
#endif
	return TC_ACT_OK;
}

/* After a conntrack hit that passes the packet: remember the flow in this CPU's slot when the cache
 * may answer its next packets (see above). */
static __always_inline void flow_fill(struct flow *f, struct ct_key *ck, struct ct_view *ct, __u32 ifindex,
				      __u32 generation, __u32 clock)
{
	/* only what flow_cached() can match: IPv4 without options, IPv6 without extension headers */
	if (ct->verdict != VERDICT_ALLOW || ct->closing || ct->nat || f->frag != FRAG_NONE ||
	    f->l4_off != ETH_HLEN + (f->v6 ? 40 : 20) || (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP) ||
	    (f->tcp_flags & (TCP_SYN | TCP_FIN | TCP_RST)))
		return;
	const __u64 *l = (const __u64 *)ck->local;
	const __u64 *r = (const __u64 *)ck->remote;
	__u32 ports = (__u32)bpf_htons(ck->lport) | ((__u32)bpf_htons(ck->rport) << 16);
	__u32 idx = flow_slot_of(l[1], r[1], r[0], ports, ck->proto);
	struct flow_slot *s = bpf_map_lookup_elem(&cascade_flows, &idx);
	if (!s)
		return;
	s->local[0] = l[0];
	s->local[1] = l[1];
	s->remote[0] = r[0];
	s->remote[1] = r[1];
	s->ports = ports;
	s->proto = ck->proto;
	s->ifindex = ifindex;
	s->generation = generation;
	s->clock = clock;
	count(CNT_FLOW_CACHE_FILL);
}

#endif
