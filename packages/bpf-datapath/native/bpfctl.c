// cascade-bpfctl: the loader's kernel interface, a thin line-protocol front end to libbpf.
// One command per line on stdin, one answer line on stdout ("ok ..." or "err ...").
//   load OBJ PINDIR [MAX [SLOTS]]  load the object, adopting maps already pinned in PINDIR/maps
//                          (MAX: policy map capacity, 0 the default; SLOTS: the flow cache's slots
//                          per CPU, a power of two from 256 to 65536, 0 the default); answers
//                          "ok [replaced MAP...] [migrated cascade_ct N]": pinned maps whose layout
//                          was incompatible (their content lost), and the flows copied from an older
//                          Cascade's conntrack (an LRU hash, kept aside as cascade_ct_legacy)
//   open PINDIR            use maps and programs pinned in PINDIR
//   update MAP KEYHEX VALHEX | delete MAP KEYHEX | lookup MAP KEYHEX
//   updates MAP N          then N lines "KEYHEX VALHEX" (one answer: ok N | err at line i)
//   deletes MAP N          then N lines "KEYHEX"
//   writeb MAP N           then N binary records key+value (batch update; answer ok N | err at i)
//   eraseb MAP N           then N binary keys (batch delete; keys already gone are fine)
//   ctmigrate              copy what an older Cascade's conntrack (set aside by load) holds that the
//                          table does not, then unpin it: ok N (copied)
//   ctclear                empty the conntrack table: ok N (entries removed)
//   ctgc NOW [TCP OTHER CLOSING]  delete conntrack entries idle longer than their limit (seconds of
//                          the config clock; defaults CT_IDLE_*), then write each endpoint
//                          address's true count into cascade_ct_counts: ok SCANNED DELETED
//   dump MAP               ok N, then N lines "KEYHEX VALHEX"
//   sum MAP KEYHEX         sum of a per-CPU u64 slot
//   run PROG PKTHEX [REPEAT [IFINDEX]]  BPF_PROG_TEST_RUN (on IFINDEX, default loopback):
//                          ok RETVAL AVG_NS
//   events                 drain the ring buffer: ok N, then N lines of event hex
//   attach IF ingress|egress PROG | detach IF ingress|egress   IF: an ifindex, or a name matching
//                          ^[A-Za-z0-9_.@-]{1,15}$ (anything else is refused)
//   maxentries MAP         ok N: the map's capacity
//   tclist                 interfaces whose tc hooks hold our programs: ok N, then N lines
//                          "IFINDEX INGRESS EGRESS" (1 where ours is attached at handle 1/prio 1)
// Commands are single lines of printable tokens (the TypeScript side refuses anything else); the
// only binary payloads are the length-counted records of writeb/eraseb.
//   quit
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#ifndef ENOTSUPP
#define ENOTSUPP 524
#endif
#include <linux/pkt_cls.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <netinet/in.h>
#include "../bpf/cascade.h"
#include "ct.h"

#define MAX_MAPS 24
#define MAX_PROGS 8
/* ct: the conntrack table (ct.c), whose key and value sizes here are a flow's, not the array's */
static struct { char name[64]; int fd; __u32 key_size, value_size; int type, ct; } maps[MAX_MAPS];
static int nmaps;
static struct { char name[64]; int fd; } progs[MAX_PROGS];
static int nprogs;
static char line[1 << 20];

