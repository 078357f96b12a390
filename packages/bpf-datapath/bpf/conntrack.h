/* Conntrack: one entry per flow and endpoint (cascade_ct, LRU), found from both directions
 * by (local, remote, ports, protocol), holding the flow's verdict, the endpoint revision and policy
 * generation it was judged in, the interface it was judged on, and whether it was translated. A
 * current entry answers a packet in one lookup. The lookups stay in handle() (cascade.bpf.c), in
 * the order a packet meets them; this is how an entry is made. (Step 8 of handle().) */
#ifndef CASCADE_CONNTRACK_H
#define CASCADE_CONNTRACK_H

/* A newly judged flow's entry (and for a translated flow the frontend its replies get back). */
static __always_inline void track(struct ct_key *ck, int dir, __u8 verdict, struct flow *f, __u32 revision,
				  __u32 generation, __u32 clock, __u32 ifindex, struct nat_value *front)
{
	struct ct_value nv = {
		.revision = revision,
		.generation = generation,
		.dir = dir,
		.verdict = verdict,
		.closing = (f->tcp_flags & (TCP_FIN | TCP_RST)) ? 1 : 0,
		.nat = front ? 1 : 0,
		.seen = clock,
		.ifindex = ifindex,
		.created_ns = bpf_ktime_get_ns(),
	};
	bpf_map_update_elem(&cascade_ct, ck, &nv, BPF_ANY);
	if (front)
		bpf_map_update_elem(&cascade_revnat, ck, front, BPF_ANY);
}

#endif
