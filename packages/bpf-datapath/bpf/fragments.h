/* Fragments: a first fragment's protocol and ports are remembered for its later fragments, which
 * carry no L4 header and take them from there (or are dropped: untracked, or overlapping the first
 * fragment's L4 header). (Step 3 of handle().) */
#ifndef CASCADE_FRAGMENTS_H
#define CASCADE_FRAGMENTS_H

static __always_inline void remember_fragment(struct flow *f)
{
	if (f->frag != FRAG_FIRST)
		return;
	struct frag_key fk = { .id = f->frag_id, .proto = f->frag_proto };
	__builtin_memcpy(fk.src, f->src, 16);
	__builtin_memcpy(fk.dst, f->dst, 16);
	struct frag_value fv = { .sport = f->sport, .dport = f->dport, .proto = f->proto };
	bpf_map_update_elem(&cascade_frags, &fk, &fv, BPF_ANY);
}

/* A later fragment carries no L4 header: it takes its first fragment's protocol and ports. -1: drop
 * it (no first fragment seen, or it overlaps the first fragment's L4 header). */
static __always_inline int later_fragment(struct flow *f)
{
	struct frag_key fk = { .id = f->frag_id, .proto = f->frag_proto };
	__builtin_memcpy(fk.src, f->src, 16);
	__builtin_memcpy(fk.dst, f->dst, 16);
	struct frag_value *fv = bpf_map_lookup_elem(&cascade_frags, &fk);
	if (!fv) {
		count(CNT_FRAG_UNTRACKED);
		return -1;
	}
	/* overlapping the L4 header of the first fragment (rewriting ports or flags) */
	if (f->frag_off < l4_min(fv->proto)) {
		count(CNT_FRAG_BAD);
		return -1;
	}
	f->proto = fv->proto;
	f->sport = fv->sport;
	f->dport = fv->dport;
	return 0;
}

#endif
