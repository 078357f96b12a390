// cascade-cni: a CNI chaining plugin (after the main plugin: bridge, ptp, ...). On ADD it finds the
// pod's host-side veth from the kernel (the peer of CNI_IFNAME inside CNI_NETNS, by netlink's
// IFLA_LINK) and attaches the agent's pinned programs there before the runtime starts the pod's
// containers. Until the agent has loaded the pod's endpoint the program drops every packet of that
// interface (default deny for unknown endpoints), so no pod traffic flows unenforced. If the programs
// are not pinned (no agent has ever run on this node) ADD fails: the pod is not started (fail closed).
// It never writes maps and never reads anything a pod owner controls.
// It also records, for the agent, which host interface carries which pod addresses: the file
// <recordDir>/<CNI_CONTAINERID> holds `ifindex N`, `ifname NAME` and one `addr A` per address of the
// pod interface, read from the kernel inside the pod's namespace (the runtime's word, not the pod's).
// On a bridge the agent could otherwise learn that only from the pod's own ARP, which the program
// drops until the endpoint is bound. DEL removes the record; CHECK, GC, STATUS: no-ops (the veth, and
// its filters, go with the pod). Output: the previous result, unchanged.
//
// Network configuration keys it reads, at the top level only (a real JSON parser: a key inside
// prevResult is not one): cniVersion, pinDir (default /sys/fs/bpf/cascade), recordDir (default
// /run/cascade/cni), prevResult, exemptNamespace (none by default): a pod of that namespace (the
// runtime's K8S_POD_NAMESPACE in CNI_ARGS, set by the kubelet, not by the pod) is recorded but its
// veth gets no program at ADD; the agent attaches them once it knows the pod. Cascade's own release
// namespace: its netpolicy-controller publishes the PodAddressSlices agents learn pods from, so it
// must reach the API server before any agent knows it (an admin-only namespace, as hostNetwork
// would be). It attaches only to a veth whose peer is the pod's interface (never
// to a macvlan or ipvlan parent: the node's uplink).
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <sched.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char conf[1 << 20];
static char version[32] = "1.0.0";

static void fail(int code, const char *msg, const char *detail) {
	printf("{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":\"%s\",\"details\":\"%s\"}\n", version, code, msg,
	       detail ? detail : "");
	exit(1);
}

/* The network configuration is JSON from the runtime, with the previous plugins' result inside it:
 * only its top-level keys are read, by a real (small, strict) parser. A key that appears only inside
 * prevResult or another value is not a key of the configuration. */
static const char *skip_ws(const char *p) {
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
	return p;
}

/* past a JSON string starting at p ('"'), or NULL */
static const char *skip_string(const char *p) {
	if (*p++ != '"') return NULL;
	for (; *p; p++) {
		if ((unsigned char)*p < 0x20) return NULL;
		if (*p == '\\') {
			if (!*++p) return NULL;
		} else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* past one JSON value starting at p, or NULL (objects and arrays nested at most 64 deep) */
static const char *skip_value(const char *p, int depth) {
	p = skip_ws(p);
	if (depth > 64) return NULL;
	if (*p == '"') return skip_string(p);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		p = skip_ws(p + 1);
		if (*p == close) return p + 1;
		for (;;) {
			if (close == '}') {
				p = skip_string(skip_ws(p));
				if (!p) return NULL;
				p = skip_ws(p);
				if (*p++ != ':') return NULL;
			}
			p = skip_value(p, depth + 1);
			if (!p) return NULL;
			p = skip_ws(p);
			if (*p == close) return p + 1;
			if (*p++ != ',') return NULL;
		}
	}
	const char *start = p;
	while ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == '.' || *p == 'e' || *p == 'E') p++;
	if (p > start) return p;
	for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1)
		if (!strncmp(p, lit, strlen(lit))) return p + strlen(lit);
	return NULL;
}

/* The value of top-level `key` (start and length), 1 when found; -1 when the text is not one JSON
 * object (nothing after it but blanks). */
