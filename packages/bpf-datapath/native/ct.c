// The conntrack table from the helper (ct.h): the same slot protocol as the program (bpf/conntrack.h):
// a writer takes a slot's seq from even to odd with a compare-and-swap and releases it with an add; a
// reader reads seq, the slot, then seq again.
#include "ct.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

static struct ct_set *table;
static size_t table_bytes;
static __u64 seed;

int ct_attach(int table_fd, __u64 node_seed) {
	ct_detach();
	table_bytes = (size_t)CT_SETS * sizeof(struct ct_set);
	void *p = mmap(NULL, table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, table_fd, 0);
	if (p == MAP_FAILED) return -errno;
	table = p;
	seed = node_seed;
	return 0;
}

void ct_detach(void) {
	if (table) munmap(table, table_bytes);
	table = NULL;
}

static __u64 seq_of(struct ct_slot *w) { return __atomic_load_n(&w->seq, __ATOMIC_ACQUIRE); }

/* takes a slot for writing: 1, or 0 when another writer holds it (tried a few times) */
static int take(struct ct_slot *w, __u64 *held) {
	for (int t = 0; t < 64; t++) {
		__u64 s = seq_of(w);
		if (s & 1) continue;
		if (__atomic_compare_exchange_n(&w->seq, &s, s + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			*held = s;
			return 1;
		}
	}
	return 0;
}
static void release(struct ct_slot *w) { __atomic_fetch_add(&w->seq, 1, __ATOMIC_RELEASE); }

/* reads a slot stable: 1 with its key and value, 0 when empty or busy */
static int read_slot(struct ct_slot *w, struct ct_key *k, struct ct_value *v) {
	for (int t = 0; t < 64; t++) {
		__u64 s = seq_of(w);
		if (s & 1) continue;
		memcpy(k, &w->key, sizeof(*k));
		memcpy(v, &w->val, sizeof(*v));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq_of(w) != s) continue;
		return k->proto != 0;
	}
	return 0;
}

static struct ct_slot *find(const struct ct_key *k, struct ct_value *v) {
	if (!table) return NULL;
	struct ct_set *s = &table[ct_set_of(k, seed)];
	for (int i = 0; i < CT_WAYS; i++) {
		struct ct_key got;
		struct ct_value val;
		if (read_slot(&s->way[i], &got, &val) && ct_same_key(&got, k)) {
			if (v) *v = val;
			return &s->way[i];
		}
	}
	return NULL;
}

int ct_lookup(const struct ct_key *k, struct ct_value *out) { return find(k, out) != NULL; }

/* empties a slot if it still holds `k` once taken */
static int erase(struct ct_slot *w, const struct ct_key *k) {
	__u64 held;
	if (!take(w, &held)) return -EBUSY;
	if (ct_same_key(&w->key, k)) {
		memset(&w->key, 0, sizeof(w->key));
		memset(&w->val, 0, sizeof(w->val));
	}
	release(w);
	return 0;
}

int ct_delete(const struct ct_key *k) {
	struct ct_slot *w = find(k, NULL);
	return w ? erase(w, k) : 0;
}

int ct_update(const struct ct_key *k, const struct ct_value *v, int keep) {
	if (!table) return -ENOENT;
	struct ct_set *s = &table[ct_set_of(k, seed)];
	__u32 i = ct_victim(s, k, v->seen) & (CT_WAYS - 1);
	struct ct_slot *w = &s->way[i];
	__u64 held;
	if (!take(w, &held)) return -EBUSY;
	if (!(keep && ct_same_key(&w->key, k))) {
		memcpy(&w->key, k, sizeof(*k));
		memcpy(&w->val, v, sizeof(*v));
	}
	release(w);
	return 0;
}

