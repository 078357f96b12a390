/* cascade-probe: the e2e workload. `serve PORT...` answers every TCP connection and UDP datagram on
 * those ports (IPv4 and IPv6) with "ok HOSTNAME\n"; `probe tcp|udp HOST PORT [TIMEOUT_MS]` prints
 * ALLOW and exits 0 when the server answered (TCP: the handshake completed within the timeout and the
 * server answered within 5 s more; UDP: it answered within the timeout; default 1000 ms), else prints DENY
 * and exits 1 (2 on bad arguments); `probe-all TIMEOUT_MS PROTO/HOST/PORT...` prints one
 * `PROTO/HOST/PORT ALLOW|DENY` line per target; `dns tcp|udp SERVER NAME [TIMEOUT_MS]` asks SERVER (port 53)
 * for NAME's A records and prints ALLOW with the answer count (exit 0) when it answers NOERROR with at
 * least one, else DENY (exit 1); `connect-times HOST PORT N` opens N TCP connections one after another
 * (IPv4, each a new flow) and prints each one's connect()-to-established time in microseconds (-1 when
 * one fails within a second), for the cluster bench; `watch TIMEOUT_MS INTERVAL_MS DURATION_MS
 * HOST/PORT...` starts a new TCP connection to every target each INTERVAL_MS for DURATION_MS (IPv4,
 * up to 8 targets, 512 in flight) and prints one `TARGET START_MS A|D|R` line per attempt when it is
 * decided (START_MS: the wall clock when its SYN left; A: established, D: no answer within TIMEOUT_MS,
 * R: refused or failed), so a policy change's moment of enforcement can be read off live traffic;
 * `serve ... sink:PORT` also accepts TCP connections on PORT that it reads to their end and answers
 * with `ok BYTES`, and `send HOST PORT MIB` writes MIB MiB to such a port and prints `BYTES
 * MICROSECONDS` (the bench's established transfer); `tick:PORT` and `hold` (probe-hold.c) keep
 * connections open across a datapath upgrade. Static, no allocation per connection, bounded
 * everything. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS 16

static char reply[128];

static int port_of(const char *s) {
	char *end;
	long p = strtol(s, &end, 10);
	return (*s && !*end && p > 0 && p < 65536) ? (int)p : -1;
}

static int listener(int type, int port) {
	int fd = socket(AF_INET6, type, 0);
	if (fd < 0) return -1;
	int off = 0, on = 1;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	/* TCP only: for UDP it would let a second server share the port and take the datagrams */
	if (type == SOCK_STREAM) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	/* UDP answers leave from the address the datagram was sent to (a node has several) */
	if (type == SOCK_DGRAM) setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on));
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_any};
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) return -1;
	if (type == SOCK_STREAM && listen(fd, 128) < 0) return -1;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* A sink connection, in its own process: read to the end (30 s idle at most), answer the count. */
static void sink(int c) {
	static char buf[1 << 16];
	struct timeval idle = {.tv_sec = 30};
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
	unsigned long long total = 0;
	ssize_t got;
	while ((got = read(c, buf, sizeof(buf))) > 0) total += (unsigned long long)got;
	char out[64];
	int len = snprintf(out, sizeof(out), "ok %llu\n", total);
	if (got == 0) (void)!write(c, out, (size_t)len);
	_exit(0);
}

/* probe-hold.c: long-lived connections (tick:PORT and hold) */
void tick(int c);
int hold(const char *host, const char *port, int duration);

