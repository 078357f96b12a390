/* Events: a flow's verdict with its deciding rule, into the ring the agent drains every
 * second (denials, and allowed flows of an endpoint in audit mode). (Step 9 of handle().)
 * The ring (1 MiB, about 16,000 events) is shared by every pod of the node: each endpoint has a
 * token bucket (EVENTS_PER_SEC, burst EVENTS_BURST) so that one pod sending denied packets on fresh
 * ports cannot push other pods' events out before the agent reads them; what a bucket refuses is
 * counted (events_suppressed, and per endpoint in cascade_event_budget). */
#ifndef CASCADE_EVENTS_H
#define CASCADE_EVENTS_H

/* One event of the endpoint `k` may go into the ring now (its bucket had a token): 1, else 0. A
 * global function, verified once on its own: inlined at report()'s three call sites its branches
 * multiplied the verifier's states past its limit. */
__attribute__((noinline)) int cascade_event_allowed(struct endpoint_key *k)
{
	if (!k)
		return 1;
	__u64 now = bpf_ktime_get_ns();
	struct event_budget *b = bpf_map_lookup_elem(&cascade_event_budget, k);
	if (!b) {
		struct event_budget nb = { .last_ns = now, .tokens = EVENTS_BURST - 1 };
		bpf_map_update_elem(&cascade_event_budget, k, &nb, BPF_ANY);
		return 1;
	}
	__u64 refill = (now - b->last_ns) / EVENT_INTERVAL_NS;
	if (refill) {
		__u64 tokens = b->tokens + refill;
		b->tokens = tokens > EVENTS_BURST ? EVENTS_BURST : (__u32)tokens;
		b->last_ns = now;
	}
	if (!b->tokens) {
		b->suppressed++;
		__u32 idx = CNT_EVENTS_SUPPRESSED;
		__u64 *c = bpf_map_lookup_elem(&cascade_counters, &idx);
		if (c)
			*c += 1;
		return 0;
	}
	b->tokens--;
	return 1;
}

static __always_inline void report(struct flow *f, int dir, struct decision *d, __u8 reason)
{
	struct endpoint_key k;
	__builtin_memcpy(k.addr, dir == DIR_EGRESS ? f->src : f->dst, 16);
	if (!cascade_event_allowed(&k))
		return;
	struct flow_event *e = bpf_ringbuf_reserve(&cascade_events, sizeof(*e), 0);
	if (!e)
		return;
	__builtin_memcpy(e->src, f->src, 16);
	__builtin_memcpy(e->dst, f->dst, 16);
	e->sport = f->sport;
	e->dport = f->dport;
	e->proto = f->proto;
	e->dir = dir;
	e->verdict = d->verdict;
	e->reason = reason;
	e->remote_identity = d->identity;
	e->rule = d->rule;
	e->precedence = d->precedence;
	bpf_ringbuf_submit(e, 0);
}

#endif
