/* Conntrack: one entry per flow and endpoint (cascade_ct, LRU), found from both directions
 * by (local, remote, ports, protocol), holding the flow's verdict, the endpoint revision and policy
 * generation it was judged in, the interface it was judged on, and whether it was translated. A
 * current entry answers a packet in one lookup. The lookups stay in handle() (cascade.bpf.c), in
 * the order a packet meets them; this is how an entry is made. (Steps 4 and 8 of handle().) */
#ifndef CASCADE_CONNTRACK_H
#define CASCADE_CONNTRACK_H

/* A new flow's entry, once it is allowed (a denied new flow leaves no state: the verdict cache answers
 * its next packets), and for a translated flow its NAT entries: the backend for its original tuple and
 * the frontend its replies get back. `front`/`to`: NULL unless translated. */
static __always_inline void track(struct ct_key *ck, int dir, struct flow *f, __u32 revision, __u32 generation,
				  __u32 clock, __u32 ifindex, struct nat_value *front, struct nat_value *to)
{
	struct ct_value nv = {
		.revision = revision,
		.generation = generation,
		.dir = dir,
		.verdict = VERDICT_ALLOW,
		.closing = (f->tcp_flags & (TCP_FIN | TCP_RST)) ? 1 : 0,
		.nat = front ? 1 : 0,
		.seen = clock,
		.ifindex = ifindex,
		.created_ns = bpf_ktime_get_ns(),
	};
	bpf_map_update_elem(&cascade_ct, ck, &nv, BPF_ANY);
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
 * send it). Its size is bounded by what stacks send (RFC 1812: 576 bytes; RFC 4443: 1280). Before, an
 * error naming an allowed flow passed to and from anywhere with any payload (found in review). A
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
	struct ct_value *rc = bpf_map_lookup_elem(&cascade_ct, &rk);
	return rc && rc->ifindex == ifindex && rc->verdict == VERDICT_ALLOW && rc->generation == generation;
}

#endif
