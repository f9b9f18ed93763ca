/* SPDX-License-Identifier: MIT */
/*
 * gwpktgen: a traffic generator and sink for the NFV measurement. It sends numbered, timestamped Ethernet frames at a fixed rate
 * from one interface (in the generator's namespace of
 * tests/integration/nfv_topo.sh) to a destination MAC, the guest's NIC, and
 * receives the frames the guest sends back (MACs swapped, or rewritten by a
 * two-NIC forwarder). What the packets see is the measure: loss,
 * duplicates, reordering, corruption, and the longest gap between two
 * consecutive frames received back, beside godwit's own downtime.
 *
 *   gwpktgen --iface IF --dst-mac MAC [--pps N] [--seconds S] [--size B]
 *            [--linger-ms MS] [--mark-file PATH] [--mark-slack-ms MS]
 *            [--start-file PATH] [--json]
 *
 * Frame (--size counts the 4-byte FCS the NIC adds, as pktgen's "64-byte
 * frames" do; we write size - 4 bytes): Ethernet header, ethertype 0x88b5
 * (IEEE 802 local experimental), then little-endian:
 *
 *   off len field
 *    0   4  magic 0x47575047 ("GWPG")
 *    4   2  version 1
 *    6   2  payload length in bytes (this header + filler)
 *    8   4  run id (random per run: frames of an earlier run are "foreign")
 *   12   4  reserved, 0
 *   16   8  sequence number, from 0
 *   24   8  send stamp, CLOCK_MONOTONIC ns (taken just before the send call)
 *   32   4  CRC32C of the payload with this field as 0
 *   36   .  filler: byte i is (seq + i) & 0xff
 *
 * Invariants. A frame is counted once: received (valid magic, run id and
 * CRC, sequence < sent, first time seen), duplicated (seen before),
 * corrupted (magic and run id right, CRC wrong or length/sequence out of
 * range) or foreign (anything else of our ethertype addressed to us).
 * lost = sent - received. Only frames addressed to our MAC count, so our
 * own frames flooded back by a switch never look like forwarded ones.
 *
 * Time. The sender paces with clock_nanosleep() on absolute deadlines
 * t0 + i / pps; when it is late it sends the frames already due at once
 * (at most BATCH per call) and reports how late it got. Receive stamps are
 * the kernel's (SO_TIMESTAMPNS, taken when the frame reached our socket's
 * device), converted to CLOCK_MONOTONIC with an offset sampled at start, so
 * a receiver thread that was descheduled does not invent a gap; a frame
 * without a kernel stamp gets the user-space time. The gap resolution is
 * one frame interval, 1 / pps: a gap shorter than that cannot be told from
 * the pacing.
 *
 * Bounds: pps <= 2,000,000, seconds <= 600, pps * seconds <= 2^26 frames
 * (the duplicate bitmap is 8 MiB at most), linger <= 10 s. Root (or
 * CAP_NET_RAW) is needed for the AF_PACKET socket.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <godwit/buf.h>
#include "mac.h"
#include "pgframe.h"

#define FCS_BYTES 4
#define MIN_SIZE_BYTES 64
#define MAX_SIZE_BYTES 1518
#define MAX_PPS 2000000
#define MAX_SECONDS 600
#define MAX_FRAMES (1u << 26)
#define MAX_LINGER_MS 10000
#define BATCH 64
#define RTT_BUCKET_NS 1000               /* 1 us histogram buckets */
#define RTT_BUCKETS 100000               /* up to 100 ms, then overflow */
#define MARK_POLL_NS 10000000            /* look for the mark file every 10 ms */
#define NS_PER_S UINT64_C(1000000000)
#define GAPS_MAX 65536                   /* gaps kept for the mark's look-up */
#define GAP_KEEP_MIN_NS 1000000          /* ... those of 1 ms or more (and >= 3 intervals) */

struct opts {
	const char *iface;
	uint8_t dst_mac[6];
	unsigned pps;
	unsigned seconds;
	unsigned size_bytes;             /* with FCS */
	unsigned linger_ms;
	const char *mark_file;
	unsigned mark_slack_ms;          /* the mark's gap may start this long after it */
	const char *start_file;          /* written with t0 when sending starts */
	bool json;
};