static int hexval(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }
static int unhex(const char *s, unsigned char *out, size_t max) {
	size_t n = strlen(s);
	if (n % 2 || n / 2 > max) return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int a = hexval(s[2 * i]), b = hexval(s[2 * i + 1]);
		if (a < 0 || b < 0) return -1;
		out[i] = (unsigned char)(a * 16 + b);
	}
	return (int)(n / 2);
}
/* An interface by ifindex (decimal) or by a name of the kernel's charset for names we accept. */
static int iface_index(const char *s) {
	if (!s || !*s) return 0;
	int digits = 1, ok = 1;
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c < '0' || c > '9') digits = 0;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '@' || c == '-')) ok = 0;
	}
	if (digits) return n <= 9 ? atoi(s) : 0;
	if (!ok || n > 15) return 0;
	return (int)if_nametoindex(s);
}
static __u32 prog_id(int fd) {
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}
/* 1 when our program is at handle 1 / priority 1 of that hook */
static int tc_has(int ifindex, enum bpf_tc_attach_point where, __u32 want) {
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = where);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = 1, .priority = 1);
	if (bpf_tc_query(&hook, &o)) return 0;
	return want && o.prog_id == want;
}

static void puthex(const unsigned char *b, size_t n) { for (size_t i = 0; i < n; i++) printf("%02x", b[i]); }

static int map_index(const char *name) {
	for (int i = 0; i < nmaps; i++) if (!strcmp(maps[i].name, name)) return i;
	return -1;
}

static int prog_fd(const char *name) {
	for (int i = 0; i < nprogs; i++) if (!strcmp(progs[i].name, name)) return progs[i].fd;
	return -1;
}
static void add_map(const char *name, int fd) {
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	bpf_obj_get_info_by_fd(fd, &info, &len);
	snprintf(maps[nmaps].name, sizeof(maps[nmaps].name), "%s", name);
	maps[nmaps].fd = fd;
	maps[nmaps].key_size = info.key_size;
	maps[nmaps].value_size = info.value_size;
	maps[nmaps].type = info.type;
	maps[nmaps].ct = !strcmp(name, "cascade_ct");
	if (maps[nmaps].ct) {
		maps[nmaps].key_size = sizeof(struct ct_key);
		maps[nmaps].value_size = sizeof(struct ct_value);
	}
	nmaps++;
}

/* one map operation, through ct.c for the conntrack table: 0 or -1 with errno set */
static int op_update(int mi, const void *k, const void *v) {
	if (!maps[mi].ct) return bpf_map_update_elem(maps[mi].fd, k, v, BPF_ANY);
	int r = ct_update(k, v, 0);
	if (r) errno = -r;
	return r ? -1 : 0;
}
static int op_delete(int mi, const void *k) {
	if (!maps[mi].ct) return bpf_map_delete_elem(maps[mi].fd, k);
	int r = ct_delete(k);
	if (r) errno = -r;
	return r ? -1 : 0;
}
static int op_lookup(int mi, const void *k, void *v) {
	if (!maps[mi].ct) return bpf_map_lookup_elem(maps[mi].fd, k, v);
	if (ct_lookup(k, v)) return 0;
	errno = ENOENT;
	return -1;
}
static char pin_dir[400];
static long migrate_legacy(int final) { return ct_migrate_pinned(pin_dir, final); }

static int do_open(const char *dir) {
	static const char *map_names[] = {"cascade_ipcache", "cascade_hosts", "cascade_verdicts", "cascade_config", "cascade_endpoints", "cascade_policy", "cascade_ct", "cascade_ct_counts", "cascade_frags", "cascade_counters", "cascade_events", "cascade_services", "cascade_backends", "cascade_nat", "cascade_revnat", "cascade_flows", "cascade_staged", "cascade_ct_seed"};
	static const char *prog_names[] = {"from_endpoint", "to_endpoint", "bench_baseline"};
	char path[512];
	nmaps = nprogs = 0;
	for (unsigned i = 0; i < sizeof(map_names) / sizeof(*map_names); i++) {
		snprintf(path, sizeof(path), "%s/maps/%s", dir, map_names[i]);
		int fd = bpf_obj_get(path);
		if (fd < 0) { printf("err open %s: %s\n", path, strerror(errno)); return -1; }
		add_map(map_names[i], fd);
	}
	__u64 seed = 0;
	__u32 zero = 0;
	int ct = map_index("cascade_ct"), sd = map_index("cascade_ct_seed");
	if (bpf_map_lookup_elem(maps[sd].fd, &zero, &seed) || ct_attach(maps[ct].fd, seed)) {
		printf("err conntrack table: %s\n", strerror(errno));
		return -1;
	}
	snprintf(pin_dir, sizeof(pin_dir), "%s", dir);
	for (unsigned i = 0; i < sizeof(prog_names) / sizeof(*prog_names); i++) {
		snprintf(path, sizeof(path), "%s/progs/%s", dir, prog_names[i]);
		int fd = bpf_obj_get(path);
		if (fd < 0) { printf("err open %s: %s\n", path, strerror(errno)); return -1; }
		snprintf(progs[nprogs].name, sizeof(progs[nprogs].name), "%s", prog_names[i]);
		progs[nprogs++].fd = fd;
	}
	return 0;
}

