/* Conntrack: one entry per flow and endpoint (cascade_ct, the set-associative table of ct_table.h),
 * found from both directions by (local, remote, ports, protocol), holding the flow's verdict, the
 * endpoint revision and policy generation it was judged in, the interface it was judged on, and
 * whether it was translated. A current entry answers a packet in one lookup. The lookups stay in
 * handle() (cascade.bpf.c), in the order a packet meets them; this is how an entry is found, made
 * and changed. (Steps 4 and 8 of handle().) */
#ifndef CASCADE_CONNTRACK_H
#define CASCADE_CONNTRACK_H

#define READ_SEQ(w) (*(volatile __u64 *)&(w)->seq)

/* the node's conntrack hash seed, written by the helper before load (from cascade_ct_seed, where it
 * keeps it across loads: a new seed would lose every entry); a constant to the verifier */
const volatile __u64 ct_seed SEC(".rodata.ctseed") = 0;

/* `ck`'s set, its index in `idx` */
static __always_inline struct ct_set *ct_set_for(const struct ct_key *ck, __u32 *idx)
{
	*idx = ct_set_of(ck, ct_seed);
	return bpf_map_lookup_elem(&cascade_ct, idx);
}

/* What a packet reads of a flow's entry, copied while the slot was stable, with where the slot is and
 * its seq for the writes. Per CPU, not on the stack (handle() is within a few bytes of the
 * verifier's 512-byte limit): tc programs run with bottom halves off, so a run never nests on its CPU
 * (cascade_icmp_related, a separate frame, keeps its own on its stack). */
struct ct_view {
	__u64 seq;
	__u32 set;
	__u32 way;
	__u32 revision;
	__u32 generation;
	__u32 ifindex;
	__u32 seen;
	__u8 dir;
	__u8 verdict;
	__u8 closing;
	__u8 nat;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct ct_view);
	__uint(max_entries, 1);
} cascade_ct_scratch SEC(".maps");

static __always_inline struct ct_view *ct_scratch(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cascade_ct_scratch, &zero);
}

/* Finds `ck`'s flow: 1 with what a packet reads of it copied to `out` (read stable: a slot another CPU
 * is rewriting is read again, twice at most, then counts as a miss), else 0. */
static __always_inline int ct_find(const struct ct_key *ck, struct ct_view *out)
{
	__u32 idx;
	struct ct_set *s = ct_set_for(ck, &idx);
	if (!s)
		return 0;
#pragma unroll
	for (int i = 0; i < CT_WAYS; i++) {
		struct ct_slot *w = &s->way[i];
#pragma unroll
		for (int t = 0; t < 3; t++) {
			__u64 s1 = READ_SEQ(w);
			if (s1 & 1)
				continue;
			asm volatile("" ::: "memory");
			if (!ct_same_key(&w->key, ck))
				break;
			out->revision = w->val.revision;
			out->generation = w->val.generation;
			out->ifindex = w->val.ifindex;
			out->seen = w->val.seen;
			out->dir = w->val.dir;
			out->verdict = w->val.verdict;
			out->closing = w->val.closing;
			out->nat = w->val.nat;
			asm volatile("" ::: "memory");
			if (READ_SEQ(w) != s1)
				continue;
			out->seq = s1;
			out->set = idx;
			out->way = i;
			return 1;
		}
	}
	return 0;
}

/* The slot a view was read from, while it still holds that flow as it was read (seq unchanged). */
static __always_inline struct ct_slot *ct_slot_of(const struct ct_view *v)
{
	__u32 idx = v->set;
	struct ct_set *s = bpf_map_lookup_elem(&cascade_ct, &idx);
	if (!s)
		return NULL;
	struct ct_slot *w = &s->way[v->way & (CT_WAYS - 1)];
	return READ_SEQ(w) == v->seq ? w : NULL;
}

