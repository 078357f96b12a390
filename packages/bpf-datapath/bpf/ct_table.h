/* The conntrack table's shape, shared by the program (conntrack.h) and the helper (native/ct.c).
 *
 * cascade_ct is a set-associative table, not a kernel hash: an mmapable array of CT_SETS sets of
 * CT_WAYS slots, a flow's set chosen by a keyed hash of its key (the node's seed: random, kept in
 * cascade_ct_seed across restarts). A lookup hashes the key and compares the set's ways; an insert
 * writes the way that holds the same key, else an empty one, else the stalest of the same local
 * endpoint's, else the set's stalest (Cascade's own eviction: constant work, no allocation, no global
 * lock, so a full table inserts at the cost of an empty one). Why not the kernel's LRU hash it
 * replaces: its insert was half of a first packet (73 ns of 151) and an insert into a full table cost
 * 2.2-2.8x an insert into an empty one (the LRU's shrink under its lock); a preallocated hash was
 * 25-30% cheaper but has no eviction, and a 16-byte IPv4 key beside the IPv6 one changed nothing
 * measurable (the kernel's hash and its element memory dominate, not the key's length). Measured in
 * the bpf-datapath README.
 *
 * A slot's seq is even while it is stable and odd while one writer (a CPU, or the helper through the
 * mmap) rewrites it; the writer takes it with a compare-and-swap and releases it with an atomic add.
 * A reader compares the key, copies what it needs and reads seq again: a slot rewritten meanwhile
 * reads as a miss. (Loads are ordered on x86-64, the only architecture Cascade ships; the atomics are
 * full barriers.) A flow's own fields that change in place (seen, closing, a refresh's generation) are
 * single aligned stores, written only while the slot still holds the flow as it was read. */
#ifndef CASCADE_CT_TABLE_H
#define CASCADE_CT_TABLE_H

#if defined(__clang__)
#define CT_UNROLL _Pragma("unroll")
#else
#define CT_UNROLL
#endif

#define CT_WAYS 4
/* 131,072 sets x 4 ways: 524,288 slots (40 MiB) where the LRU hash held 262,144 flows (34 MiB): sets
 * fill at random, so a set-associative table needs room to spare. With N flows the share of new
 * flows that find their set full is 0.04% at 65,536, 0.4% at 131,072, 3.8% at 262,144 (a Poisson
 * count per set; bpf-datapath README "The conntrack table"). */
#define CT_SET_BITS 17
#define CT_SETS (1u << CT_SET_BITS)

struct ct_slot {
	__u64 seq; /* 64 bits: the BPF target's compare-and-swap without ALU32 */
	struct ct_key key; /* key.proto 0: an empty slot (no flow has protocol 0 here) */
	struct ct_value val;
};
struct ct_set {
	struct ct_slot way[CT_WAYS];
};

/* the set of a key: a keyed multiply-xorshift over the key's five 8-byte words. Pod owners choose
 * ports and (within their pods) addresses; without the node's seed they cannot aim flows at one set. */
static inline __attribute__((always_inline)) __u32 ct_set_of(const struct ct_key *k, __u64 seed)
{
	const __u64 *w = (const __u64 *)k;
	__u64 h = seed ^ 0x243f6a8885a308d3ULL;
CT_UNROLL
	for (int i = 0; i < 5; i++) {
		h ^= w[i];
		h *= 0x9e3779b97f4a7c15ULL;
		h ^= h >> 31;
	}
	h *= 0xbf58476d1ce4e5b9ULL;
	return (__u32)(h >> (64 - CT_SET_BITS));
}

static inline __attribute__((always_inline)) int ct_same_key(const struct ct_key *a, const struct ct_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	/* the ports and protocol first: they differ most; IPv4 keys share their first 8 bytes */
	return x[4] == y[4] && x[1] == y[1] && x[3] == y[3] && x[0] == y[0] && x[2] == y[2];
}

/* Which way of a set an insert of `k` takes: the one holding `k`, else an empty one, else the
 * stalest of the set's flows of the same local endpoint (a pod opening flows faster than they close
 * evicts its own first), else the set's stalest (idle longest by the clock; a closing flow counts an
 * hour older). */
static inline __attribute__((always_inline)) __u32 ct_victim(struct ct_set *s, const struct ct_key *k, __u32 clock)
{
	const __u64 *kl = (const __u64 *)k->local;
	__u32 same = CT_WAYS, empty = CT_WAYS, pick = 0, own = CT_WAYS;
	__u32 worst = 0, own_worst = 0;
CT_UNROLL
	for (__u32 i = 0; i < CT_WAYS; i++) {
		struct ct_slot *w = &s->way[i];
		if (w->key.proto == 0) {
			if (empty == CT_WAYS)
				empty = i;
			continue;
		}
		if (ct_same_key(&w->key, k))
			same = i;
		__u32 idle = clock - w->val.seen;
		if (idle > (1u << 30))
			idle = 0; /* seen ahead of this clock (another CPU's newer tick) */
		if (w->val.closing)
			idle += 3600;
		if (idle >= worst) {
			worst = idle;
			pick = i;
		}
		const __u64 *wl = (const __u64 *)w->key.local;
		if (wl[0] == kl[0] && wl[1] == kl[1] && (own == CT_WAYS || idle >= own_worst)) {
			own_worst = idle;
			own = i;
		}
	}
	return same < CT_WAYS ? same : empty < CT_WAYS ? empty : own < CT_WAYS ? own : pick;
}

#endif
