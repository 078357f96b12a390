/* Shared layouts of the Cascade datapath maps. The TypeScript codecs (src/codecs.ts) mirror these
 * byte for byte; tests check the sizes. All multi-byte fields are host order (little endian) except
 * where noted: addresses and the policy key's port are network order so that LPM prefixes work. */
#ifndef CASCADE_H
#define CASCADE_H

#define CASCADE_ID_WILDCARD 0
#define CASCADE_ID_HOST 1
#define CASCADE_ID_WORLD 2
#define CASCADE_ID_ALL_PODS 3
/* a ClusterIP whose Service was left out of the translation maps (over its namespace's budget) */
#define CASCADE_ID_UNTRANSLATED 5
#define CASCADE_POD_FIRST 256
/* policy table ids: the low 29 bits count, the high three say which lookups of a layer the table has
 * no entries for (state.ts TABLE_FLAGS; an id without them is looked up in full) */
#define TABLE_NO_PEERS (1u << 29)
#define TABLE_NO_WILDCARD (1u << 30)
#define TABLE_NO_ALL_PODS (1u << 31)
#define CASCADE_POD_LAST 0x00ffffff

#define DIR_INGRESS 0
#define DIR_EGRESS 1

#define VERDICT_ALLOW 0
#define VERDICT_DENY 1
#define VERDICT_PASS 2

/* the lower band of a policy precedence (bits 15..1, netpolicy precedence.ts): at or above this, the
 * entry is a NetworkPolicy's (its allows, its isolation); below, the baseline's */
#define L_NP_ISOLATION 16384

/* endpoint flags */
#define EP_ENFORCE_INGRESS 1
#define EP_ENFORCE_EGRESS 2
/* no valid rule set yet (or the last update was refused): drop everything new */
#define EP_FAIL_CLOSED 4
/* report allowed flows to the ring buffer too */
#define EP_AUDIT_ALLOW 8
/* staged policies would judge this endpoint otherwise: its new flows are judged by its staged tables
 * too (cascade_staged), never enforced, and an event says where the two differ */
#define EP_STAGED 16

/* ipcache: addresses as IPv6; IPv4 as ::ffff:a.b.c.d (prefix + 96) */
struct ipcache_key {
	__u32 prefixlen;
	__u8 addr[16];
};
struct ipcache_value {
	__u32 identity;
};

struct endpoint_key {
	__u8 addr[16];
};
struct endpoint_value {
	__u32 flags;
	/* policy table ids, [direction][layer]: layer 0 admin, 1 lower */
	__u32 tables[2][2];
	/* bumped whenever a table id changes: conntrack entries of older revisions are re-judged */
	__u32 revision;
	__u32 identity;
	/* the host-side interface the endpoint's packets use (found from the kernel, never from pod
	 * metadata): a packet of this address on any other interface is spoofed or misdelivered */
	__u32 ifindex;
	/* kept by the program, never by the agent (it writes zeros, which refill at once): the
	 * endpoint's budget of new tracked flows and of flow events, as tokens refilled per second of
	 * the agent's clock (config.clock) up to a burst, and the second they were last refilled */
	__u32 flow_tokens;
	__u32 flow_second;
	__u32 event_tokens;
	__u32 event_second;
};

/* the staged set's policy table ids of an endpoint ([direction][layer], as endpoint_value.tables),
 * present while its flag EP_STAGED is set: the rules staged objects would enforce (netpolicy
 * staged-view.ts); tables are the enforced ones' (content-addressed, shared) */
struct staged_value {
	__u32 tables[2][2];
};

/* policy: LPM over (table, identity, proto, port prefix); prefixlen counts bits after itself:
 * 64 = table+identity (any protocol), 72 + n = protocol and n port bits. */
struct policy_key {
	__u32 prefixlen;
	__u32 table;
	__u32 identity;
	__u8 proto;
	__u16 port; /* network order */
} __attribute__((packed));
struct policy_value {
	__u32 precedence;
	__u8 verdict;
	__u8 match_len; /* 0 any protocol, 8 + port prefix length */
	__u16 pad;
	__u32 rule; /* rule id for audit and explain */
};

