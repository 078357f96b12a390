/* The datapath's maps: what the agent writes (endpoints, identities, policy tables, Services,
 * config) and what the program keeps (conntrack, NAT, fragments, the verdict cache, counters, the
 * event ring). Their key and value layouts are in cascade.h, shared with the loader's codecs. Also
 * the two accessors every stage uses: count() and config(). Included first, by cascade.bpf.c. */
#ifndef CASCADE_MAPS_H
#define CASCADE_MAPS_H

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct ipcache_key);
	__type(value, struct ipcache_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_ipcache SEC(".maps");

/* host addresses (/32, /128) -> identity: the exact lookup that pods and nodes take */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, struct ipcache_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_hosts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, struct endpoint_value);
	__uint(max_entries, 65536);
} cascade_endpoints SEC(".maps");

/* endpoints with EP_STAGED: their staged tables */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, struct staged_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_staged SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct policy_key);
	__type(value, struct policy_value);
	__uint(max_entries, 1048576);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_policy SEC(".maps");

/* conntrack: CT_SETS sets of CT_WAYS flows (ct_table.h), mmapable so the helper collects and migrates
 * entries with the same slot protocol as the program */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct ct_set);
	__uint(max_entries, CT_SETS);
	__uint(map_flags, BPF_F_MMAPABLE);
} cascade_ct SEC(".maps");

/* the node's conntrack hash seed: random, chosen by the helper's first load and kept here across
 * restarts; each load copies it into the program's .rodata.ctseed (conntrack.h) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} cascade_ct_seed SEC(".maps");

/* conntrack entries per local endpoint address (CT_ENDPOINT_QUOTA): the program adds one per new
 * entry, the collector (bpfctl ctgc) writes the true count after each collection */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct endpoint_key);
	__type(value, __u32);
	__uint(max_entries, 65536);
} cascade_ct_counts SEC(".maps");

/* first fragments' protocol and ports, for their later fragments */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct frag_key);
	__type(value, struct frag_value);
	__uint(max_entries, 16384);
} cascade_frags SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct verdict_key);
	__type(value, struct verdict_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
} cascade_verdicts SEC(".maps");

/* Service frontends -> backend list id and size; backends by (list id, slot) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct backend_key);
	__type(value, struct nat_value);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} cascade_backends SEC(".maps");

/* a translated flow: its original tuple (local pod, frontend) -> the backend it was sent to */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct nat_value);
	__uint(max_entries, 262144);
} cascade_nat SEC(".maps");

/* its translated tuple (local pod, backend) -> the frontend, for the replies */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct nat_value);
	__uint(max_entries, 262144);
} cascade_revnat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct config);
	__uint(max_entries, 1);
} cascade_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, CNT_MAX);
} cascade_counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} cascade_events SEC(".maps");


static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&cascade_counters, &idx);
	if (c)
		*c += 1;
}

static __always_inline struct config *config(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cascade_config, &zero);
}

#endif