/* maps replaced on the last load because their pinned layout was incompatible */
static char replaced[1024];

/* The flow cache's slots per CPU (a power of two, 2^8 to 2^16): the map's size and the shift its
 * slot index uses, in the object's own read-only section (.rodata.flowcache). */
static int set_flow_slots(struct bpf_object *obj, const char *flow_slots) {
	long n = flow_slots ? atol(flow_slots) : 0;
	if (n == 0) return 0;
	__u32 bits = 0;
	while ((1L << bits) < n) bits++;
	if ((1L << bits) != n || bits < 8 || bits > 16) { printf("err flow slots %ld: a power of two from 256 to 65536\n", n); return -1; }
	struct bpf_map *fm = bpf_object__find_map_by_name(obj, "cascade_flows");
	struct bpf_map *m, *ro = NULL;
	bpf_object__for_each_map(m, obj)
		if (bpf_map__is_internal(m) && strstr(bpf_map__name(m), "flowcache")) ro = m;
	size_t size = 0;
	if (!fm || !ro || !bpf_map__initial_value(ro, &size) || size != sizeof(bits)) { printf("err flow slots: no flow cache in the object\n"); return -1; }
	if (bpf_map__set_max_entries(fm, (__u32)n) || bpf_map__set_initial_value(ro, &bits, sizeof(bits))) { printf("err flow slots: %s\n", strerror(errno)); return -1; }
	return 0;
}

/* an older Cascade's conntrack was set aside on the last load */
static int legacy;

