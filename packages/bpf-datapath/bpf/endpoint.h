/* Endpoint and source checks: which endpoint owns an address on this interface (the
 * binding that stops spoofing; an unknown endpoint passes nothing), and what a pod may say at L2
 * (ARP and NDP claim only its own addresses; no pod is a router). (Steps 2 and 5 of handle().) */
#ifndef CASCADE_ENDPOINT_H
#define CASCADE_ENDPOINT_H

/* The endpoint that owns addr on this interface, or NULL: the binding that stops spoofing. */
static __always_inline struct endpoint_value *endpoint_on(const __u8 *addr, __u32 ifindex)
{
	struct endpoint_key ek;
	__builtin_memcpy(ek.addr, addr, 16);
	struct endpoint_value *ep = bpf_map_lookup_elem(&cascade_endpoints, &ek);
	return ep && ep->ifindex == ifindex ? ep : NULL;
}

/* An address on this node's link: one of the node's own (reserved identity host) or a pod of this
 * node (an endpoint, on any of its interfaces). */
static __always_inline int on_link(const __u8 *addr)
{
	struct endpoint_key k;
	__builtin_memcpy(k.addr, addr, 16);
	struct ipcache_value *iv = bpf_map_lookup_elem(&cascade_hosts, &k);
	if (iv && iv->identity == CASCADE_ID_HOST)
		return 1;
	return bpf_map_lookup_elem(&cascade_endpoints, &k) != NULL;
}

/* Takes one token of an endpoint's budget (tokens refilled `rate` per second of `clock`, at most
 * `burst`): 1, or 0 when it has none left. The value is the endpoint's own map value (no other
 * lookup); concurrent CPUs may race on it, which only makes the bound approximate. */
static __always_inline int take_token(__u32 *tokens, __u32 *second, __u32 clock, __u32 rate, __u32 burst)
{
	/* `second` holds the clock + 1 of the last refill: 0 (as the agent writes it) is a full bucket */
	__u32 now = clock + 1;
	if (*second != now) {
		__u64 t = *second ? *tokens + (__u64)(now - *second) * rate : burst;
		*tokens = t > burst ? burst : (__u32)t;
		*second = now;
	}
	if (!*tokens)
		return 0;
	*tokens -= 1;
	return 1;
}

static __always_inline int spoofed(void)
{
	count(CNT_SPOOFED);
	return TC_ACT_SHOT;
}

/* From a pod, an address it does not own (its source, or what its ARP/NDP claims), dropped either
 * way and counted by whose it is: spoofing when it is someone else's (an endpoint of this node on
 * another interface, or a pod or node the host table knows); otherwise nobody's yet, which is what a
 * new pod sends before the agent has bound its interface (a restarted pod's announcements and first
 * packets from its new address), or a made-up address, counted apart so that the spoofing counter
 * (and the alert on it) means spoofing. */
static __always_inline int not_own(const __u8 *addr)
{
	struct endpoint_key k;
	__builtin_memcpy(k.addr, addr, 16);
	if (bpf_map_lookup_elem(&cascade_endpoints, &k) || bpf_map_lookup_elem(&cascade_hosts, &k))
		return spoofed();
	count(CNT_UNBOUND_SOURCE);
	return TC_ACT_SHOT;
}

/* A packet whose local address is no endpoint on this interface: from a pod its source is not its
 * own; towards a pod it is not for it (an unknown endpoint passes nothing). */
static __always_inline int unbound(int dir, const __u8 *local)
{
	if (dir == DIR_EGRESS)
		return not_own(local);
	count(CNT_NOT_ENDPOINT);
	return TC_ACT_SHOT;
}

/* From a pod, neighbour discovery speaks only for the pod: its source is its own or a link-local
 * address (or the unspecified one, where `unspecified` allows it: duplicate address detection), and
 * a neighbour advertisement claims only its own address, or the link-local address it sends from
 * (the agent does not know pods' link-local addresses: one pod must not claim another's). The
 * address that is not the pod's, or NULL when it speaks for itself. */
static __always_inline const __u8 *ndp_foreign(struct flow *f, __u32 ifindex, int unspecified)
{
	if (!is_link_local6(f->src) && !(unspecified && is_zero(f->src)) && !endpoint_on(f->src, ifindex))
		return f->src;
	if (f->icmp_type == 136 && !endpoint_on(f->claimed, ifindex) &&
	    !(is_link_local6(f->claimed) && same_addr(f->claimed, f->src)))
		return f->claimed;
	return NULL;
}

/* What is not an IP packet to judge (parse() said so): ARP and NDP pass with their claims checked
 * from a pod, everything else is counted by its kind and dropped. */
static __always_inline int not_ip(int r, struct flow *f, int dir, __u32 ifindex)
{
	switch (r) {
	case P_ARP:
		/* a pod announces only its own IPv4 address (or probes with 0.0.0.0) */
		if (dir == DIR_EGRESS && !is_zero4(f->claimed) && !endpoint_on(f->claimed, ifindex))
			return not_own(f->claimed);
		return TC_ACT_OK;
	case P_NDP:
		if (dir == DIR_EGRESS) {
			/* no pod is a router: router advertisements and redirects from pods are dropped */
			if (f->icmp_type == 134 || f->icmp_type == 137)
				return spoofed();
			const __u8 *foreign = ndp_foreign(f, ifindex, 1);
			if (foreign)
				return not_own(foreign);
		}
		count(CNT_NDP);
		return TC_ACT_OK;
	case P_NDP_UNICAST:
		/* unicast NUD between neighbours on the link: the node and its pods. From a pod: to the
		 * node or a pod of this node, claiming only its own addresses; towards a pod: addressed to
		 * it. Hop limit 255 already proves the sender is on the link. Anywhere else: dropped. */
		if (dir == DIR_EGRESS) {
			const __u8 *foreign = ndp_foreign(f, ifindex, 0);
			if (foreign)
				return not_own(foreign);
			if (!on_link(f->dst)) {
				count(CNT_NDP_REFUSED);
				return TC_ACT_SHOT;
			}
		} else if (!endpoint_on(f->dst, ifindex)) {
			count(CNT_NDP_REFUSED);
			return TC_ACT_SHOT;
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
}

#endif
