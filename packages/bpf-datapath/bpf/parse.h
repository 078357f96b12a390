/* Packet parsing for the Cascade datapath: Ethernet, IPv4 (options), IPv6 with its extension-header
 * chain walked to the real upper layer (at most MAX_EXTHDRS), fragments (first / later, id, offset),
 * L4 ports and TCP flags, an ICMP error's embedded flow, ARP's sender address and NDP's target. Every
 * read is bounds-checked against the packet; anything the policy cannot judge is classified, never
 * guessed (see the P_* results). Included once, by cascade.bpf.c. */
#ifndef CASCADE_PARSE_H
#define CASCADE_PARSE_H

struct flow {
	/* addresses first: 8-byte aligned for same_addr */
	__u8 src[16];
	__u8 dst[16];
	/* an ICMP error's embedded flow (the packet it reports on), when icmp_error is set */
	__u8 isrc[16];
	__u8 idst[16];
	/* ARP: the sender protocol address; NDP: the target address */
	__u8 claimed[16];
	__u32 frag_id;
	__u16 sport;
	__u16 dport; /* host order */
	__u16 isport;
	__u16 idport;
	__u16 frag_off; /* a later fragment's offset in bytes */
	__u8 proto;
	__u8 tcp_flags;
	__u8 frag;       /* FRAG_NONE, FRAG_FIRST, FRAG_LATER */
	__u8 frag_proto; /* IPv4 protocol or the IPv6 fragment header's next header: the fragment key */
	__u8 icmp_type;
	__u8 hop_limit;
	__u8 icmp_error;
	__u8 iproto;
	__u8 v6;
	__u8 pad0;
	__u16 l4_off; /* the L4 header's offset (0 for a later fragment): Service translation rewrites there */
} __attribute__((aligned(8)));

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

#define FRAG_NONE 0
#define FRAG_FIRST 1
#define FRAG_LATER 2

/* parse results */
#define P_IP 0        /* an IP packet to judge */
#define P_ARP 1       /* ARP: its sender address is checked from a pod */
#define P_NDP 2       /* IPv6 neighbour discovery / MLD: passes (source checked from a pod) */
#define P_NDP_UNICAST 3 /* a neighbour solicitation/advertisement to a unicast address (NUD): on-link only */
#define P_MALFORMED -1
#define P_BAD_L2 -2   /* an ethertype other than IPv4, IPv6, ARP */
#define P_EXTHDRS -3  /* too many IPv6 extension headers */
#define P_FRAG_BAD -4 /* a first fragment without its full L4 header */

#define IPPROTO_ICMPV6_ 58
#define NEXTHDR_HOP 0
#define NEXTHDR_ROUTING 43
#define NEXTHDR_FRAGMENT 44
#define NEXTHDR_AUTH 51
#define NEXTHDR_DEST 60

static __always_inline void v4mapped(__u8 *out, __u32 addr)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &addr, 4);
}

/* the smallest L4 header that carries what the policy reads (ports, TCP flags) */
static __always_inline __u32 l4_min(__u8 proto)
{
	return proto == IPPROTO_TCP ? 20 : proto == IPPROTO_UDP ? 8 : proto == IPPROTO_SCTP ? 12 : 0;
}

static __always_inline int has_ports(__u8 proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP;
}

/* An ICMP error's embedded packet (IPv4 or IPv6 header + the first 8 bytes of its L4 header). */
static __always_inline void parse_embedded(struct flow *f, void *inner, void *end, int v6)
{
	__u8 proto;
	void *l4;
	if (v6) {
		struct ipv6hdr *ip6 = inner;
		if ((void *)(ip6 + 1) > end)
			return;
		__builtin_memcpy(f->isrc, &ip6->saddr, 16);
		__builtin_memcpy(f->idst, &ip6->daddr, 16);
		proto = ip6->nexthdr;
		l4 = (void *)(ip6 + 1);
	} else {
		struct iphdr *ip = inner;
		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return;
		v4mapped(f->isrc, ip->saddr);
		v4mapped(f->idst, ip->daddr);
		proto = ip->protocol;
		l4 = inner + ip->ihl * 4;
	}
	f->isport = f->idport = 0;
	if (has_ports(proto)) {
		__u16 *ports = l4;
		if ((void *)(ports + 2) > end)
			return;
		f->isport = bpf_ntohs(ports[0]);
		f->idport = bpf_ntohs(ports[1]);
	}
	f->iproto = proto;
	f->icmp_error = 1;
}