/* ct_victim (ct_table.h) as a global function, verified once on its own: inlined, its comparisons
 * took handle() past the 512-byte stack. */
__attribute__((noinline)) int cascade_ct_victim(struct ct_set *s, const struct ct_key *ck, __u32 clock)
{
	if (!s || !ck)
		return 0;
	return (int)ct_victim(s, ck, clock);
}

/* Writes a new allowed flow's entry into its set (ct_victim: its own way, else an empty one, else the
 * stalest, counted as an eviction when that was another flow), field by field (no copy on the
 * stack: handle() is within a few bytes of the 512-byte limit). 0 when the way was being written by
 * another CPU: the flow passes untracked (CNT_CT_BUSY). */
static __always_inline int ct_insert(const struct ct_key *ck, __u32 revision, __u32 generation, __u8 dir,
				     __u8 closing, __u8 nat, __u32 clock, __u32 ifindex)
{
	__u32 idx;
	struct ct_set *s = ct_set_for(ck, &idx);
	if (!s)
		return 0;
	__u32 i = cascade_ct_victim(s, ck, clock) & (CT_WAYS - 1);
	struct ct_slot *w = &s->way[i];
	__u64 s1 = READ_SEQ(w);
	if ((s1 & 1) || __sync_val_compare_and_swap(&w->seq, s1, s1 + 1) != s1) {
		count(CNT_CT_BUSY);
		return 0;
	}
	if (w->key.proto && !ct_same_key(&w->key, ck))
		count(CNT_CT_EVICTED);
	__builtin_memcpy(&w->key, ck, sizeof(*ck));
	w->val.revision = revision;
	w->val.generation = generation;
	w->val.dir = dir;
	w->val.verdict = VERDICT_ALLOW;
	w->val.closing = closing;
	w->val.nat = nat;
	w->val.seen = clock;
	w->val.ifindex = ifindex;
	w->val.pad2 = 0;
	w->val.created = clock;
	__sync_fetch_and_add(&w->seq, 1);
	return 1;
}

/* A flow's own fields that change in place: single stores, made only while the slot still holds the
 * flow as it was read. The caller asks only when one changes (seen once per tick, closing once). */
static __always_inline void ct_touch(const struct ct_view *v, __u32 clock, int closing)
{
	struct ct_slot *w = ct_slot_of(v);
	if (!w)
		return;
	w->val.seen = clock;
	if (closing)
		w->val.closing = 1;
}

static __always_inline void ct_refresh(const struct ct_view *v, __u32 generation)
{
	struct ct_slot *w = ct_slot_of(v);
	if (w)
		w->val.generation = generation;
}

/* A re-judged flow's revision, generation and verdict: written together, under the slot's seq. */
static __always_inline void ct_rejudge(const struct ct_view *v, __u32 revision, __u32 generation, __u8 verdict)
{
	struct ct_slot *w = ct_slot_of(v);
	if (!w || __sync_val_compare_and_swap(&w->seq, v->seq, v->seq + 1) != v->seq)
		return;
	w->val.revision = revision;
	w->val.generation = generation;
	w->val.verdict = verdict;
	__sync_fetch_and_add(&w->seq, 1);
}

/* Takes one of the endpoint address's conntrack places (CT_ENDPOINT_QUOTA): 1, or 0 when it holds
 * its quota already. One hash lookup per new allowed flow; established packets never come here. */
static __always_inline int take_ct_place(const __u8 *local)
{
	struct endpoint_key k;
	__builtin_memcpy(k.addr, local, 16);
	__u32 *n = bpf_map_lookup_elem(&cascade_ct_counts, &k);
	if (!n) {
		__u32 one = 1;
		bpf_map_update_elem(&cascade_ct_counts, &k, &one, BPF_NOEXIST);
		return 1;
	}
	if (*n >= CT_ENDPOINT_QUOTA)
		return 0;
	__sync_fetch_and_add(n, 1);
	return 1;
}