struct gap {
	uint64_t start_ns, len_ns;       /* CLOCK_MONOTONIC start, length */
};

/*
 * Shared between the sender (main thread) and the receiver thread.
 * Set before the receiver starts and never changed: fd, ifindex, our_mac,
 * run_id, t0_ns, seconds, frames_max, rt_offset_ns, nr_bins.
 * Atomic: sent (written by the sender, read by the receiver to bound
 * sequence numbers), stop.
 * Receiver-only until it is joined: everything under "receiver".
 */
struct pg {
	int fd;
	int ifindex;
	uint8_t our_mac[6];
	uint32_t run_id;
	uint64_t t0_ns;                  /* CLOCK_MONOTONIC of frame 0's deadline */
	uint64_t frames_max;             /* pps * seconds */
	int64_t rt_offset_ns;            /* CLOCK_REALTIME - CLOCK_MONOTONIC at start */
	unsigned nr_bins;                /* per-second receive bins */
	_Atomic uint64_t sent;
	atomic_bool stop;

	/* receiver */
	uint8_t *seen;                   /* bitmap, frames_max bits */
	uint64_t received, duplicated, reordered, corrupted, foreign;
	uint64_t max_seq;
	bool any;
	uint64_t last_rx_ns, first_rx_ns;
	uint64_t gap_ns, gap_start_ns;   /* longest gap and the rx stamp it starts at */
	uint64_t gap_keep_ns;            /* set at creation: the least gap kept in gaps[] */
	struct gap *gaps;                /* the first GAPS_MAX such gaps */
	unsigned nr_gaps;
	uint64_t *bins;                  /* received frames per second since t0 */
	uint32_t *rtt_hist;              /* RTT_BUCKETS + 1 (overflow) */
	uint64_t rtt_count;
	uint64_t user_stamps;            /* frames without a kernel stamp */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}



static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* Build frame @seq of @len bytes (no FCS) into @f; the stamp is put later. */
static void frame_build(const struct pg *pg, const struct opts *o, uint8_t *f, unsigned len, uint64_t seq)
{
	pgframe_build(f, o->dst_mac, pg->our_mac, len, pg->run_id, seq);
}

static void gap_keep(struct gap *g, unsigned *nr, uint64_t start_ns, uint64_t len_ns)
{
	if (*nr < GAPS_MAX)
		g[(*nr)++] = (struct gap){ start_ns, len_ns };
}

/* How much of [from_ns, to_ns) the kept gaps cover (they do not overlap each other). */
static uint64_t gaps_overlap_ns(const struct gap *g, unsigned nr, uint64_t from_ns, uint64_t to_ns)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < nr; i++) {
		uint64_t a = g[i].start_ns > from_ns ? g[i].start_ns : from_ns;
		uint64_t b = g[i].start_ns + g[i].len_ns < to_ns ? g[i].start_ns + g[i].len_ns : to_ns;

		if (b > a)
			sum += b - a;
	}
	return sum;
}

/* One frame received at @rx_ns (monotonic); classify and account it. */
static void rx_frame(struct pg *pg, uint8_t *f, size_t len, uint64_t rx_ns)
{
	uint64_t seq = 0, sent, tx_ns;
	enum pgframe_verdict v = pgframe_check(f, len, pg->our_mac, pg->run_id, &seq);

	if (v == PGFRAME_NOT_OURS)
		return;                  /* not ours at all: ARP, IPv6, our own flooded frames */
	if (v == PGFRAME_FOREIGN) {
		pg->foreign++;
		return;
	}
	sent = atomic_load_explicit(&pg->sent, memory_order_acquire);
	if (v == PGFRAME_CORRUPT || seq >= sent || seq >= pg->frames_max) {
		pg->corrupted++;
		return;
	}
	if (pg->seen[seq / 8] & (1u << (seq % 8))) {
		pg->duplicated++;
		return;
	}
	pg->seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
	pg->received++;
	if (pg->any && seq < pg->max_seq)
		pg->reordered++;
	if (!pg->any || seq > pg->max_seq)
		pg->max_seq = seq;

	if (!pg->any) {
		pg->first_rx_ns = rx_ns;
	} else if (rx_ns > pg->last_rx_ns) {
		uint64_t gap = rx_ns - pg->last_rx_ns;

		if (gap > pg->gap_ns) {
			pg->gap_ns = gap;
			pg->gap_start_ns = pg->last_rx_ns;
		}
		if (gap >= pg->gap_keep_ns)
			gap_keep(pg->gaps, &pg->nr_gaps, pg->last_rx_ns, gap);
	}
	if (!pg->any || rx_ns > pg->last_rx_ns)
		pg->last_rx_ns = rx_ns;
	pg->any = true;

	if (rx_ns >= pg->t0_ns) {
		uint64_t b = (rx_ns - pg->t0_ns) / NS_PER_S;

		if (b < pg->nr_bins)
			pg->bins[b]++;
	}
	tx_ns = gw_le64_get(f + PG_ETH_HDR_BYTES + 24);
	if (rx_ns >= tx_ns) {
		uint64_t bucket = (rx_ns - tx_ns) / RTT_BUCKET_NS;

		pg->rtt_hist[bucket < RTT_BUCKETS ? bucket : RTT_BUCKETS]++;
		pg->rtt_count++;
	}
}