/* Parses Ethernet + IPv4/IPv6 (the extension-header chain walked) + the L4 header. */
/* Router advertisements and redirects (only the node sends them: a pod's are dropped, endpoint.h):
 * a 16-byte header (redirect 40) and a few options, bounded. */
#define NDP_MAX 256
/* NS/NA: 24 bytes, a link-layer address option (8) and a nonce (8) */
#define NDP_UNICAST_MAX 48
/* MLDv2 report records a pod's report may hold (one per group it listens to: its solicited-node
 * groups, mDNS...); a report with more, or with sources, is judged by policy */
#define MLD_RECORDS 8

/* An NDP option at o: its type, and one 8-byte unit (an Ethernet link-layer address, a nonce). */
static __always_inline int ndp_opt(const __u8 *o, const void *end, __u8 type)
{
	if ((void *)(o + 2) > end)
		return 0;
	return o[0] == type && o[1] == 1;
}

/* Neighbour discovery in the form RFC 4861 (and RFC 7527's nonce) gives it, nothing more: a pod
 * cannot carry data in options. `len` is the ICMPv6 message's length. */
static __always_inline int ndp_form(__u8 type, const __u8 *icmp, const void *end, __u32 len)
{
	switch (type) {
	case 133: /* RS: 8 bytes, at most a source link-layer address */
		return len == 8 || (len == 16 && ndp_opt(icmp + 8, end, 1));
	case 135: /* NS: 24 bytes, at most a source link-layer address and a nonce, once each */
		if (len == 24)
			return 1;
		if (len == 32)
			return ndp_opt(icmp + 24, end, 1) || ndp_opt(icmp + 24, end, 14);
		if (len == 40)
			return (ndp_opt(icmp + 24, end, 1) && ndp_opt(icmp + 32, end, 14)) ||
			       (ndp_opt(icmp + 24, end, 14) && ndp_opt(icmp + 32, end, 1));
		return 0;
	case 136: /* NA: 24 bytes, at most a target link-layer address */
		return len == 24 || (len == 32 && ndp_opt(icmp + 24, end, 2));
	default: /* RA, redirect */
		return len <= NDP_MAX;
	}
}

/* MLD in the form RFC 2710 and RFC 3810 give it, without sources: an MLDv1 message (24 bytes), an
 * MLDv2 query without sources (28), or an MLDv2 report of 1 to MLD_RECORDS records, each a record
 * type (1-6), no auxiliary data, no sources and a multicast group. */
static __always_inline int mld_form(__u8 type, const __u8 *icmp, const void *end, __u32 len)
{
	if (type != 143) {
		if (len == 24)
			return 1;
		return type == 130 && len == 28 && (void *)(icmp + 28) <= end && icmp[26] == 0 && icmp[27] == 0;
	}
	if ((void *)(icmp + 8) > end)
		return 0;
	__u32 n = ((__u32)icmp[6] << 8) | icmp[7];
	if (n == 0 || n > MLD_RECORDS || len != 8 + 20 * n)
		return 0;
	/* a bounded loop (the verifier walks at most MLD_RECORDS rounds) */
	for (__u32 i = 0; i < MLD_RECORDS && i < n; i++) {
		const __u8 *r = icmp + 8 + 20 * i;
		if ((void *)(r + 20) > end)
			return 0;
		if (r[0] < 1 || r[0] > 6 || r[1] || r[2] || r[3] || r[4] != 0xff)
			return 0;
	}
	return 1;
}

