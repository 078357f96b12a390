/* Services translation: a pod's new flow to a ClusterIP or NodePort frontend is sent to a
 * backend (kept per flow in cascade_nat) and rewritten, checksums kept right; replies get their
 * frontend back (cascade_revnat) when they pass. Translation grants nothing: the flow is judged
 * against the backend it goes to. Runs only for a pod's egress packet without a conntrack entry. (Step 6 of handle().) */
#ifndef CASCADE_SERVICES_H
#define CASCADE_SERVICES_H

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
 * random) and rewritten; `front` gets the frontend, `to` the backend. 1 translated; 0 not a Service (or no backend:
 * kube-proxy answers); 2 the pod itself is the only backend (untranslated, kube-proxy hairpins it, and
 * a pod reaching itself is never subject to policy); -1 the rewrite failed. */
static __always_inline int service(struct __sk_buff *skb, struct flow *f, struct nat_value *front, struct nat_value *to)
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
		/* written with the flow's conntrack entry once it is allowed (conntrack.h track()): a denied
		 * or spoofed flow leaves no NAT state in the node-wide map */
		count(CNT_SVC_NEW);
	}
	__builtin_memcpy(front->addr, f->dst, 16);
	front->port = f->dport;
	__builtin_memcpy(to, &chosen, sizeof(chosen));
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

#endif