static void *rx_main(void *arg)
{
	struct pg *pg = arg;
	static uint8_t bufs[BATCH][MAX_SIZE_BYTES + 64];
	static char ctl[BATCH][CMSG_SPACE(sizeof(struct timespec))];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];

	while (!atomic_load(&pg->stop)) {
		struct pollfd pfd = { .fd = pg->fd, .events = POLLIN };
		int n;

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		for (int i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){ .iov_base = bufs[i], .iov_len = sizeof(bufs[i]) };
			msgs[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1,
				.msg_control = ctl[i], .msg_controllen = sizeof(ctl[i]) };
		}
		n = recvmmsg(pg->fd, msgs, BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;
		uint64_t user_ns = mono_ns();
		for (int i = 0; i < n; i++) {
			uint64_t rx_ns = 0;

			for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c;
			     c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
					struct timespec ts;

					memcpy(&ts, CMSG_DATA(c), sizeof(ts));
					rx_ns = (uint64_t)((int64_t)((uint64_t)ts.tv_sec * NS_PER_S +
						(uint64_t)ts.tv_nsec) - pg->rt_offset_ns);
				}
			}
			/* A stamp from the future or far past is a clock step: use ours. */
			if (rx_ns == 0 || rx_ns > user_ns || user_ns - rx_ns > NS_PER_S) {
				rx_ns = user_ns;
				pg->user_stamps++;
			}
			rx_frame(pg, bufs[i], msgs[i].msg_len, rx_ns);
		}
	}
	return NULL;
}