static int serve(int argc, char **argv) {
	struct pollfd fds[2 * MAX_PORTS];
	int is_sink[2 * MAX_PORTS] = {0}; /* 1 sink, 2 tick */
	int n = 0;
	if (argc < 1 || argc > MAX_PORTS) return 2;
	for (int i = 0; i < argc; i++) {
		int as_sink = strncmp(argv[i], "sink:", 5) == 0 ? 1 : strncmp(argv[i], "tick:", 5) == 0 ? 2 : 0;
		int port = port_of(argv[i] + (as_sink ? 5 : 0));
		if (port < 0) return 2;
		int t = listener(SOCK_STREAM, port), u = as_sink ? -2 : listener(SOCK_DGRAM, port);
		if (t < 0 || u == -1) {
			perror("cascade-probe: bind");
			return 1;
		}
		is_sink[n] = as_sink;
		fds[n++] = (struct pollfd){.fd = t, .events = POLLIN};
		/* a sink has no UDP half: its slot stays, ignored by poll */
		fds[n++] = (struct pollfd){.fd = as_sink ? -1 : u, .events = POLLIN};
	}
	signal(SIGCHLD, SIG_IGN); /* sink children reap themselves */
	char host[64] = "unknown";
	gethostname(host, sizeof(host) - 1);
	snprintf(reply, sizeof(reply), "ok %s\n", host);
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "cascade-probe: serving %d port(s)\n", argc);
	for (;;) {
		if (poll(fds, n, -1) < 0 && errno != EINTR) return 1;
		for (int i = 0; i < n; i++) {
			if (!(fds[i].revents & POLLIN)) continue;
			if (i % 2 == 0) {
				int c = accept(fds[i].fd, NULL, NULL);
				if (c >= 0 && is_sink[i]) {
					fcntl(c, F_SETFL, 0);
					if (fork() == 0) {
						if (is_sink[i] == 2) tick(c);
						sink(c);
					}
					close(c);
				} else if (c >= 0) {
					(void)!write(c, reply, strlen(reply));
					close(c);
				}
			} else {
				char buf[512], control[256];
				struct sockaddr_in6 from;
				struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
				struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1,
				                   .msg_control = control, .msg_controllen = sizeof(control)};
				if (recvmsg(fds[i].fd, &m, 0) < 0) continue;
				struct in6_pktinfo info = {0};
				int have_info = 0;
				for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
					if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
						memcpy(&info, CMSG_DATA(c), sizeof(info));
						have_info = 1;
					}
				char out_control[CMSG_SPACE(sizeof(struct in6_pktinfo))] = {0};
				struct iovec out_iov = {.iov_base = reply, .iov_len = strlen(reply)};
				struct msghdr out = {.msg_name = &from, .msg_namelen = m.msg_namelen, .msg_iov = &out_iov, .msg_iovlen = 1};
				if (have_info) {
					info.ipi6_ifindex = 0;
					out.msg_control = out_control;
					out.msg_controllen = sizeof(out_control);
					struct cmsghdr *c = CMSG_FIRSTHDR(&out);
					c->cmsg_level = IPPROTO_IPV6;
					c->cmsg_type = IPV6_PKTINFO;
					c->cmsg_len = CMSG_LEN(sizeof(info));
					memcpy(CMSG_DATA(c), &info, sizeof(info));
				}
				sendmsg(fds[i].fd, &out, 0);
			}
		}
	}
}

static long now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#define REPLY_GRACE_MS 5000
static int probe(const char *proto, const char *host, const char *port_s, int timeout);

/* probe-all TIMEOUT_MS PROTO/HOST/PORT...: one line `PROTO/HOST/PORT ALLOW|DENY` per target, in order */
static int probe_all(int timeout, int argc, char **argv) {
	if (argc < 1 || argc > 4096) return 2;
	int saved = dup(1);
	for (int i = 0; i < argc; i++) {
		char spec[128];
		snprintf(spec, sizeof(spec), "%s", argv[i]);
		char *proto = spec, *host = strchr(spec, '/'), *port = host ? strrchr(host + 1, '/') : NULL;
		if (!host || !port) return 2;
		*host++ = 0;
		*port++ = 0;
		int devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, 1); /* probe() prints its own verdict line: keep only ours */
		close(devnull);
		int r = probe(proto, host, port, timeout);
		dup2(saved, 1);
		if (r == 2) return 2;
		printf("%s %s\n", argv[i], r == 0 ? "ALLOW" : "DENY");
	}
	return 0;
}