static int do_load(const char *obj_path, const char *dir, const char *policy_max, const char *flow_slots) {
	char path[512];
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	if (!obj) { printf("err open %s: %s\n", obj_path, strerror(errno)); return -1; }
	if (policy_max && atol(policy_max) > 0) {
		struct bpf_map *pm = bpf_object__find_map_by_name(obj, "cascade_policy");
		if (pm) bpf_map__set_max_entries(pm, (__u32)atoi(policy_max));
	}
	if (set_flow_slots(obj, flow_slots)) { bpf_object__close(obj); return -1; }
	snprintf(path, sizeof(path), "%s/maps", dir);
	mkdir(dir, 0700);
	mkdir(path, 0700);
	struct bpf_map *m;
	/* the node's conntrack seed: the one pinned beside the table, else a new random one */
	__u64 seed = 0;
	__u32 zero = 0;
	int seed_kept = ct_seed_object(obj, dir, &seed);
	if (seed_kept < 0) { printf("err conntrack seed: no .rodata.ctseed in the object\n"); bpf_object__close(obj); return -1; }
	/* adopt maps that are already pinned: their state (policy, conntrack) survives a restart. A pinned
	 * map whose layout differs from this object's (an upgrade changed it) is replaced by a new one;
	 * an older Cascade's conntrack is kept aside and its entries copied (migrate_legacy). */
	replaced[0] = 0;
	legacy = 0;
	bpf_object__for_each_map(m, obj) {
		/* the object's own data sections (the flow cache's shift) are never adopted: they are this load's */
		if (bpf_map__is_internal(m)) continue;
		snprintf(path, sizeof(path), "%s/maps/%s", dir, bpf_map__name(m));
		int fd = bpf_obj_get(path);
		if (fd < 0) continue;
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);
		int is_ct = !strcmp(bpf_map__name(m), "cascade_ct");
		if (is_ct && ct_is_legacy(fd)) {
			char aside[520];
			snprintf(aside, sizeof(aside), "%s_legacy", path);
			/* bpffs has no rename: pinned again aside, then unpinned here */
			unlink(aside);
			if (!bpf_obj_pin(fd, aside)) legacy = 1;
			close(fd);
			unlink(path);
			continue;
		}
		/* a table whose seed is gone cannot be read: replaced */
		if (bpf_obj_get_info_by_fd(fd, &info, &len) || (is_ct && !seed_kept) || info.type != bpf_map__type(m) ||
		    info.key_size != bpf_map__key_size(m) || info.value_size != bpf_map__value_size(m) ||
		    info.max_entries != bpf_map__max_entries(m) || info.map_flags != bpf_map__map_flags(m)) {
			close(fd);
			unlink(path);
			snprintf(replaced + strlen(replaced), sizeof(replaced) - strlen(replaced), " %s", bpf_map__name(m));
			continue;
		}
		if (bpf_map__reuse_fd(m, fd)) { printf("err reuse %s\n", path); return -1; }
		close(fd);
	}
	if (bpf_object__load(obj)) { printf("err load: %s\n", strerror(errno)); return -1; }
	struct bpf_map *sm = bpf_object__find_map_by_name(obj, "cascade_ct_seed");
	if (!sm || bpf_map_update_elem(bpf_map__fd(sm), &zero, &seed, BPF_ANY)) { printf("err conntrack seed\n"); return -1; }
	bpf_object__for_each_map(m, obj) {
		if (bpf_map__is_internal(m)) continue;
		snprintf(path, sizeof(path), "%s/maps/%s", dir, bpf_map__name(m));
		if (access(path, F_OK) && bpf_map__pin(m, path)) { printf("err pin %s\n", path); return -1; }
	}
	snprintf(path, sizeof(path), "%s/progs", dir);
	mkdir(path, 0700);
	struct bpf_program *p;
	bpf_object__for_each_program(p, obj) {
		snprintf(path, sizeof(path), "%s/progs/%s", dir, bpf_program__name(p));
		unlink(path);
		if (bpf_program__pin(p, path)) { printf("err pin %s\n", path); return -1; }
	}
	bpf_object__close(obj);
	return do_open(dir);
}

static int events_seen;
static int on_event(void *ctx, void *data, size_t size) {
	(void)ctx;
	puthex(data, size);
	printf("\n");
	events_seen++;
	return 0;
}

