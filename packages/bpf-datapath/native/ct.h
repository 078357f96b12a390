// The helper's side of the conntrack table (bpf/ct_table.h): the map mmapped, slots read and written
// with the program's seq protocol, the collector, and the migration from the LRU hash of Cascade
// before the set-associative table.
#ifndef CASCADE_NATIVE_CT_H
#define CASCADE_NATIVE_CT_H
#include <linux/types.h>
#include <stddef.h>
#include "../bpf/cascade.h"

/* maps the table (an array map with BPF_F_MMAPABLE) and takes the node's seed; 0 or -errno */
int ct_attach(int table_fd, __u64 seed);
void ct_detach(void);
/* 1 and the value when `k` is tracked, 0 when not */
int ct_lookup(const struct ct_key *k, struct ct_value *out);
/* 0 (gone already is fine) or -EBUSY when its slot stayed busy */
int ct_delete(const struct ct_key *k);
/* writes `k`'s entry as the program would (its own way, an empty one, else the set's stalest);
 * `keep`: leave an entry that is there already as it is (migration). 0, or -EBUSY. */
int ct_update(const struct ct_key *k, const struct ct_value *v, int keep);
/* empties the table; how many entries it held */
size_t ct_clear(void);
/* every entry read stable; returns how many */
typedef void (*ct_visit)(const struct ct_key *k, const struct ct_value *v, void *arg);
size_t ct_each(ct_visit fn, void *arg);
/* deletes entries idle past their limit, then writes each local address's count into counts_fd
 * (cascade_ct_counts); 0 or -errno */
int ct_collect(__u32 now, __u32 lim_tcp, __u32 lim_other, __u32 lim_closing, int counts_fd, size_t *scanned,
	       size_t *deleted);
/* copies the entries of an LRU-hash conntrack of an older Cascade (key 40, value 32 bytes) that the
 * table does not hold yet; returns how many were copied, or -errno */
long ct_migrate(int legacy_fd);
/* 1 when `fd` is such an older conntrack map */
int ct_is_legacy(int fd);
/* copies PINDIR/maps/cascade_ct_legacy (set aside by load) into the table; `final`: then unpins it.
 * How many were copied (0 without one), or -errno. */
long ct_migrate_pinned(const char *pin_dir, int final);
/* every entry as "KEYHEX VALHEX" lines (malloc'd, `len` bytes), `n` of them; NULL on no memory */
char *ct_dump_text(size_t *n, size_t *len);
struct bpf_object;
/* the node's seed into `obj`'s .rodata.ctseed before load: the one pinned in PINDIR/maps/cascade_ct_seed,
 * else a new random one (`seed`). 1 when it was pinned, 0 when new, -1 without the section. */
int ct_seed_object(struct bpf_object *obj, const char *pin_dir, __u64 *seed);

#endif
