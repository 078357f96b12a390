/* Events: a flow's verdict with its deciding rule, into the ring the agent drains every
 * second (denials, and allowed flows of an endpoint in audit mode). (Step 9 of handle().)
 * The ring (1 MiB, about 16,000 events) is shared by every pod of the node: each endpoint has a
 * budget (EVENTS_PER_SEC, bursts of EVENTS_BURST, kept in its endpoint_value) so that one pod
 * sending denied packets on fresh ports cannot push other pods' events out before the agent reads
 * them; what a budget refuses is counted (events_suppressed). */
#ifndef CASCADE_EVENTS_H
#define CASCADE_EVENTS_H

static __always_inline void report(struct endpoint_value *ep, __u32 clock, struct flow *f, int dir,
				   struct decision *d, __u8 reason, struct decision *staged)
{
	if (!take_token(&ep->event_tokens, &ep->event_second, clock, EVENTS_PER_SEC, EVENTS_BURST)) {
		count(CNT_EVENTS_SUPPRESSED);
		return;
	}
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
	e->staged = staged ? 1 : 0;
	e->staged_verdict = staged ? staged->verdict : 0;
	e->pad = 0;
	e->staged_rule = staged ? staged->rule : 0;
	bpf_ringbuf_submit(e, 0);
}

#endif