size_t ct_each(ct_visit fn, void *arg) {
	size_t n = 0;
	if (!table) return 0;
	for (__u32 i = 0; i < CT_SETS; i++)
		for (int j = 0; j < CT_WAYS; j++) {
			struct ct_key k;
			struct ct_value v;
			if (!read_slot(&table[i].way[j], &k, &v)) continue;
			n++;
			if (fn) fn(&k, &v, arg);
		}
	return n;
}

size_t ct_clear(void) {
	size_t n = 0;
	if (!table) return 0;
	for (__u32 i = 0; i < CT_SETS; i++)
		for (int j = 0; j < CT_WAYS; j++) {
			struct ct_slot *w = &table[i].way[j];
			__u64 held;
			if (w->key.proto == 0 || !take(w, &held)) continue;
			n += w->key.proto != 0;
			memset(&w->key, 0, sizeof(w->key));
			memset(&w->val, 0, sizeof(w->val));
			release(w);
		}
	return n;
}

/* the collector's count of the entries it kept, per local endpoint address (open addressing; the
 * endpoints map holds at most 65,536 addresses, so 2^17 slots never fill) */
enum { SURVIVOR_SLOTS = 1 << 17 };
static struct { __u8 addr[16]; __u32 n; } survivors[SURVIVOR_SLOTS];
static __u32 *survivor_slot(const __u8 *addr, int add) {
	__u32 h = 2166136261u;
	for (int i = 0; i < 16; i++) h = (h ^ addr[i]) * 16777619u;
	for (__u32 probe = 0; probe < SURVIVOR_SLOTS; probe++) {
		__u32 i = (h + probe) & (SURVIVOR_SLOTS - 1);
		if (survivors[i].n && !memcmp(survivors[i].addr, addr, 16)) return &survivors[i].n;
		if (!survivors[i].n) {
			if (!add) return NULL;
			memcpy(survivors[i].addr, addr, 16);
			return &survivors[i].n;
		}
	}
	return NULL;
}
/* cascade_ct_counts set to what the collection kept: addresses with entries get their count, the
 * others are removed (the program counts up from there until the next collection) */
static void write_counts(int fd) {
	for (__u32 i = 0; i < SURVIVOR_SLOTS; i++)
		if (survivors[i].n) bpf_map_update_elem(fd, survivors[i].addr, &survivors[i].n, BPF_ANY);
	__u8 key[16], next[16];
	int more = !bpf_map_get_next_key(fd, NULL, next);
	while (more) {
		memcpy(key, next, 16);
		more = !bpf_map_get_next_key(fd, key, next);
		if (!survivor_slot(key, 0)) bpf_map_delete_elem(fd, key);
	}
}

int ct_collect(__u32 now, __u32 lim_tcp, __u32 lim_other, __u32 lim_closing, int counts_fd, size_t *scanned,
	       size_t *deleted) {
	if (!table) return -ENOENT;
	memset(survivors, 0, sizeof(survivors));
	*scanned = *deleted = 0;
	for (__u32 i = 0; i < CT_SETS; i++)
		for (int j = 0; j < CT_WAYS; j++) {
			struct ct_slot *w = &table[i].way[j];
			struct ct_key k;
			struct ct_value v;
			if (!read_slot(w, &k, &v)) continue;
			(*scanned)++;
			__u32 idle = v.seen > now ? 0 : now - v.seen;
			__u32 limit = v.closing ? lim_closing : k.proto == IPPROTO_TCP ? lim_tcp : lim_other;
			if (idle <= limit) {
				__u32 *n = survivor_slot(k.local, 1);
				if (n) (*n)++;
				continue;
			}
			/* a packet may have refreshed it since it was read: erase only what is still idle */
			__u64 held;
			if (!take(w, &held)) continue;
			if (ct_same_key(&w->key, &k) && w->val.seen == v.seen) {
				memset(&w->key, 0, sizeof(w->key));
				memset(&w->val, 0, sizeof(w->val));
				(*deleted)++;
			}
			release(w);
		}
	if (counts_fd >= 0) write_counts(counts_fd);
	return 0;
}