static int probe(const char *proto, const char *host, const char *port_s, int timeout) {
	int tcp = strcmp(proto, "tcp") == 0;
	if (!tcp && strcmp(proto, "udp") != 0) return 2;
	int port = port_of(port_s);
	if (port < 0 || timeout <= 0 || timeout > 60000) return 2;
	struct sockaddr_storage to = {0};
	socklen_t to_len;
	struct sockaddr_in *v4 = (struct sockaddr_in *)&to;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&to;
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(port);
		to_len = sizeof(*v4);
	} else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(port);
		to_len = sizeof(*v6);
	} else
		return 2;
	int fd = socket(to.ss_family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK, 0);
	if (fd < 0) goto deny;
	long deadline = now_ms() + timeout;
	int r = connect(fd, (struct sockaddr *)&to, to_len);
	if (r < 0 && errno != EINPROGRESS) goto deny;
	if (!tcp && send(fd, "probe\n", 6, 0) < 0) goto deny;
	char buf[128];
	/* TCP: the timeout bounds the handshake, which the datapath's verdict decides. Once established,
	 * the server's reply gets REPLY_GRACE_MS more: a server slow to be scheduled (a loaded node) is
	 * not a refusal. UDP has no handshake: the reply is the only sign. */
	int connected = !tcp;
	for (;;) {
		long left = deadline - now_ms();
		if (left <= 0) goto deny;
		struct pollfd p = {.fd = fd, .events = connected ? POLLIN : POLLIN | POLLOUT};
		if (poll(&p, 1, (int)left) <= 0) continue;
		if (!connected) {
			int err = 0;
			socklen_t len = sizeof(err);
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) goto deny;
			connected = 1;
			deadline = now_ms() + REPLY_GRACE_MS;
			if (!(p.revents & POLLIN)) continue;
		}
		ssize_t got = recv(fd, buf, sizeof(buf) - 1, 0);
		if (got > 3 && strncmp(buf, "ok ", 3) == 0) {
			buf[got] = 0;
			printf("ALLOW %s", buf + 3);
			close(fd);
			return 0;
		}
		if (got == 0 || (got < 0 && errno != EAGAIN)) goto deny;
	}
deny:
	if (fd >= 0) close(fd);
	printf("DENY\n");
	return 1;
}

/* One DNS query (A, recursion desired) for name; 1 answered with records, 0 not. */
static int dns(const char *proto, const char *server, const char *name, int timeout) {
	int tcp = strcmp(proto, "tcp") == 0;
	if ((!tcp && strcmp(proto, "udp") != 0) || timeout <= 0 || timeout > 60000 || strlen(name) > 200) return 2;
	unsigned char q[512] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
	size_t n = 12;
	for (const char *l = name; *l;) {
		const char *dot = strchr(l, '.');
		size_t len = dot ? (size_t)(dot - l) : strlen(l);
		if (len == 0 || len > 63) return 2;
		q[n++] = (unsigned char)len;
		memcpy(q + n, l, len);
		n += len;
		l += len + (dot ? 1 : 0);
	}
	q[n++] = 0;
	q[n++] = 0; q[n++] = 1; /* A */
	q[n++] = 0; q[n++] = 1; /* IN */
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(53)};
	if (inet_pton(AF_INET, server, &to.sin_addr) != 1) return 2;
	int fd = socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK, 0);
	long deadline = now_ms() + timeout;
	unsigned char buf[1024];
	size_t got = 0;
	if (fd < 0) goto deny;
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS) goto deny;
	if (tcp) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, timeout) <= 0 || !(p.revents & POLLOUT) || (p.revents & (POLLERR | POLLHUP))) goto deny;
		unsigned char lp[2] = {(unsigned char)(n >> 8), (unsigned char)n};
		if (send(fd, lp, 2, MSG_MORE) != 2) goto deny;
	}
	if (send(fd, q, n, 0) != (ssize_t)n) goto deny;
	for (;;) {
		long left = deadline - now_ms();
		if (left <= 0) goto deny;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, (int)left) <= 0) continue;
		ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (r <= 0) goto deny;
		got += (size_t)r;
		unsigned char *m = tcp ? buf + 2 : buf;
		size_t have = tcp ? (got >= 2 ? got - 2 : 0) : got;
		if (tcp && (got < 2 || have < (size_t)((buf[0] << 8) | buf[1]))) continue;
		if (have < 12 || m[0] != 0x12 || m[1] != 0x34) goto deny;
		int answers = (m[6] << 8) | m[7];
		close(fd);
		if ((m[3] & 0x0f) == 0 && answers > 0) {
			printf("ALLOW %d answer(s)\n", answers);
			return 0;
		}
		printf("DENY rcode %d, %d answer(s)\n", m[3] & 0x0f, answers);
		return 1;
	}
