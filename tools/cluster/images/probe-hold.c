/* cascade-probe's long-lived connections, for checking that connections outlive a datapath upgrade:
 * `serve ... tick:PORT` accepts TCP connections on PORT and writes one byte every 100 ms to each, for
 * up to 15 minutes or until the peer goes; `hold HOST PORT DURATION_MS` connects to such a port, reads
 * for DURATION_MS and prints `HOLD BYTES MAX_GAP_MS RETRANSMITS` (exit 0), or `HOLD-FAILED REASON
 * AFTER_MS` (exit 1) when the connection failed, was reset or went silent for 10 s. The ticking side
 * sends the data, so a server that may open nothing (egress denied) keeps its connection only while
 * the datapath keeps its conntrack entry: a lost entry stops the ticks, it does not heal. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* A tick connection, in its own process: one byte every 100 ms, 9,000 at most (15 minutes). */
void tick(int c) {
	for (int i = 0; i < 9000; i++) {
		if (write(c, "t", 1) != 1) break;
		usleep(100 * 1000);
	}
	_exit(0);
}

int hold(const char *host, const char *port, int duration) {
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(port))};
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || duration <= 0 || duration > 900000) return 2;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	long t0 = now_ms();
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		printf("HOLD-FAILED connect:%s 0\n", strerror(errno));
		return 1;
	}
	long last = now_ms(), gap = 0;
	unsigned long long bytes = 0;
	char buf[4096];
	while (now_ms() - t0 < duration) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, 10000);
		long at = now_ms();
		if (r == 0) {
			printf("HOLD-FAILED silent-10s %ld\n", at - t0);
			return 1;
		}
		if (r < 0) continue;
		ssize_t got = read(fd, buf, sizeof(buf));
		if (got <= 0) {
			printf("HOLD-FAILED %s %ld\n", got == 0 ? "closed" : strerror(errno), at - t0);
			return 1;
		}
		if (at - last > gap) gap = at - last;
		last = at;
		bytes += (unsigned long long)got;
	}
	struct tcp_info ti = {0};
	socklen_t len = sizeof(ti);
	getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
	close(fd);
	printf("HOLD %llu %ld %u\n", bytes, gap, ti.tcpi_total_retrans);
	return 0;
}