/* conntrack: one entry per (local endpoint, flow), found by packets of both directions */
struct ct_key {
	__u8 local[16];
	__u8 remote[16];
	__u16 lport;
	__u16 rport;
	__u8 proto;
	__u8 pad[3];
} __attribute__((aligned(8))); /* read as five 8-byte words (ct_table.h) */
struct ct_value {
	__u32 revision;   /* the endpoint's policy revision it was judged under */
	__u32 generation; /* config generation when last checked against that revision */
	__u8 dir;         /* direction of the packet that opened it: replies are the other direction */
	__u8 verdict;     /* a denied flow's packets in its own direction are dropped without a lookup */
	__u8 closing;     /* a TCP FIN or RST was seen: collected after a short idle time */
	__u8 nat;         /* opened towards a Service and translated: replies get the Service's address back */
	__u32 seen;       /* config clock (seconds) of the last packet: idle flows are collected */
	__u32 ifindex;    /* interface of the endpoint when judged: an entry only answers there */
	__u32 pad2;
	/* config clock (seconds) when the flow was opened: the clock, not bpf_ktime_get_ns(), which cost a
	 * first packet about 20 ns (npm run bench -- datapath) for a field only `debug ct` shows. Entries
	 * written before hold nanoseconds. */
	__u64 created;
};
#include "ct_table.h"

/* Services (ClusterIP, NodePort): a pod's new flow to a frontend (address, port, protocol) is sent to
 * one of its backends, translated at the pod's interface and judged against that backend. A NodePort
 * frontend has the zero address of its family (IPv4: ::ffff:0.0.0.0): it answers for the node's own
 * addresses (identity host). */
struct svc_key {
	__u8 addr[16];
	__u16 port; /* host order */
	__u8 proto;
	__u8 pad;
};
struct svc_value {
	__u32 id;    /* names the backend list: a changed list gets a new id (make before break) */
	__u32 count; /* backends in slots 0..count-1; 0: untranslated (kube-proxy answers) */
};
struct backend_key {
	__u32 id;
	__u32 slot;
};
/* a backend, a translated flow's backend (cascade_nat) or its frontend (cascade_revnat) */
struct nat_value {
	__u8 addr[16];
	__u16 port; /* host order */
	__u16 pad;
};

/* idle times after which the collector (bpfctl ctgc) deletes an entry, in seconds */
/* an endpoint's budgets (endpoint_value), refilled per second of the agent's clock, which it advances
 * every 10 s: a burst holds at least one tick's refill */
#define EVENTS_PER_SEC 64
#define EVENTS_BURST 640
#define FLOWS_PER_SEC 4096
#define FLOWS_BURST 40960
/* conntrack entries one endpoint address may hold: a sixteenth of cascade_ct's slots, so one pod
 * opening allowed flows as fast as its budget lets it can never fill the table (round three: it
 * evicted another pod's live connection within 63 s); where its flows fill a set of four, it evicts
 * its own first (ct_table.h). Counted in cascade_ct_counts by the program
 * at each new entry and set to the true count by the collector (bpfctl ctgc) every 10 s. */
#define CT_ENDPOINT_QUOTA 32768

#define CT_IDLE_TCP 21600
#define CT_IDLE_OTHER 60
#define CT_IDLE_CLOSING 10

/* verdict cache: the decision of an endpoint's rule sets for (remote identity, protocol, port).
 * Table ids name immutable content (a changed rule set gets a new id); in-place patches of tables
 * (identities no packet carries yet, or any more) bump the epoch, which invalidates every entry. */
struct verdict_key {
	__u32 admin;
	__u32 lower;
	__u32 identity;
	__u8 proto;
	__u8 pad;
	__u16 port; /* host order */
};
struct verdict_value {
	__u32 epoch;
	__u32 precedence;
	__u32 rule;
	__u8 verdict;
	__u8 pad[3];
};

/* cascade_config[0] */
struct config {
	__u32 epoch;      /* verdict cache: entries of another epoch are stale */
	__u32 generation; /* bumped after endpoints changed: conntrack entries of another generation
	                   * check their endpoint's revision once (and are re-judged if it moved) */
	__u32 clock;      /* seconds (CLOCK_MONOTONIC), advanced by the agent: conntrack's idea of now */
	__u32 host_identity; /* the node identity of this node: what its own addresses (HOST) are judged
	                      * as in the admin tier and the baseline; 0 = HOST is always allowed */
};