/* A new flow's entry, once it is allowed (a denied new flow leaves no state: the verdict cache answers
 * its next packets), and for a translated flow its NAT entries: the backend for its original tuple and
 * the frontend its replies get back. `front`/`to`: NULL unless translated. */
static __always_inline void track(struct ct_key *ck, int dir, struct flow *f, __u32 revision, __u32 generation,
				  __u32 clock, __u32 ifindex, struct nat_value *front, struct nat_value *to)
{
	ct_insert(ck, revision, generation, dir, (f->tcp_flags & (TCP_FIN | TCP_RST)) ? 1 : 0, front ? 1 : 0, clock,
		  ifindex);
	if (front && to) {
		struct ct_key nk = { .lport = ck->lport, .rport = front->port, .proto = ck->proto };
		__builtin_memcpy(nk.local, ck->local, 16);
		__builtin_memcpy(nk.remote, front->addr, 16);
		bpf_map_update_elem(&cascade_nat, &nk, to, BPF_ANY);
		bpf_map_update_elem(&cascade_revnat, ck, front, BPF_ANY);
	}
}

/* An ICMP error (parse.h fills its embedded flow) that may pass with the flow it reports about: 1 when
 * that flow is open and allowed at this endpoint (on this interface, in this generation) and the error
 * travels as errors do: one a pod sends (egress) is about a packet it received and goes back to that
 * packet's sender; one a pod receives (ingress) is about a packet it sent (any router on the path may
 * send it). Its size is bounded by what stacks send (RFC 1812: 576 bytes; RFC 4443: 1280), and what passes
 * is cut to the headers a stack reads (cascade_icmp_trim). Before, an error naming an allowed flow passed
 * to and from anywhere with any payload (found in review). A
 * global function, verified once on its own (inlined it took to_endpoint past the verifier's limit). */
__attribute__((noinline)) int cascade_icmp_related(struct flow *f, int dir, __u32 ifindex, __u32 generation,
						    __u32 len)
{
	if (!f || len > (f->v6 ? ETH_HLEN + 1280 : ETH_HLEN + 576))
		return 0;
	struct ct_key rk = { .proto = f->iproto };
	if (dir == DIR_EGRESS) {
		if (!same_addr(f->idst, f->src) || !same_addr(f->isrc, f->dst))
			return 0;
		__builtin_memcpy(rk.local, f->idst, 16);
		__builtin_memcpy(rk.remote, f->isrc, 16);
		rk.lport = f->idport;
		rk.rport = f->isport;
	} else {
		if (!same_addr(f->isrc, f->dst))
			return 0;
		__builtin_memcpy(rk.local, f->isrc, 16);
		__builtin_memcpy(rk.remote, f->idst, 16);
		rk.lport = f->isport;
		rk.rport = f->idport;
	}
	struct ct_view rc;
	return ct_find(&rk, &rc) && rc.ifindex == ifindex && rc.verdict == VERDICT_ALLOW &&
	       rc.generation == generation;
}

/* What of an ICMP error travels: its 8-byte header, the embedded IP header, the 8 bytes of the embedded
 * L4 header every stack reads (RFC 792, 4443) and a small margin. The rest of a body (a stack sends up
 * to 576 or 1280 bytes in all) would be a channel on the side of the flow: it is cut off. */
#define ICMP_ERR_MARGIN 32
#define ICMP_ERR_KEEP_MAX (8 + 60 + 8 + ICMP_ERR_MARGIN)

/* Cuts a related ICMP error (cascade_icmp_related said yes) to ICMP_ERR_KEEP_MAX at most: the tail is
 * trimmed, the IP length set (and the IPv4 header checksum), and the ICMP checksum computed again over
 * what is left (with the IPv6 pseudo-header for ICMPv6). 1 when it cut, 0 when the error was short
 * enough (or could not be cut: then it passes as it was, within the size the caller checked), -1 when
 * it was cut but not made whole again (the caller drops it). A global function, verified once. */
