/* Policy lookup: the remote's identity (exact host hash, then the CIDR trie, else world),
 * then the verdict cache keyed by the endpoint's table ids, identity, protocol and port; only a miss
 * walks the rule sets: up to three LPM lookups (identity, all-pods class, wildcard; those a table has
 * no entries for skipped, as its id says) in the admin layer and, when it passes or misses, in the
 * lower layer; the result is cached. Runs only for a
 * packet that conntrack did not answer. (Step 7 of handle().) */
#ifndef CASCADE_POLICY_H
#define CASCADE_POLICY_H

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

/* A layer's answer: its entries for the identity, for all pods (a pod identity) and for anyone, the
 * best of them. A lookup the table id says it has no entries for is skipped: an empty table costs
 * nothing, a NetworkPolicy's default deny alone costs one trie walk. */
static __always_inline struct policy_value *layer(__u32 table, __u32 identity, __u8 proto, __u16 port)
{
	struct policy_value *best = NULL;
	if (!(table & TABLE_NO_PEERS))
		best = lpm(table, identity, proto, port);
	if (identity >= CASCADE_POD_FIRST && identity <= CASCADE_POD_LAST && !(table & TABLE_NO_ALL_PODS))
		best = better(best, lpm(table, CASCADE_ID_ALL_PODS, proto, port));
	if (!(table & TABLE_NO_WILDCARD))
		best = better(best, lpm(table, CASCADE_ID_WILDCARD, proto, port));
	return best;
}

struct decision {
	__u8 verdict;
	__u32 rule;
	__u32 precedence;
	__u32 identity;
};

static __always_inline __u32 identity_of(__u8 *addr)
{
	struct endpoint_key hk;
	__builtin_memcpy(hk.addr, addr, 16);
	struct ipcache_value *iv = bpf_map_lookup_elem(&cascade_hosts, &hk);
	if (iv)
		return iv->identity;
	struct ipcache_key ik = { .prefixlen = 128 };
	__builtin_memcpy(ik.addr, addr, 16);
	iv = bpf_map_lookup_elem(&cascade_ipcache, &ik);
	return iv ? iv->identity : CASCADE_ID_WORLD;
}

/* A decision of two layers (admin, lower) for a remote identity, protocol and port. */
static __always_inline void judge_tables(__u32 admin, __u32 lower, __u32 identity, __u8 proto, __u16 port, struct decision *d)
{
	d->identity = identity;
	d->rule = 0;
	d->precedence = 0;
	if (identity == CASCADE_ID_UNTRANSLATED) { /* a Service frontend left out of the maps: fail closed */
		d->verdict = VERDICT_DENY;
		return;
	}
	struct config *cfg = config();
	/* The pod's own node (HOST) is judged as that node's identity (its labels) in the admin tier and
	 * the baseline, as any node is; only NetworkPolicy cannot block it (below). Unknown: allowed. */
	__u32 lookup = identity;
	if (identity == CASCADE_ID_HOST) {
		lookup = cfg ? cfg->host_identity : 0;
		if (!lookup) {
			d->verdict = VERDICT_ALLOW;
			return;
		}
	}
	/* cached under HOST itself, never under the node identity a remote node may share */
	struct verdict_key vk = {
		.admin = admin,
		.lower = lower,
		.identity = identity,
		.proto = proto,
		.port = port,
	};
	__u32 epoch = cfg ? cfg->epoch : 0;
	struct verdict_value *cached = bpf_map_lookup_elem(&cascade_verdicts, &vk);
#ifdef CASCADE_BENCH_COLD
	cached = NULL; /* bench build only: every verdict walks the rule sets */
#endif
	if (cached && cached->epoch == epoch) {
		count(CNT_VERDICT_CACHED);
		d->verdict = cached->verdict;
		d->rule = cached->rule;
		d->precedence = cached->precedence;
		return;
	}
	struct policy_value *v = layer(vk.admin, lookup, proto, port);
	if (!v || v->verdict == VERDICT_PASS) {
		v = layer(vk.lower, lookup, proto, port);
		/* a NetworkPolicy (its allows and its isolation: the lower band's NP half) never blocks a
		 * pod's own node: "pods cannot block access from their resident node" */
		if (v && identity == CASCADE_ID_HOST && ((v->precedence >> 1) & 0x7fff) >= L_NP_ISOLATION)
			v = NULL;
	}
	if (v) {
		d->verdict = v->verdict == VERDICT_DENY ? VERDICT_DENY : VERDICT_ALLOW;
		d->rule = v->rule;
		d->precedence = v->precedence;
	} else {
		d->verdict = VERDICT_ALLOW;
	}
	struct verdict_value nv = { .epoch = epoch, .precedence = d->precedence, .rule = d->rule, .verdict = d->verdict };
	bpf_map_update_elem(&cascade_verdicts, &vk, &nv, BPF_ANY);
}

/* The endpoint's decision for a flow opened in direction dir with the remote at `remote`. */
static __always_inline void judge(struct endpoint_value *ep, int dir, __u8 *remote, __u8 proto, __u16 port, struct decision *d)
{
	__u32 admin = dir == DIR_INGRESS ? ep->tables[DIR_INGRESS][0] : ep->tables[DIR_EGRESS][0];
	__u32 lower = dir == DIR_INGRESS ? ep->tables[DIR_INGRESS][1] : ep->tables[DIR_EGRESS][1];
	judge_tables(admin, lower, identity_of(remote), proto, port, d);
}

/* What the endpoint's staged tables would decide for the same flow (the remote identity of `d`):
 * 1 when it differs from `d` (into `staged`), else 0. Only an endpoint flagged EP_STAGED pays for
 * this, and only on a new flow. The verdict cache is keyed by table ids, so it serves both sets. */
static __always_inline int judge_staged(__u8 *local, int dir, struct decision *d, __u8 proto, __u16 port,
					struct decision *staged)
{
	struct endpoint_key k;
	__builtin_memcpy(k.addr, local, 16);
	struct staged_value *sv = bpf_map_lookup_elem(&cascade_staged, &k);
	if (!sv)
		return 0;
	__u32 admin = dir == DIR_INGRESS ? sv->tables[DIR_INGRESS][0] : sv->tables[DIR_EGRESS][0];
	__u32 lower = dir == DIR_INGRESS ? sv->tables[DIR_INGRESS][1] : sv->tables[DIR_EGRESS][1];
	judge_tables(admin, lower, d->identity, proto, port, staged);
	return staged->verdict != d->verdict;
}

#endif