int ct_is_legacy(int fd) {
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	return !bpf_obj_get_info_by_fd(fd, &info, &len) && info.type == BPF_MAP_TYPE_LRU_HASH &&
	       info.key_size == sizeof(struct ct_key) && info.value_size == sizeof(struct ct_value);
}

long ct_migrate(int legacy_fd) {
	if (!table) return -ENOENT;
	enum { CHUNK = 4096 };
	static struct ct_key keys[CHUNK];
	static struct ct_value vals[CHUNK];
	__u64 token = 0;
	int first = 1, more = 1;
	long copied = 0;
	while (more) {
		__u32 count = CHUNK;
		LIBBPF_OPTS(bpf_map_batch_opts, bo);
		int r = bpf_map_lookup_batch(legacy_fd, first ? NULL : &token, &token, keys, vals, &count, &bo);
		first = 0;
		if (r && errno != ENOENT) return -errno; /* ENOENT: the last batch */
		more = !r;
		for (__u32 i = 0; i < count; i++) {
			if (keys[i].proto == 0 || find(&keys[i], NULL)) continue;
			if (!ct_update(&keys[i], &vals[i], 1)) copied++;
		}
	}
	return copied;
}

long ct_migrate_pinned(const char *pin_dir, int final) {
	char path[512];
	snprintf(path, sizeof(path), "%s/maps/cascade_ct_legacy", pin_dir);
	int fd = bpf_obj_get(path);
	if (fd < 0) return 0;
	long n = ct_is_legacy(fd) ? ct_migrate(fd) : 0;
	close(fd);
	if (n >= 0 && final) unlink(path);
	return n;
}

struct text { char *buf; size_t len, cap; int failed; };
static void hex_to(struct text *t, const unsigned char *b, size_t n, char end) {
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		t->buf[t->len++] = digits[b[i] >> 4];
		t->buf[t->len++] = digits[b[i] & 15];
	}
	t->buf[t->len++] = end;
}
static void text_row(const struct ct_key *k, const struct ct_value *v, void *arg) {
	struct text *t = arg;
	size_t need = 2 * (sizeof(*k) + sizeof(*v)) + 2;
	if (t->failed) return;
	if (t->len + need > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1 << 20;
		char *grown = realloc(t->buf, cap);
		if (!grown) { t->failed = 1; return; }
		t->buf = grown;
		t->cap = cap;
	}
	hex_to(t, (const unsigned char *)k, sizeof(*k), ' ');
	hex_to(t, (const unsigned char *)v, sizeof(*v), '\n');
}
char *ct_dump_text(size_t *n, size_t *len) {
	struct text t = {0};
	*n = ct_each(text_row, &t);
	if (t.failed || (!t.buf && *n)) { free(t.buf); errno = ENOMEM; return NULL; }
	*len = t.len;
	return t.buf ? t.buf : calloc(1, 1);
}

int ct_seed_object(struct bpf_object *obj, const char *pin_dir, __u64 *seed) {
	char path[512];
	__u32 zero = 0;
	*seed = 0;
	snprintf(path, sizeof(path), "%s/maps/cascade_ct_seed", pin_dir);
	int fd = bpf_obj_get(path), kept = fd >= 0;
	if (fd >= 0) {
		if (bpf_map_lookup_elem(fd, &zero, seed)) *seed = 0;
		close(fd);
	}
	if (!*seed) kept = 0;
	while (!*seed && getrandom(seed, sizeof(*seed), 0) == sizeof(*seed)) {}
	struct bpf_map *m, *ro = NULL;
	bpf_object__for_each_map(m, obj)
		if (bpf_map__is_internal(m) && strstr(bpf_map__name(m), "ctseed")) ro = m;
	size_t size = 0;
	if (!ro || !bpf_map__initial_value(ro, &size) || size != sizeof(*seed) ||
	    bpf_map__set_initial_value(ro, seed, sizeof(*seed)))
		return -1;
	return kept;
}