int main(void) {
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	libbpf_set_print(NULL);
	unsigned char key[512], val[4096];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		char *cmd = strtok(line, " ");
		if (!cmd) continue;
		char *a = strtok(NULL, " "), *b = strtok(NULL, " "), *c = strtok(NULL, " ");
		if (!strcmp(cmd, "quit")) break;
		if (!strcmp(cmd, "load")) {
			char *d = strtok(NULL, " ");
			if (!do_load(a, b, c, d)) {
				printf("ok%s%s", replaced[0] ? " replaced" : "", replaced);
				if (legacy) printf(" migrated cascade_ct %ld", migrate_legacy(0));
				printf("\n");
			}
		} else if (!strcmp(cmd, "ctmigrate")) printf("ok %ld\n", migrate_legacy(1));
		else if (!strcmp(cmd, "ctclear")) printf("ok %zu\n", ct_clear());
		else if (!strcmp(cmd, "open")) { if (!do_open(a)) printf("ok\n"); }
		else if (!strcmp(cmd, "update") || !strcmp(cmd, "delete") || !strcmp(cmd, "lookup") || !strcmp(cmd, "sum")) {
			int mi = a ? map_index(a) : -1;
			if (mi < 0 || !b || unhex(b, key, sizeof(key)) != (int)maps[mi].key_size) { printf("err bad map or key\n"); goto next; }
			if (!strcmp(cmd, "update")) {
				if (!c || unhex(c, val, sizeof(val)) != (int)maps[mi].value_size) { printf("err bad value\n"); goto next; }
				if (op_update(mi, key, val)) printf("err update: %s\n", strerror(errno)); else printf("ok\n");
			} else if (!strcmp(cmd, "delete")) {
				if (op_delete(mi, key) && errno != ENOENT) printf("err delete: %s\n", strerror(errno)); else printf("ok\n");
			} else if (!strcmp(cmd, "lookup")) {
				if (op_lookup(mi, key, val)) printf("ok none\n"); else { printf("ok "); puthex(val, maps[mi].value_size); printf("\n"); }
			} else {
				int ncpu = libbpf_num_possible_cpus();
				unsigned long long *vals = calloc(ncpu, 8), sum = 0;
				if (bpf_map_lookup_elem(maps[mi].fd, key, vals)) printf("err sum: %s\n", strerror(errno));
				else { for (int i = 0; i < ncpu; i++) sum += vals[i]; printf("ok %llu\n", sum); }
				free(vals);
			}
		} else if (!strcmp(cmd, "updates") || !strcmp(cmd, "deletes")) {
			int mi = a ? map_index(a) : -1;
			int n = b ? atoi(b) : 0, bad = -1, err = 0;
			const int updating = cmd[0] == 'u'; /* the payload lines reuse the line buffer */
			for (int i = 0; i < n; i++) {
				if (!fgets(line, sizeof(line), stdin)) break;
				line[strcspn(line, "\n")] = 0;
				if (bad >= 0 || mi < 0) continue;
				char *k = strtok(line, " "), *v = strtok(NULL, " ");
				if (!k || unhex(k, key, sizeof(key)) != (int)maps[mi].key_size) { bad = i; continue; }
				if (updating) {
					if (!v || unhex(v, val, sizeof(val)) != (int)maps[mi].value_size) { bad = i; continue; }
					if (op_update(mi, key, val)) { bad = i; err = errno; }
				} else if (op_delete(mi, key) && errno != ENOENT) { bad = i; err = errno; }
			}
			if (mi < 0) printf("err no map\n");
			else if (bad >= 0) printf("err at %d: %s\n", bad, err ? strerror(err) : "bad line");
			else printf("ok %d\n", n);
		} else if (!strcmp(cmd, "writeb") || !strcmp(cmd, "eraseb")) {
			/* binary payload: N keys (and values) back to back, applied with the batch ops
			 * (generic in the kernel for LPM tries and hashes: one syscall instead of N) */
			int mi = a ? map_index(a) : -1;
			__u32 n = b ? (__u32)atol(b) : 0;
			const int writing = cmd[0] == 'w';
			size_t ks = mi >= 0 ? maps[mi].key_size : 0, vs = mi >= 0 ? maps[mi].value_size : 0;
			size_t rec = ks + (writing ? vs : 0);
			unsigned char *buf = rec ? malloc(rec * (n ? n : 1)) : NULL;
			unsigned char *kb = NULL, *vb = NULL;
			if (buf && fread(buf, rec, n, stdin) != n) { printf("err short payload\n"); free(buf); goto next; }
			if (mi < 0 || !buf) { printf("err no map\n"); free(buf); goto next; }
			kb = malloc(ks * (n ? n : 1));
			vb = writing ? malloc(vs * (n ? n : 1)) : NULL;
			for (__u32 i = 0; i < n; i++) {
				memcpy(kb + i * ks, buf + i * rec, ks);
				if (writing) memcpy(vb + i * vs, buf + i * rec + ks, vs);
			}
			__u32 done = 0;
			int err = 0;
			while (done < n) {
				__u32 count = n - done;
				LIBBPF_OPTS(bpf_map_batch_opts, bo);
				int r = maps[mi].ct ? (errno = EOPNOTSUPP, -1)
				        : writing ? bpf_map_update_batch(maps[mi].fd, kb + done * ks, vb + done * vs, &count, &bo)
				                  : bpf_map_delete_batch(maps[mi].fd, kb + done * ks, &count, &bo);
				if (!r) { done += count; break; }
				err = errno;
				if (err == EINVAL || err == ENOTSUPP || err == EOPNOTSUPP) {
					/* no batch ops for this map: one at a time */
					for (; done < n; done++) {
						int e2 = writing ? op_update(mi, kb + done * ks, vb + done * vs) : op_delete(mi, kb + done * ks);
						if (e2 && !(!writing && errno == ENOENT)) { err = errno; break; }
					}
					if (done == n) err = 0;
					break;
				}
				done += count;
				if (!writing && err == ENOENT) { done++; err = 0; continue; } /* already gone: fine */
				break;
			}
			if (err && done < n) printf("err at %u: %s\n", done, strerror(err));
			else printf("ok %u\n", n);
			free(buf); free(kb); free(vb);
		} else if (!strcmp(cmd, "ctgc")) {
			/* conntrack collector: deletes entries idle for longer than their limit, after copying
			 * what an older Cascade's programs may still have added to its conntrack */
			char *d = strtok(NULL, " ");
			if (!a) { printf("err usage: ctgc NOW [TCP OTHER CLOSING]\n"); goto next; }
			migrate_legacy(1);
			__u32 now = (__u32)strtoul(a, NULL, 10);
			__u32 lim_tcp = b ? (__u32)atol(b) : CT_IDLE_TCP, lim_other = c ? (__u32)atol(c) : CT_IDLE_OTHER;
			__u32 lim_closing = d ? (__u32)atol(d) : CT_IDLE_CLOSING;
			int ci = map_index("cascade_ct_counts");
			size_t scanned = 0, deleted = 0;
			int r = ct_collect(now, lim_tcp, lim_other, lim_closing, ci >= 0 ? maps[ci].fd : -1, &scanned, &deleted);
			if (r) printf("err ctgc: %s\n", strerror(-r));
			else printf("ok %zu %zu\n", scanned, deleted);
		} else if (!strcmp(cmd, "dump")) {
			int mi = a ? map_index(a) : -1;
			if (mi < 0) { printf("err no map\n"); goto next; }
			if (maps[mi].ct) {
				size_t n = 0, len = 0;
				char *rows = ct_dump_text(&n, &len);
				if (!rows) { printf("err dump: %s\n", strerror(errno)); goto next; }
				printf("ok %zu\n", n);
				fwrite(rows, 1, len, stdout);
				free(rows);
				goto next;
			}
			static unsigned char keys[1 << 22];
			int n = 0;
			unsigned char *prev = NULL;
			while (n < (int)(sizeof(keys) / maps[mi].key_size) && !bpf_map_get_next_key(maps[mi].fd, prev, keys + n * maps[mi].key_size)) {
				prev = keys + n * maps[mi].key_size;
				n++;
			}
			printf("ok %d\n", n);
			for (int i = 0; i < n; i++) {
				unsigned char *k = keys + i * maps[mi].key_size;
				if (bpf_map_lookup_elem(maps[mi].fd, k, val)) continue;
				puthex(k, maps[mi].key_size); printf(" "); puthex(val, maps[mi].value_size); printf("\n");
			}
		} else if (!strcmp(cmd, "run")) {
			int fd = a ? prog_fd(a) : -1;
			int n = b ? unhex(b, val, sizeof(val)) : -1;
			if (fd < 0 || n < 0) { printf("err bad program or packet\n"); goto next; }
			unsigned char out[4096];
			char *ifx = strtok(NULL, " ");
			struct __sk_buff ctx = {.ifindex = ifx ? (__u32)iface_index(ifx) : 0};
			LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = val, .data_size_in = (__u32)n, .data_out = out, .data_size_out = sizeof(out), .repeat = c ? (unsigned)atoi(c) : 1);
			if (ifx) { opts.ctx_in = &ctx; opts.ctx_size_in = sizeof(ctx); }
			if (bpf_prog_test_run_opts(fd, &opts)) printf("err run: %s\n", strerror(errno));
			else { printf("ok %u %u ", opts.retval, opts.duration); puthex(out, opts.data_size_out < sizeof(out) ? opts.data_size_out : sizeof(out)); printf("\n"); }
		} else if (!strcmp(cmd, "events")) {
			int mi = map_index("cascade_events");
			events_seen = 0;
			/* answers "ok N" after the N event lines: the reader collects lines until "ok" */
			struct ring_buffer *rb = ring_buffer__new(maps[mi].fd, on_event, NULL, NULL);
			if (!rb) { printf("err ringbuf\n"); goto next; }
			ring_buffer__consume(rb);
			ring_buffer__free(rb);
			printf("ok %d\n", events_seen);
		} else if (!strcmp(cmd, "attach") || !strcmp(cmd, "detach")) {
			int ifindex = iface_index(a);
			if (ifindex <= 0 || !b || (strcmp(b, "ingress") && strcmp(b, "egress"))) { printf("err no interface\n"); goto next; }
			LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = !strcmp(b, "ingress") ? BPF_TC_INGRESS : BPF_TC_EGRESS);
			LIBBPF_OPTS(bpf_tc_opts, topts, .handle = 1, .priority = 1);
			if (!strcmp(cmd, "attach")) {
				int fd = c ? prog_fd(c) : -1;
				if (fd < 0) { printf("err no program\n"); goto next; }
				int r = bpf_tc_hook_create(&hook);
				if (r && r != -EEXIST) { printf("err hook: %s\n", strerror(-r)); goto next; }
				topts.prog_fd = fd;
				topts.flags = BPF_TC_F_REPLACE;
				r = bpf_tc_attach(&hook, &topts);
				if (r) printf("err attach: %s\n", strerror(-r)); else printf("ok\n");
			} else {
				int r = bpf_tc_detach(&hook, &topts);
				if (r && r != -ENOENT) printf("err detach: %s\n", strerror(-r)); else printf("ok\n");
			}
		} else if (!strcmp(cmd, "maxentries")) {
			int mi = a ? map_index(a) : -1;
			struct bpf_map_info info = {};
			__u32 len = sizeof(info);
			if (mi < 0 || bpf_obj_get_info_by_fd(maps[mi].fd, &info, &len)) printf("err no map\n");
			else printf("ok %u\n", info.max_entries);
		} else if (!strcmp(cmd, "tclist")) {
			__u32 in_id = prog_id(prog_fd("from_endpoint")), out_id = prog_id(prog_fd("to_endpoint"));
			struct if_nameindex *ifs = if_nameindex(), *it;
			static char rows[1 << 20];
			size_t used = 0;
			int n = 0;
			for (it = ifs; it && it->if_index; it++) {
				int i = tc_has((int)it->if_index, BPF_TC_INGRESS, in_id), e = tc_has((int)it->if_index, BPF_TC_EGRESS, out_id);
				if (!i && !e) continue;
				if (used + 32 >= sizeof(rows)) break;
				used += (size_t)snprintf(rows + used, sizeof(rows) - used, "%u %d %d\n", it->if_index, i, e);
				n++;
			}
			if (ifs) if_freenameindex(ifs);
			printf("ok %d\n%s", n, rows);
		} else printf("err unknown command\n");
	next:
		fflush(stdout);
	}
	return 0;
}