deny:
	if (fd >= 0) close(fd);
	printf("DENY\n");
	return 1;
}

static int connect_times(const char *host, const char *port_s, int n) {
	struct sockaddr_in a = {.sin_family = AF_INET};
	int port = port_of(port_s);
	if (port < 0 || n < 1 || n > 10000 || inet_pton(AF_INET, host, &a.sin_addr) != 1) return 2;
	a.sin_port = htons((unsigned short)port);
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0) return 1;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		long us = -1;
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EINPROGRESS) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			int err = 0;
			socklen_t len = sizeof err;
			if (poll(&pf, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
				clock_gettime(CLOCK_MONOTONIC, &t1);
				us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
			}
		}
		close(fd);
		printf("%ld\n", us);
	}
	return 0;
}

static long realtime_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#define WATCH_TARGETS 8
#define WATCH_INFLIGHT 512
/* watch: a new connection to each target every interval; one line per attempt once decided */
static int watch(int timeout, int interval, int duration, int argc, char **argv) {
	struct sockaddr_in to[WATCH_TARGETS];
	if (argc < 1 || argc > WATCH_TARGETS || timeout < 1 || timeout > 10000 || interval < 1 || interval > 10000 ||
	    duration < 1 || duration > 3600000)
		return 2;
	for (int i = 0; i < argc; i++) {
		char spec[64];
		snprintf(spec, sizeof(spec), "%s", argv[i]);
		char *port = strchr(spec, '/');
		if (!port) return 2;
		*port++ = 0;
		int p = port_of(port);
		to[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((unsigned short)p)};
		if (p < 0 || inet_pton(AF_INET, spec, &to[i].sin_addr) != 1) return 2;
	}
	struct {
		int fd, target;
		long start, deadline;
	} a[WATCH_INFLIGHT];
	struct pollfd pf[WATCH_INFLIGHT];
	int n = 0;
	long end = now_ms() + duration, next = now_ms();
	for (;;) {
		long t = now_ms();
		if (t >= next && t < end) {
			for (int i = 0; i < argc && n < WATCH_INFLIGHT; i++) {
				long start = realtime_ms();
				int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
				if (fd < 0) return 1;
				if (connect(fd, (struct sockaddr *)&to[i], sizeof(to[i])) == 0) {
					printf("%d %ld A\n", i, start);
					close(fd);
				} else if (errno != EINPROGRESS) {
					printf("%d %ld R\n", i, start);
					close(fd);
				} else {
					a[n].fd = fd;
					a[n].target = i;
					a[n].start = start;
					a[n++].deadline = t + timeout;
				}
			}
			next += interval;
			if (next <= t) next = t + interval; /* never a burst to catch up */
		}
		if (t >= end && n == 0) return 0;
		long wait = t < end ? next - t : timeout;
		for (int i = 0; i < n; i++) {
			if (a[i].deadline - t < wait) wait = a[i].deadline - t;
			pf[i] = (struct pollfd){.fd = a[i].fd, .events = POLLOUT};
		}
		if (poll(pf, n, wait < 0 ? 0 : (int)wait) < 0 && errno != EINTR) return 1;
		t = now_ms();
		/* downwards: a removed slot takes the last one, already looked at */
		for (int i = n - 1; i >= 0; i--) {
			char v = 0;
			if (pf[i].revents) {
				int err = 0;
				socklen_t len = sizeof(err);
				v = getsockopt(a[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0 ? 'A' : 'R';
			} else if (t >= a[i].deadline)
				v = 'D';
			if (!v) continue;
			printf("%d %ld %c\n", a[i].target, a[i].start, v);
			close(a[i].fd);
			a[i] = a[--n];
			pf[i] = pf[n];
		}
	}
}

/* send: MIB MiB to a sink port; prints the bytes it confirmed and the microseconds from connect to its answer */
static int send_bytes(const char *host, const char *port_s, int mib) {
	static char buf[1 << 18];
	struct sockaddr_in a = {.sin_family = AF_INET};
	int port = port_of(port_s);
	if (port < 0 || mib < 1 || mib > 16384 || inet_pton(AF_INET, host, &a.sin_addr) != 1) return 2;
	a.sin_port = htons((unsigned short)port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval limit = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
	memset(buf, 'x', sizeof(buf));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) return 1;
	unsigned long long want = (unsigned long long)mib << 20, sent = 0;
	while (sent < want) {
		size_t chunk = want - sent < sizeof(buf) ? (size_t)(want - sent) : sizeof(buf);
		ssize_t w = write(fd, buf, chunk);
		if (w <= 0) return 1;
		sent += (unsigned long long)w;
	}
	shutdown(fd, SHUT_WR);
	char answer[64] = {0};
	ssize_t got = read(fd, answer, sizeof(answer) - 1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	unsigned long long confirmed = 0;
	if (got <= 3 || sscanf(answer, "ok %llu", &confirmed) != 1 || confirmed != sent) return 1;
	printf("%llu %ld\n", confirmed, (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000);
	return 0;
}

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 3 && strcmp(argv[1], "serve") == 0) return serve(argc - 2, argv + 2);
	if (argc >= 4 && strcmp(argv[1], "probe-all") == 0) return probe_all(atoi(argv[2]), argc - 3, argv + 3);
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "dns") == 0)
		return dns(argv[2], argv[3], argv[4], argc == 6 ? atoi(argv[5]) : 1000);
	if (argc == 5 && strcmp(argv[1], "connect-times") == 0) return connect_times(argv[2], argv[3], atoi(argv[4]));
	if (argc >= 6 && strcmp(argv[1], "watch") == 0)
		return watch(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc - 5, argv + 5);
	if (argc == 5 && strcmp(argv[1], "send") == 0) return send_bytes(argv[2], argv[3], atoi(argv[4]));
	if (argc == 5 && strcmp(argv[1], "hold") == 0) return hold(argv[2], argv[3], atoi(argv[4]));
	if ((argc == 5 || argc == 6) && strcmp(argv[1], "probe") == 0)
		return probe(argv[2], argv[3], argv[4], argc == 6 ? atoi(argv[5]) : 1000);
	fprintf(stderr, "usage: cascade-probe serve PORT... | probe tcp|udp HOST PORT [TIMEOUT_MS] |\n"
	                "       probe-all TIMEOUT_MS tcp|udp/HOST/PORT... | dns tcp|udp SERVER NAME [TIMEOUT_MS] |\n"
	                "       connect-times HOST PORT N | watch TIMEOUT_MS INTERVAL_MS DURATION_MS HOST/PORT... |\n"
	                "       send HOST PORT MIB | hold HOST PORT DURATION_MS\n"
	                "       (serve takes sink:PORT for send, tick:PORT for hold)\n");
	return 2;
}
