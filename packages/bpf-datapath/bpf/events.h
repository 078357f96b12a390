/* Events: a flow's verdict with its deciding rule, into the ring the agent drains every
 * second (denials, and allowed flows of an endpoint in audit mode). (Step 9 of handle().) */
#ifndef CASCADE_EVENTS_H
#define CASCADE_EVENTS_H

static __always_inline void report(struct flow *f, int dir, struct decision *d, __u8 reason)
{
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