static int open_socket(struct pg *pg, const char *iface)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(PG_ETHERTYPE) };
	struct ifreq ifr = { 0 };
	int one = 1, buf_bytes = 8 << 20;

	pg->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(PG_ETHERTYPE));
	if (pg->fd < 0)
		return -errno;
	if (strlen(iface) >= IFNAMSIZ)
		return -ENAMETOOLONG;
	strcpy(ifr.ifr_name, iface);
	if (ioctl(pg->fd, SIOCGIFINDEX, &ifr) < 0)
		return -errno;
	pg->ifindex = ifr.ifr_ifindex;
	if (ioctl(pg->fd, SIOCGIFHWADDR, &ifr) < 0)
		return -errno;
	memcpy(pg->our_mac, ifr.ifr_hwaddr.sa_data, 6);
	sll.sll_ifindex = pg->ifindex;
	if (bind(pg->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		return -errno;
	/* Our own frames would otherwise be delivered to us as PACKET_OUTGOING. */
	(void)setsockopt(pg->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	if (setsockopt(pg->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) < 0)
		return -errno;
	/* A send never blocks the pacing loop for long: a full queue drops. */
	struct timeval snd_timeout = { .tv_sec = 1 };
	if (setsockopt(pg->fd, SOL_SOCKET, SO_SNDTIMEO, &snd_timeout, sizeof(snd_timeout)) < 0)
		return -errno;
	/* Best effort: FORCE variants need CAP_NET_ADMIN, which we usually have. */
	if (setsockopt(pg->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf_bytes, sizeof(buf_bytes)) < 0)
		(void)setsockopt(pg->fd, SOL_SOCKET, SO_RCVBUF, &buf_bytes, sizeof(buf_bytes));
	if (setsockopt(pg->fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf_bytes, sizeof(buf_bytes)) < 0)
		(void)setsockopt(pg->fd, SOL_SOCKET, SO_SNDBUF, &buf_bytes, sizeof(buf_bytes));
	return 0;
}

/*
 * The mark: a CLOCK_MONOTONIC stamp in seconds ("12345.678901234", as
 * godwit's log prints it) in the file, or, when it holds no number, the
 * moment we first saw the file. 0 while there is none.
 */
static uint64_t mark_read(const char *path, uint64_t now)
{
	char buf[64] = { 0 };
	unsigned long long s = 0, frac_ns = 0;
	unsigned digits = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || sscanf(buf, "%llu", &s) != 1)
		return now;
	for (const char *d = strchr(buf, '.'); d && d[1] >= '0' && d[1] <= '9' && digits < 9; d++, digits++)
		frac_ns = frac_ns * 10 + (unsigned)(d[1] - '0');
	for (; digits < 9; digits++)
		frac_ns *= 10;
	return (uint64_t)s * NS_PER_S + frac_ns;
}

static uint64_t rtt_quantile_ns(const struct pg *pg, double q)
{
	uint64_t want = (uint64_t)(q * (double)pg->rtt_count), acc = 0;

	if (!pg->rtt_count)
		return 0;
	if (want >= pg->rtt_count)
		want = pg->rtt_count - 1;
	for (unsigned b = 0; b <= RTT_BUCKETS; b++) {
		acc += pg->rtt_hist[b];
		if (acc > want)
			return (uint64_t)b * RTT_BUCKET_NS + RTT_BUCKET_NS / 2;
	}
	return (uint64_t)RTT_BUCKETS * RTT_BUCKET_NS;
}

/*
 * Mean received frames per second over the whole 1-second bins in
 * [from_ns, to_ns) (both relative to t0); -1 when no whole bin fits.
 */
static double bins_rate(const struct pg *pg, uint64_t from_ns, uint64_t to_ns)
{
	uint64_t first = (from_ns + NS_PER_S - 1) / NS_PER_S, end = to_ns / NS_PER_S, sum = 0;

	if (end > pg->nr_bins)
		end = pg->nr_bins;
	if (end <= first)
		return -1;
	for (uint64_t b = first; b < end; b++)
		sum += pg->bins[b];
	return (double)sum / (double)(end - first);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gwpktgen --iface IF --dst-mac MAC [--pps N (1..%u, 1000)] [--seconds S (1..%u, 5)]\n"
		   "                [--size BYTES (%u..%u with FCS, 64)] [--linger-ms MS (0..%u, 300)]\n"
		   "                [--mark-file PATH] [--mark-slack-ms MS (50)] [--start-file PATH] [--json]\n",
		MAX_PPS, MAX_SECONDS, MIN_SIZE_BYTES, MAX_SIZE_BYTES, MAX_LINGER_MS);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	bool have_mac = false;

	*o = (struct opts){ .pps = 1000, .seconds = 5, .size_bytes = MIN_SIZE_BYTES, .linger_ms = 300,
			    .mark_slack_ms = 50 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int r = 0;

		if (!strcmp(a, "--json")) { o->json = true; continue; }
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); exit(0); }
		if (!v) { fprintf(stderr, "gwpktgen: %s needs a value\n", a); return -EINVAL; }
		i++;
		if (!strcmp(a, "--iface")) o->iface = v;
		else if (!strcmp(a, "--dst-mac")) { r = parse_mac(v, o->dst_mac); have_mac = true; }
		else if (!strcmp(a, "--pps")) r = parse_uint(v, 1, MAX_PPS, &o->pps);
		else if (!strcmp(a, "--seconds")) r = parse_uint(v, 1, MAX_SECONDS, &o->seconds);
		else if (!strcmp(a, "--size")) r = parse_uint(v, MIN_SIZE_BYTES, MAX_SIZE_BYTES, &o->size_bytes);
		else if (!strcmp(a, "--linger-ms")) r = parse_uint(v, 0, MAX_LINGER_MS, &o->linger_ms);
		else if (!strcmp(a, "--mark-file")) o->mark_file = v;
		else if (!strcmp(a, "--mark-slack-ms")) r = parse_uint(v, 0, MAX_LINGER_MS, &o->mark_slack_ms);
		else if (!strcmp(a, "--start-file")) o->start_file = v;
		else { fprintf(stderr, "gwpktgen: unknown option %s\n", a); return -EINVAL; }
		if (r) { fprintf(stderr, "gwpktgen: bad value for %s: %s\n", a, v); return r; }
	}
	if (!o->iface || !have_mac) {
		usage(stderr);
		return -EINVAL;
	}
	if ((uint64_t)o->pps * o->seconds > MAX_FRAMES) {
		fprintf(stderr, "gwpktgen: pps * seconds over %u frames\n", MAX_FRAMES);
		return -EINVAL;
	}
	return 0;
}