__attribute__((noinline)) int cascade_icmp_trim(struct __sk_buff *skb, __u32 l4_off, __u32 v6)
{
	if (!skb || l4_off > 512)
		return 0;
	__u32 ihl = 40;
	if (!v6) {
		__u8 b;
		if (bpf_skb_load_bytes(skb, l4_off + 8, &b, 1))
			return 0;
		ihl = (b & 0xf) * 4;
		if (ihl < 20)
			return 0;
	}
	__u32 mlen = 8 + ihl + 8 + ICMP_ERR_MARGIN; /* a multiple of 4, at most ICMP_ERR_KEEP_MAX */
	__u32 keep = l4_off + mlen;
	if (skb->len <= keep)
		return 0;
	if (bpf_skb_change_tail(skb, keep, 0))
		return 0;
	if (v6) {
		__be16 plen = bpf_htons(keep - ETH_HLEN - 40);
		if (bpf_skb_store_bytes(skb, ETH_HLEN + 4, &plen, 2, 0))
			return -1;
	} else {
		__be16 old, now = bpf_htons(keep - ETH_HLEN);
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 2, &old, 2) || bpf_skb_store_bytes(skb, ETH_HLEN + 2, &now, 2, 0))
			return -1;
		if (bpf_l3_csum_replace(skb, ETH_HLEN + 10, old, now, 2))
			return -1;
	}
	/* the sums read the packet itself (the caller's stack leaves no room for a copy) */
	__u16 zero = 0;
	if (bpf_skb_store_bytes(skb, l4_off + 2, &zero, 2, 0))
		return -1;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	__s64 sum = 0;
	if (v6) {
		if (data + ETH_HLEN + 40 > end)
			return -1;
		__be32 tail[2] = { bpf_htonl(mlen), bpf_htonl(58) };
		sum = bpf_csum_diff(NULL, 0, (__be32 *)(data + ETH_HLEN + 8), 32, 0);
		if (sum < 0)
			return -1;
		sum = bpf_csum_diff(NULL, 0, tail, sizeof(tail), (__wsum)sum);
		if (sum < 0)
			return -1;
	}
	/* constant sizes for the verifier: the whole of an ICMPv6 error, or an ICMPv4 error without the
	 * embedded header's options, then those options 4 bytes at a time */
	__u64 off = l4_off;
	asm volatile("%0 &= 0x3ff" : "+r"(off)); /* at most 512 already: the mask, kept, tells the verifier */
	void *msg = data + off;
	if (v6) {
		if (msg + 8 + 40 + 8 + ICMP_ERR_MARGIN > end)
			return -1;
		sum = bpf_csum_diff(NULL, 0, (__be32 *)msg, 8 + 40 + 8 + ICMP_ERR_MARGIN, (__wsum)sum);
	} else {
		if (msg + 8 + 20 + 8 + ICMP_ERR_MARGIN > end)
			return -1;
		sum = bpf_csum_diff(NULL, 0, (__be32 *)msg, 8 + 20 + 8 + ICMP_ERR_MARGIN, 0);
		msg += 8 + 20 + 8 + ICMP_ERR_MARGIN;
#pragma unroll
		for (int i = 0; i < 10; i++) {
			if (sum < 0 || (__u32)i * 4 >= ihl - 20)
				break;
			if (msg + 4 > end)
				return -1;
			sum = bpf_csum_diff(NULL, 0, (__be32 *)msg, 4, (__wsum)sum);
			msg += 4;
		}
	}
	if (sum < 0)
		return -1;
	__u32 c = (__u32)sum;
	c = (c & 0xffff) + (c >> 16);
	c = (c & 0xffff) + (c >> 16);
	__u16 csum = (__u16)~c;
	return bpf_skb_store_bytes(skb, l4_off + 2, &csum, 2, 0) ? -1 : 1;
}

#endif