static int top_level(const char *key, const char **val, size_t *len) {
	const char *p = skip_ws(conf);
	int found = 0;
	if (*p++ != '{') return -1;
	p = skip_ws(p);
	if (*p == '}') return *skip_ws(p + 1) ? -1 : 0;
	for (;;) {
		const char *k = skip_ws(p);
		const char *ke = skip_string(k);
		if (!ke) return -1;
		p = skip_ws(ke);
		if (*p++ != ':') return -1;
		const char *v = skip_ws(p);
		const char *ve = skip_value(v, 1);
		if (!ve) return -1;
		size_t klen = (size_t)(ke - k - 2);
		if (!found && klen == strlen(key) && !strncmp(k + 1, key, klen)) {
			*val = v;
			*len = (size_t)(ve - v);
			found = 1;
		}
		p = skip_ws(ve);
		if (*p == '}') return *skip_ws(p + 1) ? -1 : found;
		if (*p++ != ',') return -1;
	}
}

/* the top-level string `key` copied into out: 1; 0 absent; -1 not a plain string (escapes refused:
 * no path or version needs one) or too long */
/* The value of `key` in CNI_ARGS (`A=x;B=y`), or -1: absent, empty, too long or not a DNS label. */
static int cni_arg(const char *key, char *out, size_t max) {
	const char *args = getenv("CNI_ARGS");
	size_t klen = strlen(key);
	for (const char *p = args; p && *p; ) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > klen && !strncmp(p, key, klen) && p[klen] == '=') {
			size_t vlen = len - klen - 1;
			if (vlen == 0 || vlen >= max) return -1;
			for (size_t i = 0; i < vlen; i++) {
				char c = p[klen + 1 + i];
				if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return -1;
			}
			memcpy(out, p + klen + 1, vlen);
			out[vlen] = 0;
			return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return -1;
}

static int string_field(const char *key, char *out, size_t max) {
	const char *v;
	size_t len;
	int r = top_level(key, &v, &len);
	if (r <= 0) return r;
	if (len < 2 || v[0] != '"' || len - 2 >= max || memchr(v + 1, '\\', len - 2)) return -1;
	memcpy(out, v + 1, len - 2);
	out[len - 2] = 0;
	return 1;
}

/* the top-level object `key` (start and length), or NULL */
static const char *object_field(const char *key, size_t *len) {
	const char *v;
	if (top_level(key, &v, len) != 1 || *v != '{') return NULL;
	return v;
}

static int valid_ifname(const char *s) {
	size_t n = strlen(s);
	if (n < 1 || n > 15) return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '@' || c == '-'))
			return 0;
	}
	return 1;
}

/* What the kernel says of interface `ifindex` in the current network namespace: its kind
 * (IFLA_INFO_KIND: "veth", "macvlan", ...), the interface it links to (IFLA_LINK: a veth's peer, a
 * macvlan's parent) and whether that one is in another namespace (IFLA_LINK_NETNSID). */
struct link_info {
	int link;
	int other_ns;
	char kind[16];
};

static int link_info(int ifindex, struct link_info *li) {
	memset(li, 0, sizeof(*li));
	li->link = -1;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) return -1;
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = {0};
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
	req.nh.nlmsg_type = RTM_GETLINK;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.ifi.ifi_family = AF_UNSPEC;
	req.ifi.ifi_index = ifindex;
	if (send(fd, &req, req.nh.nlmsg_len, 0) < 0) {
		close(fd);
		return -1;
	}
	static char buf[1 << 16];
	int n = (int)recv(fd, buf, sizeof(buf), 0);
	close(fd);
	if (n <= 0) return -1;
	for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (unsigned)n); nh = NLMSG_NEXT(nh, n)) {
		if (nh->nlmsg_type != RTM_NEWLINK) continue;
		struct ifinfomsg *ifi = NLMSG_DATA(nh);
		if (ifi->ifi_index != ifindex) continue;
		int alen = (int)IFLA_PAYLOAD(nh);
		for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
			if (a->rta_type == IFLA_LINK) li->link = (int)*(__u32 *)RTA_DATA(a);
			else if (a->rta_type == IFLA_LINK_NETNSID) li->other_ns = 1;
			else if (a->rta_type == IFLA_LINKINFO) {
				int ilen = (int)RTA_PAYLOAD(a);
				for (struct rtattr *i = RTA_DATA(a); RTA_OK(i, ilen); i = RTA_NEXT(i, ilen))
					if (i->rta_type == IFLA_INFO_KIND) {
						size_t k = RTA_PAYLOAD(i) < sizeof(li->kind) - 1 ? RTA_PAYLOAD(i) : sizeof(li->kind) - 1;
						memcpy(li->kind, RTA_DATA(i), k);
						li->kind[k] = 0;
					}
			}
		}
		return 0;
	}
	return -1;
}