/* a destination NDP sends to: link-local unicast, ff02::1 (all nodes), ff02::2 (all routers),
 * ff02::1:ffXX:XXXX (solicited node) */
static __always_inline int ndp_dst(const __u8 *a)
{
	if (is_link_local6(a))
		return 1;
	const __u32 *w = (const __u32 *)a;
	if (w[0] != bpf_htonl(0xff020000) || w[1] != 0)
		return 0;
	if (w[2] == 0 && (w[3] == bpf_htonl(1) || w[3] == bpf_htonl(2)))
		return 1;
	return w[2] == bpf_htonl(1) && a[12] == 0xff;
}

static __always_inline int parse(struct __sk_buff *skb, struct flow *f)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return P_MALFORMED;
	__u16 proto = eth->h_proto;
	__u32 off;
	int v6 = 0;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > end)
			return P_MALFORMED;
		if (ip->ihl < 5)
			return P_MALFORMED;
		v4mapped(f->src, ip->saddr);
		v4mapped(f->dst, ip->daddr);
		f->proto = f->frag_proto = ip->protocol;
		f->hop_limit = ip->ttl;
		__u16 fo = bpf_ntohs(ip->frag_off);
		if (fo & 0x1fff) {
			f->frag = FRAG_LATER;
			f->frag_off = (fo & 0x1fff) << 3;
		} else if (fo & 0x2000) {
			f->frag = FRAG_FIRST;
		}
		f->frag_id = bpf_ntohs(ip->id);
		if (f->frag == FRAG_LATER)
			return P_IP; /* v6 = 0, l4_off = 0: no L4 header here */
		off = sizeof(*eth) + ip->ihl * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > end)
			return P_MALFORMED;
		__builtin_memcpy(f->src, &ip6->saddr, 16);
		__builtin_memcpy(f->dst, &ip6->daddr, 16);
		f->hop_limit = ip6->hop_limit;
		v6 = 1;
		__u8 nh = ip6->nexthdr;
		off = sizeof(*eth) + sizeof(*ip6);
		/* the extension-header chain, bounded: the policy judges the real upper layer */
