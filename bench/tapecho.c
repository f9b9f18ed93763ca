/* SPDX-License-Identifier: MIT */
/*
 * tapecho: A TEST STAND-IN FOR A GUEST, not part of godwit. It takes the
 * place of a VM's NIC until the virtio-net device and the forwarding guest
 * exist: it opens the tap device the VMM would open (or, for tests without
 * a bridge, an AF_PACKET socket on a veth) and sends back every gwpktgen
 * frame (ethertype 0x88b5) with its source and destination MACs swapped,
 * payload untouched, as the l2fwd guest does with one NIC.
 *
 *   tapecho (--tap IF | --iface IF) [--mac MAC] [--rarp] [--rarp-on-cont]
 *           [--seconds S] [--rcvbuf BYTES]
 *
 * --mac     the "guest's" MAC: only frames addressed to it are echoed (so
 *           the replies come from it), and the RARP announces it.
 * --rarp    send one RARP reverse request from MAC when ready, as QEMU's
 *           announce-self does after a switchover, so that the switch
 *           learns the NIC's new port before the guest sends anything.
 *           "Ready" is once the port is up and its bridge forwards (at
 *           most 2 s): see wait_port_ready().
 * --seconds lifetime bound (default 60, at most 3600); SIGTERM ends it
 *           sooner. SIGSTOP / SIGCONT pause it, as a paused guest.
 * --rarp-on-cont  send one RARP each time the process is continued
 *           (SIGCONT): a stand-in opened and stopped ahead, on the
 *           destination host, is "resumed" with its announce (bench/nfv.py).
 * --rcvbuf  the AF_PACKET socket's receive buffer (--iface only): small,
 *           frames that arrive while it is stopped are dropped, not queued.
 *
 * Prints "tapecho ready" on stdout once the device is open (and the RARP
 * sent); "tapecho echoed N" on stderr at exit. The tap is opened with
 * IFF_TAP | IFF_NO_PI, no vnet header, as a persistent device made by
 * `ip tuntap add mode tap` in the same namespace.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "mac.h"

#define PG_ETHERTYPE 0x88b5
#define RARP_ETHERTYPE 0x8035
#define MAX_SECONDS 3600
#define FRAME_MAX_BYTES 2048

static volatile sig_atomic_t stop, continued;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_cont(int sig)
{
	(void)sig;
	continued = 1;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


/* The first line of /sys/class/net/IF/FILE equals @want (false if absent). */
static bool sys_is(const char *ifname, const char *file, const char *want)
{
	char path[128], buf[32] = { 0 };
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", ifname, file);
	f = fopen(path, "r");
	if (!f)
		return false;
	ok = fgets(buf, sizeof(buf), f) && !strncmp(buf, want, strlen(want)) &&
	     (buf[strlen(want)] == '\n' || !buf[strlen(want)]);
	fclose(f);
	return ok;
}

/*
 * Wait (at most 2 s) until the interface is up and, if it is a bridge
 * port, forwarding. Opening a tap turns its carrier on, but the kernel
 * tells the bridge asynchronously (linkwatch, up to a second later): a
 * frame written before that is dropped by the bridge, as a RARP sent at
 * once after a switchover would be. Returns the ns waited.
 */
static uint64_t wait_port_ready(const char *ifname)
{
	uint64_t t0 = mono_ns();
	char brport[64];

	snprintf(brport, sizeof(brport), "/sys/class/net/%s/brport", ifname);
	for (int i = 0; i < 200; i++) {
		bool up = sys_is(ifname, "operstate", "up");
		bool fwd = access(brport, F_OK) != 0 || sys_is(ifname, "brport/state", "3");

		if (up && fwd)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	}
	return mono_ns() - t0;
}

static int open_tap(const char *name)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
	int fd;

	if (strlen(name) >= IFNAMSIZ)
		return -ENAMETOOLONG;
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	strcpy(ifr.ifr_name, name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	return fd;
}

static int open_packet(const char *name, int rcvbuf_bytes)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	int fd, one = 1, e;

	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0)
		return -errno;
	sll.sll_ifindex = (int)if_nametoindex(name);
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		goto fail;
	(void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (rcvbuf_bytes && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf_bytes, sizeof(rcvbuf_bytes)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf_bytes, sizeof(rcvbuf_bytes)) < 0)
		goto fail;
	return fd;
fail:
	e = errno ? -errno : -ENODEV;
	close(fd);
	return e;
}