/* the addresses of interface `ifindex` in the current network namespace (IPv6 link-local left out),
 * written as `addr A` lines into out; returns how many */
static int addresses_of(int ifindex, FILE *out) {
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) return -1;
	struct {
		struct nlmsghdr nh;
		struct ifaddrmsg ifa;
	} req = {0};
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
	req.nh.nlmsg_type = RTM_GETADDR;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.ifa.ifa_family = AF_UNSPEC;
	if (send(fd, &req, req.nh.nlmsg_len, 0) < 0) {
		close(fd);
		return -1;
	}
	static char buf[1 << 16];
	int count = 0;
	for (;;) {
		int n = (int)recv(fd, buf, sizeof(buf), 0);
		if (n <= 0) break;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (unsigned)n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_type == NLMSG_DONE || nh->nlmsg_type == NLMSG_ERROR) {
				close(fd);
				return count;
			}
			if (nh->nlmsg_type != RTM_NEWADDR) continue;
			struct ifaddrmsg *ifa = NLMSG_DATA(nh);
			if ((int)ifa->ifa_index != ifindex || ifa->ifa_scope == RT_SCOPE_LINK || ifa->ifa_scope == RT_SCOPE_HOST) continue;
			int alen = (int)IFA_PAYLOAD(nh);
			for (struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				if (a->rta_type != IFA_ADDRESS) continue;
				char text[INET6_ADDRSTRLEN];
				if (!inet_ntop(ifa->ifa_family, RTA_DATA(a), text, sizeof(text))) continue;
				fprintf(out, "addr %s\n", text);
				count++;
			}
		}
	}
	close(fd);
	return count;
}

static int valid_id(const char *s) {
	size_t n = s ? strlen(s) : 0;
	if (n < 1 || n > 128) return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-') || (i == 0 && c == '.'))
			return 0;
	}
	return 1;
}

static void attach(int ifindex, enum bpf_tc_attach_point where, int prog_fd) {
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = where);
	LIBBPF_OPTS(bpf_tc_opts, o, .handle = 1, .priority = 1, .prog_fd = prog_fd, .flags = BPF_TC_F_REPLACE);
	int r = bpf_tc_hook_create(&hook);
	if (r && r != -EEXIST) fail(999, "cannot create the tc hook", strerror(-r));
	r = bpf_tc_attach(&hook, &o);
	if (r) fail(999, "cannot attach the Cascade program", strerror(-r));
}