#pragma unroll
		for (int i = 0; i < MAX_EXTHDRS; i++) {
			if (nh != NEXTHDR_HOP && nh != NEXTHDR_ROUTING && nh != NEXTHDR_FRAGMENT && nh != NEXTHDR_AUTH &&
			    nh != NEXTHDR_DEST)
				break;
			__u8 h[8];
			if (bpf_skb_load_bytes(skb, off, h, 8))
				return P_MALFORMED;
			if (nh == NEXTHDR_FRAGMENT) {
				__u16 fo = ((__u16)h[2] << 8) | h[3];
				f->frag_proto = h[0];
				f->frag_id = ((__u32)h[4] << 24) | ((__u32)h[5] << 16) | ((__u32)h[6] << 8) | h[7];
				if (fo & 0xfff8) {
					f->frag = FRAG_LATER;
					f->frag_off = fo & 0xfff8;
					f->proto = h[0];
					f->v6 = 1;
					return P_IP;
				}
				if (fo & 1)
					f->frag = FRAG_FIRST;
				off += 8;
			} else if (nh == NEXTHDR_AUTH) {
				off += ((__u32)h[1] + 2) * 4;
			} else {
				off += ((__u32)h[1] + 1) * 8;
			}
			nh = h[0];
		}
		if (nh == NEXTHDR_HOP || nh == NEXTHDR_ROUTING || nh == NEXTHDR_FRAGMENT || nh == NEXTHDR_AUTH ||
		    nh == NEXTHDR_DEST)
			return P_EXTHDRS;
		f->proto = nh;
		if (f->frag == FRAG_NONE)
			f->frag_proto = nh;
	} else if (proto == bpf_htons(ETH_P_ARP)) {
		/* Ethernet/IPv4 ARP: the sender protocol address at byte 14 of the ARP header */
		__u8 *arp = (void *)(eth + 1);
		if ((void *)(arp + 28) > end)
			return P_MALFORMED;
		if (arp[0] != 0 || arp[1] != 1 || arp[2] != 0x08 || arp[3] != 0 || arp[4] != 6 || arp[5] != 4)
			return P_BAD_L2;
		__u32 spa;
		__builtin_memcpy(&spa, arp + 14, 4);
		v4mapped(f->claimed, spa);
		return P_ARP;
	} else {
		return P_BAD_L2;
	}
	if (off > 0x4000)
		return P_MALFORMED;
	f->v6 = v6;
	f->l4_off = off;
	void *l4 = data + off;
	f->sport = f->dport = 0;
	if (has_ports(f->proto)) {
		__u16 *ports = l4;
		if ((void *)(ports + 2) > end)
			return f->frag == FRAG_FIRST ? P_FRAG_BAD : P_MALFORMED;
		f->sport = bpf_ntohs(ports[0]);
		f->dport = bpf_ntohs(ports[1]);
		/* TCP flags when the header is there (a shorter one is judged by its ports alone) */
		__u8 *tcp = l4;
		if (f->proto == IPPROTO_TCP && (void *)(tcp + 14) <= end)
			f->tcp_flags = tcp[13];
		/* a first fragment must hold the whole header the policy reads (tiny-fragment attacks) */
		if (f->frag == FRAG_FIRST && l4 + l4_min(f->proto) > end)
			return P_FRAG_BAD;
	} else if (f->proto == IPPROTO_ICMP || f->proto == IPPROTO_ICMPV6_) {
		__u8 *icmp = l4;
		if ((void *)(icmp + 8) > end)
			return f->frag == FRAG_FIRST ? P_FRAG_BAD : P_IP;
		__u8 type = icmp[0];
		f->icmp_type = type;
		if (v6 && f->proto == IPPROTO_ICMPV6_) {
			if (type >= 1 && type <= 4)
				parse_embedded(f, icmp + 8, end, 1);
			/* Neighbour discovery and MLD pass without policy only as the protocols send them (a
			 * pod must not use their types as a free channel): NDP (RS, RA, NS, NA, redirect) with
			 * hop limit 255 (never routed), in its RFC form (ndp_form: the header and the options
			 * it has, once each), to a link-local, solicited-node, all-nodes or all-routers
			 * address; NS/NA to a unicast address (neighbour unreachability detection) at most
			 * NDP_UNICAST_MAX bytes, and only between on-link neighbours (the node and its pods:
			 * endpoint.h); MLD from a link-local (or, for a report, the unspecified) source, hop
			 * limit 1, to a multicast address, in its RFC form without sources (mld_form).
			 * Anything else of these types is judged by policy as any ICMPv6 packet. */
			__u32 len = skb->len > off ? skb->len - off : 0;
			if (type >= 133 && type <= 137 && f->hop_limit == 255 && len <= NDP_MAX &&
			    ndp_form(type, icmp, end, len)) {
				if ((void *)(icmp + 24) <= end)
					__builtin_memcpy(f->claimed, icmp + 8, 16);
				if (ndp_dst(f->dst))
					return P_NDP;
				if ((type == 135 || type == 136) && f->dst[0] != 0xff && len <= NDP_UNICAST_MAX)
					return P_NDP_UNICAST;
			} else if ((type >= 130 && type <= 132) || type == 143) {
				if (f->hop_limit == 1 && f->dst[0] == 0xff &&
				    (is_link_local6(f->src) || (type == 143 && is_zero(f->src))) &&
				    mld_form(type, icmp, end, len))
					return P_NDP;
			}
		} else if (!v6 && f->proto == IPPROTO_ICMP) {
			if (type == 3 || type == 11 || type == 12)
				parse_embedded(f, icmp + 8, end, 0);
		}
	}
	return P_IP;
}

#endif