static int write_start_file(const char *path, uint64_t t0_ns)
{
	char tmp[4096];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%" PRIu64 ".%09" PRIu64 "\n", t0_ns / NS_PER_S, t0_ns % NS_PER_S);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		return -errno;
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t frames[BATCH][MAX_SIZE_BYTES];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_halen = 6 };
	struct opts o;
	struct pg pg = { .fd = -1 };
	pthread_t rx;
	uint64_t interval_ns, late_max_ns = 0, mark_ns = 0, next_mark_poll = 0, end_ns, last_tx_ns = 0;
	uint64_t send_errors = 0, send_gap_ns = 0;
	struct gap *tx_gaps = calloc(GAPS_MAX, sizeof(*tx_gaps));  /* the sender's stalls */
	unsigned nr_tx_gaps = 0;
	unsigned len;
	int r;

	if (parse_opts(argc, argv, &o))
		return 2;
	len = o.size_bytes - FCS_BYTES;
	pg.frames_max = (uint64_t)o.pps * o.seconds;
	pg.nr_bins = o.seconds + o.linger_ms / 1000 + 2;
	pg.seen = calloc(pg.frames_max / 8 + 1, 1);
	pg.bins = calloc(pg.nr_bins, sizeof(*pg.bins));
	pg.rtt_hist = calloc(RTT_BUCKETS + 1, sizeof(*pg.rtt_hist));
	pg.gaps = calloc(GAPS_MAX, sizeof(*pg.gaps));
	if (!pg.seen || !pg.bins || !pg.rtt_hist || !pg.gaps || !tx_gaps) {
		fprintf(stderr, "gwpktgen: out of memory\n");
		return 1;
	}
	r = open_socket(&pg, o.iface);
	if (r) {
		fprintf(stderr, "gwpktgen: AF_PACKET socket on %s: %s\n", o.iface, strerror(-r));
		return 1;
	}
	if (getrandom(&pg.run_id, sizeof(pg.run_id), 0) != sizeof(pg.run_id))
		pg.run_id = (uint32_t)mono_ns() ^ (uint32_t)getpid();
	(void)prctl(PR_SET_TIMERSLACK, 1UL);
	to.sll_ifindex = pg.ifindex;
	to.sll_protocol = htons(PG_ETHERTYPE);
	memcpy(to.sll_addr, o.dst_mac, 6);

	interval_ns = NS_PER_S / o.pps;
	pg.gap_keep_ns = 3 * interval_ns > GAP_KEEP_MIN_NS ? 3 * interval_ns : GAP_KEEP_MIN_NS;
	{
		uint64_t m1 = mono_ns(), rt = real_ns(), m2 = mono_ns();

		pg.rt_offset_ns = (int64_t)rt - (int64_t)(m1 + (m2 - m1) / 2);
	}
	pg.t0_ns = mono_ns() + 20000000;        /* 20 ms for the receiver to start */
	r = pthread_create(&rx, NULL, rx_main, &pg);
	if (r) {
		fprintf(stderr, "gwpktgen: receiver thread: %s\n", strerror(r));
		return 1;
	}
	if (o.start_file && (r = write_start_file(o.start_file, pg.t0_ns)) != 0)
		fprintf(stderr, "gwpktgen: start file %s: %s\n", o.start_file, strerror(-r));

	for (uint64_t seq = 0; seq < pg.frames_max;) {
		uint64_t deadline = pg.t0_ns + seq * NS_PER_S / o.pps, now;
		struct timespec ts = { .tv_sec = (time_t)(deadline / NS_PER_S), .tv_nsec = (long)(deadline % NS_PER_S) };
		unsigned n = 0;
		int sent;

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		now = mono_ns();
		if (now - deadline > late_max_ns)
			late_max_ns = now - deadline;
		/* Every frame due by now (seq's at least), at most BATCH: a late sender catches up. */
		while (n < BATCH && seq + n < pg.frames_max &&
		       (n == 0 || pg.t0_ns + (seq + n) * NS_PER_S / o.pps <= now)) {
			frame_build(&pg, &o, frames[n], len, seq + n);
			iov[n] = (struct iovec){ .iov_base = frames[n], .iov_len = len };
			msgs[n].msg_hdr = (struct msghdr){ .msg_name = &to, .msg_namelen = sizeof(to),
				.msg_iov = &iov[n], .msg_iovlen = 1 };
			n++;
		}
		now = mono_ns();
		for (unsigned i = 0; i < n; i++)
			pgframe_seal(frames[i], len, now);
		/* Counted as sent before the call: the receiver bounds sequences by it. */
		atomic_store_explicit(&pg.sent, seq + n, memory_order_release);
		sent = sendmmsg(pg.fd, msgs, n, 0);
		if (sent < (int)n)
			send_errors += (uint64_t)(sent < 0 ? (int)n : (int)n - sent);
		if (seq && now - last_tx_ns > send_gap_ns)
			send_gap_ns = now - last_tx_ns;
		if (seq && now - last_tx_ns >= pg.gap_keep_ns)
			gap_keep(tx_gaps, &nr_tx_gaps, last_tx_ns, now - last_tx_ns);
		last_tx_ns = now;
		seq += n;
		if (o.mark_file && !mark_ns && now >= next_mark_poll) {
			mark_ns = mark_read(o.mark_file, now);
			next_mark_poll = now + MARK_POLL_NS;
		}
	}
	/* Frames that failed to leave are not "lost" by the network. */
	uint64_t sent_ok = atomic_load(&pg.sent) - send_errors;
	end_ns = mono_ns() + (uint64_t)o.linger_ms * 1000000;
	while (mono_ns() < end_ns) {
		struct timespec ts = { .tv_sec = (time_t)(end_ns / NS_PER_S), .tv_nsec = (long)(end_ns % NS_PER_S) };

		if (o.mark_file && !mark_ns)
			mark_ns = mark_read(o.mark_file, mono_ns());
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	if (o.mark_file && !mark_ns)
		mark_ns = mark_read(o.mark_file, mono_ns());
	atomic_store(&pg.stop, true);
	pthread_join(rx, NULL);
	close(pg.fd);

	double dur_s = last_tx_ns > pg.t0_ns ? (double)(last_tx_ns - pg.t0_ns) / 1e9 : 0;
	/* sent frames span (sent - 1) intervals: the achieved rate over them */
	double achieved_pps = dur_s > 0 && sent_ok > 1 ? (double)(sent_ok - 1) / dur_s : 0;
	/* The sending window by deadlines: frame i is due at i / pps, i < pps * seconds. */
	uint64_t send_end_rel = (uint64_t)o.seconds * NS_PER_S;
	double before = -1, after = -1;
	uint64_t mark_gap_ns = 0, mark_gap_start_ns = 0;

	/*
	 * The mark's gap: the longest one that the mark falls in or that
	 * starts at most mark_slack after it (the last frames through the
	 * guest arrive just after its pause), so that a sender's or a host's
	 * stall before or well after the migration is not taken for it. Gaps
	 * under gap_keep_ns are not kept: then it is 0.
	 */
	for (unsigned i = 0; mark_ns && i < pg.nr_gaps; i++)
		if (pg.gaps[i].start_ns + pg.gaps[i].len_ns > mark_ns &&
		    pg.gaps[i].start_ns <= mark_ns + (uint64_t)o.mark_slack_ms * 1000000 &&
		    pg.gaps[i].len_ns > mark_gap_ns) {
			mark_gap_ns = pg.gaps[i].len_ns;
			mark_gap_start_ns = pg.gaps[i].start_ns;
		}
	if (mark_ns > pg.t0_ns) {
		uint64_t mark_rel = mark_ns - pg.t0_ns, after_from = mark_rel;

		/* "after" starts once the mark's gap is over */
		if (mark_gap_ns)
			after_from = mark_gap_start_ns + mark_gap_ns - pg.t0_ns;
		before = bins_rate(&pg, 0, mark_rel);
		after = bins_rate(&pg, after_from, send_end_rel);
	} else if (!o.mark_file) {
		before = bins_rate(&pg, 0, send_end_rel);
	}
	uint64_t lost = sent_ok > pg.received ? sent_ok - pg.received : 0;

	if (o.json) {
		printf("{\"sent\": %" PRIu64 ", \"received\": %" PRIu64 ", \"lost\": %" PRIu64
		       ", \"duplicated\": %" PRIu64 ", \"reordered\": %" PRIu64 ", \"corrupted\": %" PRIu64
		       ", \"foreign\": %" PRIu64 ", \"send-errors\": %" PRIu64,
		       sent_ok, pg.received, lost, pg.duplicated, pg.reordered, pg.corrupted, pg.foreign, send_errors);
		printf(", \"net-gap-ms\": %.3f, \"gap-start-ns\": %" PRIu64 ", \"gap-resolution-ms\": %.3f",
		       (double)pg.gap_ns / 1e6, pg.gap_start_ns, (double)interval_ns / 1e6);
		printf(", \"mark-gap-ms\": %.3f, \"mark-gap-start-ns\": %" PRIu64 ", \"mark-send-gap-ms\": %.3f",
		       (double)mark_gap_ns / 1e6, mark_gap_start_ns, (double)gaps_overlap_ns(tx_gaps, nr_tx_gaps,
		       mark_gap_start_ns, mark_gap_start_ns + mark_gap_ns) / 1e6);
		printf(", \"pps\": %u, \"achieved-pps\": %.1f, \"send-late-max-ms\": %.3f, \"send-gap-ms\": %.3f"
		       ", \"size-bytes\": %u", o.pps, achieved_pps, (double)late_max_ns / 1e6,
		       (double)send_gap_ns / 1e6, o.size_bytes);
		if (before >= 0) printf(", \"forwarded-pps-before\": %.1f", before);
		else printf(", \"forwarded-pps-before\": null");
		if (after >= 0) printf(", \"forwarded-pps-after\": %.1f", after);
		else printf(", \"forwarded-pps-after\": null");
		printf(", \"mark-ns\": %" PRIu64 ", \"start-ns\": %" PRIu64 ", \"first-rx-ns\": %" PRIu64
		       ", \"last-rx-ns\": %" PRIu64, mark_ns, pg.t0_ns, pg.first_rx_ns, pg.last_rx_ns);
		printf(", \"rtt-p50-us\": %.1f, \"rtt-p99-us\": %.1f, \"user-stamps\": %" PRIu64 ", \"rx-per-second\": [",
		       (double)rtt_quantile_ns(&pg, 0.50) / 1e3, (double)rtt_quantile_ns(&pg, 0.99) / 1e3, pg.user_stamps);
		for (unsigned b = 0; b < pg.nr_bins; b++)
			printf("%s%" PRIu64, b ? ", " : "", pg.bins[b]);
		printf("]}\n");
	} else {
		printf("sent %" PRIu64 " received %" PRIu64 " lost %" PRIu64 " duplicated %" PRIu64
		       " reordered %" PRIu64 " corrupted %" PRIu64 " foreign %" PRIu64 "\n",
		       sent_ok, pg.received, lost, pg.duplicated, pg.reordered, pg.corrupted, pg.foreign);
		printf("net-gap %.3f ms at %" PRIu64 " ns (resolution %.3f ms); rate %u pps asked, %.1f achieved,"
		       " sender late by up to %.3f ms\n", (double)pg.gap_ns / 1e6, pg.gap_start_ns,
		       (double)interval_ns / 1e6, o.pps, achieved_pps, (double)late_max_ns / 1e6);
		printf("forwarded pps before %.1f after %.1f; rtt p50 %.1f us p99 %.1f us\n", before, after,
		       (double)rtt_quantile_ns(&pg, 0.50) / 1e3, (double)rtt_quantile_ns(&pg, 0.99) / 1e3);
	}
	free(pg.seen);
	free(pg.bins);
	free(pg.rtt_hist);
	free(pg.gaps);
	free(tx_gaps);
	return 0;
}