struct flow_event {
	__u8 src[16];
	__u8 dst[16];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 dir;
	__u8 verdict;
	__u8 reason; /* 0 policy, 1 fail-closed, 2 conntrack re-judged */
	__u32 remote_identity;
	__u32 rule;
	__u32 precedence;
	/* 1: the endpoint's staged tables give this new flow another verdict (staged_verdict, by
	 * staged_rule); 0: they agree, or it has none */
	__u8 staged;
	__u8 staged_verdict;
	__u16 pad;
	__u32 staged_rule;
};

/* fragments: the first fragment of a datagram records its L4 protocol and ports; later fragments
 * (which carry no ports) take them, or are dropped when their first fragment was not seen */
struct frag_key {
	__u8 src[16];
	__u8 dst[16];
	__u32 id;  /* IPv4 identification (16 bits) or IPv6 fragment header identification */
	__u8 proto; /* IPv4 protocol, or the fragment header's next header */
	__u8 pad[3];
};
struct frag_value {
	__u16 sport;
	__u16 dport; /* host order */
	__u8 proto;  /* the upper-layer protocol found in the first fragment */
	__u8 pad[3];
};

/* IPv6 extension headers walked to reach the upper layer; a longer chain is dropped */
#define MAX_EXTHDRS 8

/* counters (per CPU): index */
#define CNT_ALLOW 0
#define CNT_DENY 1
#define CNT_CT_HIT 2
#define CNT_CT_REJUDGED 3
#define CNT_MALFORMED 4
#define CNT_NOT_ENDPOINT 5
#define CNT_VERDICT_CACHED 6
#define CNT_SPOOFED 7         /* from a pod: another's address (an endpoint elsewhere, a pod or node the ipcache knows) as source or ARP/NDP claim */
#define CNT_BAD_L2 8          /* VLAN-tagged frames and ethertypes other than IPv4, IPv6, ARP */
#define CNT_FRAG_UNTRACKED 9  /* a later fragment whose first fragment was not seen */
#define CNT_FRAG_BAD 10       /* first fragments without the full L4 header, overlapping fragments */
#define CNT_EXTHDRS 11        /* more than MAX_EXTHDRS IPv6 extension headers */
#define CNT_ICMP_RELATED 12   /* ICMP errors passed as related to an allowed flow */
#define CNT_NDP 13            /* IPv6 neighbour discovery and MLD passed */
#define CNT_SVC_NEW 14        /* new flows to a Service sent to a backend */
#define CNT_SVC_NAT 15        /* packets translated (to a backend, or a reply back to the frontend) */
#define CNT_NDP_REFUSED 16    /* unicast NS/NA to or from an address that is not on the link */
#define CNT_EVENTS_SUPPRESSED 17 /* flow events an endpoint's bucket refused (events.h) */
#define CNT_FLOW_BUDGET 18    /* new flows dropped: their endpoint was over its budget of new flows */
#define CNT_ICMP_TRIMMED 19   /* related ICMP errors cut to the headers a stack reads (conntrack.h) */
#define CNT_UNBOUND_SOURCE 20 /* from a pod: a source nobody holds yet (a new pod before the agent binds it, or a made-up address) */
#define CNT_FLOW_CACHE_FILL 21 /* flow cache slots (re)filled by a conntrack hit (flowcache.h): churn, not traffic */
#define CNT_CT_QUOTA 22       /* new flows dropped: their endpoint held CT_ENDPOINT_QUOTA conntrack entries */
#define CNT_STAGED_DIFFER 23  /* new flows the staged tables would judge otherwise (never enforced) */
#define CNT_CT_EVICTED 24     /* conntrack entries of live flows overwritten by a new flow (their set was full: ct_table.h) */
#define CNT_CT_BUSY 25        /* allowed new flows passed untracked: their conntrack slot was being written by another CPU */
#define CNT_MAX 26

#endif