int main(void) {
	libbpf_set_print(NULL);
	const char *cmd = getenv("CNI_COMMAND");
	size_t n = fread(conf, 1, sizeof(conf) - 1, stdin);
	conf[n] = 0;
	const char *any;
	size_t any_len;
	if (top_level("cniVersion", &any, &any_len) < 0) fail(6, "the network configuration is not one JSON object", NULL);
	if (string_field("cniVersion", version, sizeof(version)) < 0) fail(6, "cniVersion is not a plain string", NULL);
	if (!cmd) fail(4, "CNI_COMMAND is not set", NULL);
	if (!strcmp(cmd, "VERSION")) {
		printf("{\"cniVersion\":\"%s\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}\n", version);
		return 0;
	}
	char records[256] = "/run/cascade/cni", record[512], tmp[560];
	if (string_field("recordDir", records, sizeof(records)) < 0) fail(6, "recordDir is not a plain string", NULL);
	const char *id = getenv("CNI_CONTAINERID");
	int have_id = valid_id(id);
	if (have_id) snprintf(record, sizeof(record), "%s/%s", records, id);
	if (!strcmp(cmd, "DEL")) {
		if (have_id) unlink(record);
		return 0;
	}
	if (strcmp(cmd, "ADD")) return 0; /* CHECK, GC, STATUS: nothing to do */
	if (!have_id) fail(4, "CNI_CONTAINERID missing or invalid", NULL);
	size_t plen = 0;
	const char *prev = object_field("prevResult", &plen);
	if (!prev) fail(7, "cascade-cni is a chained plugin: no prevResult", NULL);
	char pin[256] = "/sys/fs/bpf/cascade";
	if (string_field("pinDir", pin, sizeof(pin)) < 0) fail(6, "pinDir is not a plain string", NULL);
	const char *netns = getenv("CNI_NETNS"), *ifname = getenv("CNI_IFNAME");
	if (!netns || !ifname || !valid_ifname(ifname)) fail(4, "CNI_NETNS or CNI_IFNAME missing or invalid", NULL);

	char exempt_ns[64] = "", pod_ns[64] = "";
	if (string_field("exemptNamespace", exempt_ns, sizeof(exempt_ns)) < 0) fail(6, "exemptNamespace is not a plain string", NULL);
	int exempt = exempt_ns[0] && cni_arg("K8S_POD_NAMESPACE", pod_ns, sizeof(pod_ns)) == 0 && !strcmp(pod_ns, exempt_ns);

	char path[512];
	snprintf(path, sizeof(path), "%s/progs/from_endpoint", pin);
	int from = exempt ? -1 : bpf_obj_get(path);
	snprintf(path, sizeof(path), "%s/progs/to_endpoint", pin);
	int to = exempt ? -1 : bpf_obj_get(path);
	if (!exempt && (from < 0 || to < 0)) fail(11, "the Cascade programs are not pinned (is cascade-netpol-agent running on this node?)", pin);

	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int pod = open(netns, O_RDONLY | O_CLOEXEC);
	if (self < 0 || pod < 0) fail(999, "cannot open the network namespaces", netns);
	if (setns(pod, CLONE_NEWNET)) fail(999, "cannot enter the pod network namespace", strerror(errno));
	int inner = (int)if_nametoindex(ifname);
	struct link_info pod_side = {0}, host_side = {0};
	int pod_known = inner > 0 ? link_info(inner, &pod_side) : -1;
	int peer = pod_side.link;
	char *addrs = NULL;
	size_t addrs_len = 0;
	FILE *mem = open_memstream(&addrs, &addrs_len);
	int naddrs = (inner > 0 && mem) ? addresses_of(inner, mem) : -1;
	if (mem) fclose(mem);
	if (setns(self, CLONE_NEWNET)) fail(999, "cannot return to the host network namespace", strerror(errno));
	if (inner <= 0 || pod_known) fail(999, "no such interface in the pod", ifname);
	/* only a veth whose peer is in another namespace, and that peer here a veth pointing back at it:
	 * chained after macvlan or ipvlan, IFLA_LINK names the node's uplink, which must never get the
	 * pod's programs (they would judge the whole node's traffic as the pod's) */
	if (strcmp(pod_side.kind, "veth") || !pod_side.other_ns || peer <= 0)
		fail(999, "the pod interface is not a veth with its peer in the host namespace (cascade-cni chains after bridge or ptp)", pod_side.kind);
	if (link_info(peer, &host_side) || strcmp(host_side.kind, "veth") || host_side.link != inner || !host_side.other_ns)
		fail(999, "the host-side peer of the pod interface is not a veth linked to it", ifname);
	/* tc ingress of the host side sees what the pod sends (its egress), tc egress what it receives */
	if (!exempt) {
		attach(peer, BPF_TC_INGRESS, from);
		attach(peer, BPF_TC_EGRESS, to);
	}
	if (naddrs < 0) fail(999, "cannot read the pod interface's addresses", ifname);
	char peer_name[IF_NAMESIZE] = "";
	if (!if_indextoname((unsigned)peer, peer_name)) fail(999, "the host-side peer vanished", NULL);
	mkdir("/run/cascade", 0755);
	if (mkdir(records, 0700) && errno != EEXIST) fail(999, "cannot create the record directory", records);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", records, id);
	FILE *f = fopen(tmp, "w");
	if (!f) fail(999, "cannot write the endpoint record", tmp);
	fprintf(f, "ifindex %d\nifname %s\n%s", peer, peer_name, addrs ? addrs : "");
	if (fclose(f) || rename(tmp, record)) fail(999, "cannot write the endpoint record", record);
	free(addrs);
	fwrite(prev, 1, plen, stdout);
	printf("\n");
	return 0;
}