/* RARP reverse request (RFC 903) from @mac, the frame QEMU's announce-self sends. */
static int send_rarp(int fd, bool is_tap, const char *ifname, const uint8_t mac[6])
{
	uint8_t f[60] = { 0 };
	uint8_t *a = f + 14;

	memset(f, 0xff, 6);
	memcpy(f + 6, mac, 6);
	f[12] = RARP_ETHERTYPE >> 8; f[13] = RARP_ETHERTYPE & 0xff;
	a[0] = 0; a[1] = 1;                      /* hardware: Ethernet */
	a[2] = 0x08; a[3] = 0x00;                /* protocol: IPv4 */
	a[4] = 6; a[5] = 4;
	a[6] = 0; a[7] = 3;                      /* reverse request */
	memcpy(a + 8, mac, 6);                   /* sender MAC, IP 0 */
	memcpy(a + 18, mac, 6);                  /* target MAC, IP 0 */
	if (is_tap)
		return write(fd, f, sizeof(f)) == (ssize_t)sizeof(f) ? 0 : -errno;
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_protocol = htons(RARP_ETHERTYPE),
				  .sll_ifindex = (int)if_nametoindex(ifname), .sll_halen = 6 };
	memset(to.sll_addr, 0xff, 6);
	return sendto(fd, f, sizeof(f), 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)sizeof(f) ? 0 : -errno;
}

struct opts {
	const char *tap, *iface;
	uint8_t mac[6];
	bool have_mac, rarp, rarp_on_cont;
	unsigned long seconds, rcvbuf;
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .seconds = 60 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--rarp")) { o->rarp = true; continue; }
		if (!strcmp(a, "--rarp-on-cont")) { o->rarp_on_cont = true; continue; }
		if (!v) { fprintf(stderr, "tapecho: %s needs a value\n", a); return 2; }
		i++;
		if (!strcmp(a, "--tap")) o->tap = v;
		else if (!strcmp(a, "--iface")) o->iface = v;
		else if (!strcmp(a, "--mac")) {
			if (parse_mac(v, o->mac)) { fprintf(stderr, "tapecho: bad MAC %s\n", v); return 2; }
			o->have_mac = true;
		} else if (!strcmp(a, "--seconds")) {
			o->seconds = strtoul(v, NULL, 10);
			if (!o->seconds || o->seconds > MAX_SECONDS) { fprintf(stderr, "tapecho: --seconds 1..%d\n", MAX_SECONDS); return 2; }
		} else if (!strcmp(a, "--rcvbuf")) {
			o->rcvbuf = strtoul(v, NULL, 10);
			if (o->rcvbuf > (1ul << 30)) { fprintf(stderr, "tapecho: --rcvbuf too large\n"); return 2; }
		} else { fprintf(stderr, "tapecho: unknown option %s\n", a); return 2; }
	}
	if (!o->tap == !o->iface || ((o->rarp || o->rarp_on_cont) && !o->have_mac)) {
		fprintf(stderr, "usage: tapecho (--tap IF | --iface IF) [--mac MAC] [--rarp] [--rarp-on-cont]"
			" [--seconds S] [--rcvbuf BYTES]\n");
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	uint8_t f[FRAME_MAX_BYTES];
	unsigned long echoed = 0;
	uint64_t end_ns;
	struct sigaction sa = { .sa_handler = on_term }, sc = { .sa_handler = on_cont };
	const char *name;
	int fd, r;

	if ((r = parse_opts(argc, argv, &o)) != 0)
		return r;
	name = o.tap ? o.tap : o.iface;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (o.rarp_on_cont)
		sigaction(SIGCONT, &sc, NULL);	/* no SA_RESTART: the poll below returns at once */
	fd = o.tap ? open_tap(o.tap) : open_packet(o.iface, (int)o.rcvbuf);
	if (fd < 0) {
		fprintf(stderr, "tapecho: open %s: %s\n", name, strerror(-fd));
		return 1;
	}
	if (o.rarp) {
		uint64_t waited_ns = wait_port_ready(name);

		fprintf(stderr, "tapecho port ready after %.1f ms\n", (double)waited_ns / 1e6);
		if ((r = send_rarp(fd, o.tap != NULL, o.iface, o.mac)) != 0) {
			fprintf(stderr, "tapecho: RARP: %s\n", strerror(-r));
			return 1;
		}
	}
	printf("tapecho ready\n");
	fflush(stdout);
	end_ns = mono_ns() + o.seconds * 1000000000ull;
	while (!stop && mono_ns() < end_ns) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		uint8_t tmp[6];

		if (continued) {
			continued = 0;
			if ((r = send_rarp(fd, o.tap != NULL, o.iface, o.mac)) != 0)
				fprintf(stderr, "tapecho: RARP: %s\n", strerror(-r));
		}
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(fd, f, sizeof(f));
		if (n < 14 || f[12] != PG_ETHERTYPE >> 8 || f[13] != (PG_ETHERTYPE & 0xff))
			continue;
		if (o.have_mac && memcmp(f, o.mac, 6) != 0)
			continue;
		memcpy(tmp, f, 6);
		memcpy(f, f + 6, 6);
		memcpy(f + 6, tmp, 6);
		/* A full tap or socket queue drops the frame: gwpktgen counts it lost. */
		if (write(fd, f, (size_t)n) == n)
			echoed++;
	}
	fprintf(stderr, "tapecho echoed %lu\n", echoed);
	close(fd);
	return 0;
}
