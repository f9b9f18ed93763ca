/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the destination (see postcopy.h, docs/protocol.md#postcopy).
 *
 *   PC_PREPARE  every data channel ended (CHAN_END: every precopy page is
 *               applied); guest RAM goes under userfaultfd (mem/uffd_post.h:
 *               nothing of it stays mapped, so every first touch faults);
 *               the preempt connection is admitted; the fault handler and
 *               one receiver per connection start; PC_PREPARED.
 *   PC_DIRTY    the pages not to trust ("untrusted"), then COMPLETE and GO
 *               as in precopy; the VM resumes with them missing.
 *   postcopy    the fault handler reads faults: a page that is right here
 *               (trusted, or placed already) is mapped at once; any other
 *               becomes a request on the preempt connection (once per page)
 *               and its thread waits in the kernel, without spinning. The
 *               receivers place pages as they come, each page once: a
 *               claim bit is taken before the page is written, so a late
 *               copy (pushed and requested, say) is dropped and never
 *               overwrites what the guest wrote since. When the last
 *               untrusted page is placed: PC_DONE; then PC_END.
 *   recovery    a broken connection leaves the guest running (threads that
 *               fault wait; requests are kept), status postcopy-paused,
 *               until gw_postcopy_recover listens: the source presents the
 *               migration id (PC_RECOVER), gets the map of pages still
 *               missing (PC_NEEDED, PC_RECOVERED), reopens the data and
 *               preempt connections; outstanding requests are sent again.
 *
 * Hostile input: a page on the preempt connection that was not requested
 * (or answered twice), a pushed page outside the untrusted set (or pushed
 * twice), an XBZRLE entry, a page outside RAM: refused with a reason
 * (ERROR to the source), and the migration fails: after the switch that
 * loses the VM, as QEMU would, but nothing is written that should not be.
 *
 * Threads (struct gw_pc_dst belongs to the migration thread unless said):
 * the bitmaps untrusted (set before resume, then read-only), claimed,
 * received, requested, pushed and settled are per-page atomic bits; the
 * counters are atomic; req_lock orders request sending against a recovery;
 * lock guards the digest sum; the fault account has its own lock.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include "admit.h"
#include "channel.h"
#include "dest.h"
#include "mem/digest.h"
#include "mem/page_digest.h"
#include "mem/uffd_post.h"
#include "postcopy.h"
#include "postcopy_fault.h"
#include "util/fdio.h"

#define PAGE GW_PAGE_BYTES
#define NR_STRIPES 256			/* hashing locks, one per 64-page window modulo this */
#define TICK_MS 100			/* fault handler wake-up when idle */
#define STATS_MS 250			/* PC_STATS to the source */
#define FAULTS_PER_READ 256
#define MAX_RECV (GW_WIRE_MAX_CHANNELS + 1)

struct dst_recv {
	struct gw_pc_dst *pc;
	struct gw_conn *conn;		/* a data connection or s->preempt */
	struct gw_pages_in *in;
	bool preempt;
	unsigned index;
	pthread_t thread;
	bool started;			/* migration thread */
	struct gw_page_digest sum;	/* receiver thread; merged into pc->sum when it ends */
};

struct req_batch {
	uint32_t count;
	uint64_t pages[GW_WIRE_MAX_BATCH_PAGES];
};

struct gw_pc_dst {
	struct gw_session *s;
	struct gw_uffd_post *uffd;
	bool user_only;

	struct gw_bitmap untrusted[GW_MAX_RAM_BLOCKS];	/* set before resume, then read-only */
	struct gw_bitmap claimed[GW_MAX_RAM_BLOCKS];	/* atomic: a placement took the page */
	struct gw_bitmap received[GW_MAX_RAM_BLOCKS];	/* atomic: placed (mapped) */
	struct gw_bitmap requested[GW_MAX_RAM_BLOCKS];	/* atomic: asked on preempt, no answer yet */
	struct gw_bitmap pushed[GW_MAX_RAM_BLOCKS];	/* atomic: came by the background stream */
	struct gw_bitmap settled[GW_MAX_RAM_BLOCKS];	/* atomic, under the page's stripe lock: a trusted
							   page hashed (when verifying) and mapped or
							   about to be */

	uint64_t pages;			/* untrusted pages at the switch */
	uint64_t remaining;		/* atomic */
	uint64_t placed_requested, placed_pushed, dups, requests, placed;	/* atomic */
	bool done_sent;			/* atomic: PC_DONE reached the socket */
	bool cut_fired;			/* atomic: dst-pc-cut fired */
	bool complete;			/* COMPLETE handled */
	int nr_vcpus;

	bool verify;			/* digest possible: asked, every block fd-backed */
	pthread_mutex_t stripes[NR_STRIPES];
	pthread_mutex_t lock;		/* sum, digest_ready */
	struct gw_page_digest sum;
	struct gw_page_digest handler_sum;	/* fault handler thread */
	struct gw_digest digest;	/* the result, after the sweep */
	int digest_err;

	struct gw_pc_faults faults;
	pthread_mutex_t req_lock;	/* link_up, t_link_up_ns; held while requests are sent */
	bool link_up;
	uint64_t t_link_up_ns;

	struct gw_pages_in preempt_in;
	bool preempt_in_ready;
	struct dst_recv recv[MAX_RECV];
	pthread_t handler;
	bool handler_started;
	pthread_t mapper;
	bool mapper_started;
	bool mapper_stop;		/* atomic */
	int stop_fd;			/* eventfd: the fault handler leaves */
	struct { pid_t tid; int vcpu; } tids[256];	/* fault handler: known threads */
	unsigned nr_tids;
	struct req_batch req[GW_MAX_RAM_BLOCKS];	/* fault handler: requests being gathered */

	uint64_t t_resumed_ns, t_done_ns, t_paused_ns, paused_ns;	/* lock */
	uint32_t recoveries;
};

/* ---- small helpers ---- */

int dst_pc_probe(char *why, size_t why_len)
{
	return gw_uffd_post_probe(why, why_len);
}

static pthread_mutex_t *stripe(struct gw_pc_dst *pc, uint64_t page)
{
	return &pc->stripes[(page / 64) % NR_STRIPES];
}

/* The statistics this side shows (s->lock taken here). */
static void publish(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;
	struct gw_msg_pc_stats f;
	uint64_t now = gw_now_ns();
	struct gw_stats *st = &s->stats;

	memset(&f, 0, sizeof(f));
	gw_pc_faults_figures(&pc->faults, now, &f);
	pthread_mutex_lock(&s->lock);
	st->postcopy = true;
	st->postcopy_pages = pc->pages;
	st->postcopy_remaining_pages = __atomic_load_n(&pc->remaining, __ATOMIC_RELAXED);
	st->postcopy_requests = __atomic_load_n(&pc->requests, __ATOMIC_RELAXED);
	st->postcopy_placed_requested = __atomic_load_n(&pc->placed_requested, __ATOMIC_RELAXED);
	st->postcopy_placed_pushed = __atomic_load_n(&pc->placed_pushed, __ATOMIC_RELAXED);
	st->postcopy_dup_pages = __atomic_load_n(&pc->dups, __ATOMIC_RELAXED);
	st->postcopy_faults = f.faults;
	st->postcopy_local_faults = f.local_faults;
	st->postcopy_blocktime_ns = f.blocktime_ns;
	st->postcopy_vcpu_blocktime_total_ns = f.vcpu_blocktime_total_ns;
	st->postcopy_nr_vcpus = f.nr_vcpus;
	memcpy(st->postcopy_vcpu_blocktime_ns, f.vcpu_blocktime_ns, sizeof(st->postcopy_vcpu_blocktime_ns));
	st->postcopy_latency_p50_ns = f.latency_p50_ns;
	st->postcopy_latency_p99_ns = f.latency_p99_ns;
	st->postcopy_latency_max_ns = f.latency_max_ns;
	st->postcopy_latency_samples = f.latency_samples;
	st->postcopy_recoveries = pc->recoveries;
	st->postcopy_paused_ns = pc->paused_ns + (pc->t_paused_ns ? now - pc->t_paused_ns : 0);
	if (pc->t_resumed_ns)
		st->postcopy_time_ns = (pc->t_done_ns ? pc->t_done_ns : now) - pc->t_resumed_ns;
	pthread_mutex_unlock(&s->lock);
}

/* The figures of PC_STATS and PC_DONE. */
static void figures(struct gw_pc_dst *pc, struct gw_msg_pc_stats *m)
{
	memset(m, 0, sizeof(*m));
	gw_pc_faults_figures(&pc->faults, gw_now_ns(), m);
	m->remaining_pages = __atomic_load_n(&pc->remaining, __ATOMIC_RELAXED);
	m->requests = __atomic_load_n(&pc->requests, __ATOMIC_RELAXED);
	m->placed_requested = __atomic_load_n(&pc->placed_requested, __ATOMIC_RELAXED);
	m->placed_pushed = __atomic_load_n(&pc->placed_pushed, __ATOMIC_RELAXED);
	m->dup_pages = __atomic_load_n(&pc->dups, __ATOMIC_RELAXED);
	pthread_mutex_lock(&pc->s->lock);
	m->paused_ns = pc->paused_ns;
	pthread_mutex_unlock(&pc->s->lock);
}

/* Every page is here: tell the source (again after a recovery if it did not get through). */
static void send_done(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;
	struct gw_msg_pc_stats m;

	if (__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE) || __atomic_load_n(&pc->done_sent, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&s->lock);
	if (!pc->t_done_ns) {
		pc->t_done_ns = gw_now_ns();
		gw_log(GW_LOG_INFO, "mig", "postcopy_complete", "postcopy_ms=%.3f pages=%llu",
		       (pc->t_done_ns - pc->t_resumed_ns) / 1e6, (unsigned long long)pc->pages);
	}
	pthread_mutex_unlock(&s->lock);
	figures(pc, &m);
	if (gw_conn_send_msg(&s->ctl, GW_MSG_PC_DONE, &m) == 0)
		__atomic_store_n(&pc->done_sent, true, __ATOMIC_RELEASE);
	publish(pc);
}

/* ---- placement: each page once ---- */

/* Testing: dst-pc-cut:N cuts every connection once N pages were placed. */
static void fault_cut(struct gw_pc_dst *pc, uint64_t placed)
{
	struct gw_session *s = pc->s;

	if (!gw_fault_armed(s, GW_FAULT_DST_PC_CUT) || placed < gw_fault_arg(s) ||
	    __atomic_exchange_n(&pc->cut_fired, true, __ATOMIC_ACQ_REL))
		return;
	gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=dst-pc-cut placed=%llu action=cut",
	       (unsigned long long)placed);
	gw_fail(s, "postcopy", -ECONNRESET, false, "fault injection: every connection cut");
}

/* @nr claimed pages from @page of @block placed (@src: their bytes, NULL: zeros). */
static void placed(struct dst_recv *r, unsigned block, uint64_t page, uint64_t nr, const uint8_t *src)
{
	struct gw_pc_dst *pc = r->pc;
	uint64_t left, total;

	for (uint64_t k = 0; k < nr; k++) {
		gw_bitmap_set_atomic(&pc->received[block], page + k);
		if (pc->verify && src)
			gw_page_digest_add(&r->sum, block, page + k, src + k * PAGE);
	}
	gw_pc_faults_placed(&pc->faults, block, page, nr, gw_now_ns());
	__atomic_fetch_add(r->preempt ? &pc->placed_requested : &pc->placed_pushed, nr, __ATOMIC_RELAXED);
	total = __atomic_add_fetch(&pc->placed, nr, __ATOMIC_RELAXED);
	left = __atomic_sub_fetch(&pc->remaining, nr, __ATOMIC_ACQ_REL);
	if (!left)
		send_done(pc);
	fault_cut(pc, total);
}

/* Place one run of claimed pages. 0 or the error (recorded). */
static int place_run(struct dst_recv *r, unsigned block, uint64_t page, uint64_t nr, const uint8_t *src)
{
	struct gw_pc_dst *pc = r->pc;
	int ret;

	if (!nr)
		return 0;
	ret = src ? gw_uffd_post_place(pc->uffd, block, page, nr, src) : gw_uffd_post_zero(pc->uffd, block, page, nr);
	if (ret)
		return gw_fail(pc->s, "postcopy", ret == -EEXIST ? -EIO : ret, false,
			       "placing pages %llu..%llu of block %u: %s", (unsigned long long)page,
			       (unsigned long long)(page + nr - 1), block, strerror(-ret));
	placed(r, block, page, nr, src);
	return 0;
}

/*
 * The writes of one frame: every page claimed first, so that a copy that
 * comes second (a push after an answer, or the reverse) is dropped.
 */
static int place_writes(struct dst_recv *r, unsigned block, const struct gw_page_write *w, int n)
{
	struct gw_pc_dst *pc = r->pc;

	for (int i = 0; i < n; i++) {
		uint64_t run_first = w[i].page, run_len = 0;
		const uint8_t *src = w[i].kind == GW_PAGE_NORMAL ? w[i].src : NULL;
		int ret;

		for (uint32_t k = 0; k < w[i].nr_pages; k++) {
			uint64_t p = w[i].page + k;

			if (!gw_bitmap_test_and_set_atomic(&pc->claimed[block], p)) {
				if (!run_len)
					run_first = p;
				run_len++;
				continue;
			}
			__atomic_fetch_add(&pc->dups, 1, __ATOMIC_RELAXED);
			ret = place_run(r, block, run_first, run_len,
					src ? src + (run_first - w[i].page) * PAGE : NULL);
			if (ret)
				return ret;
			run_len = 0;
		}
		ret = place_run(r, block, run_first, run_len, src ? src + (run_first - w[i].page) * PAGE : NULL);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- receivers ---- */

static uint64_t entry_page(const struct gw_pages_in *in, uint32_t i)
{
	return gw_page_entry_page(gw_le64_get((const uint8_t *)&in->entries[i]));
}

/*
 * What postcopy allows in a checked frame, before its data is read: whole
 * pages only; on the preempt connection pages that were asked for; on a
 * data connection pages of the untrusted set not pushed before. 0 or the
 * error (recorded with its reason).
 */
static int frame_allowed(struct dst_recv *r, const struct gw_pages_plan *plan)
{
	struct gw_pc_dst *pc = r->pc;
	struct gw_session *s = pc->s;
	unsigned b = plan->ph.block;

	if (plan->nr_xbzrle)
		return gw_fail(s, "postcopy", -EPROTO, false, "XBZRLE entry after the postcopy switch");
	for (uint32_t i = 0; i < plan->ph.nr_entries; i++) {
		uint64_t p = entry_page(r->in, i);

		if (r->preempt && !gw_bitmap_test_atomic(&pc->requested[b], p))
			return gw_fail(s, "postcopy", -EPROTO, false,
				       "page %llu of block %u on the preempt connection was never requested "
				       "(or answered twice)", (unsigned long long)p, b);
		if (!r->preempt && !gw_bitmap_test(&pc->untrusted[b], p))
			return gw_fail(s, "postcopy", -EPROTO, false,
				       "pushed page %llu of block %u is not one the destination lacks",
				       (unsigned long long)p, b);
		if (!r->preempt && gw_bitmap_test_atomic(&pc->pushed[b], p))
			return gw_fail(s, "postcopy", -EPROTO, false, "page %llu of block %u pushed twice",
				       (unsigned long long)p, b);
	}
	return 0;
}

/* A whole, checked frame: its pages count as answered / pushed (twice in one frame: refused). */
static int frame_consume(struct dst_recv *r, const struct gw_pages_plan *plan)
{
	struct gw_pc_dst *pc = r->pc;
	unsigned b = plan->ph.block;

	for (uint32_t i = 0; i < plan->ph.nr_entries; i++) {
		uint64_t p = entry_page(r->in, i);
		bool twice = r->preempt ? !gw_bitmap_test_atomic(&pc->requested[b], p) :
			     gw_bitmap_test_and_set_atomic(&pc->pushed[b], p);

		if (twice)
			return gw_fail(pc->s, "postcopy", -EPROTO, false, "page %llu of block %u twice in one frame",
				       (unsigned long long)p, b);
		if (r->preempt)
			gw_bitmap_clear_atomic(&pc->requested[b], p);
	}
	return 0;
}

/* A frame gw_pages_in_check refused (@err): the reason, naming the entry. */
static int refuse_entries(struct dst_recv *r, const struct gw_msg_pages_hdr *ph, int err)
{
	struct gw_session *s = r->pc->s;

	if (ph->block >= s->layout.nr_blocks)
		return gw_fail(s, "postcopy", err, false, "PAGES for block %u of %u", ph->block, s->layout.nr_blocks);
	for (uint32_t i = 0; i < ph->nr_entries; i++) {
		uint64_t e = gw_le64_get((const uint8_t *)&r->in->entries[i]);

		if (gw_page_entry_page(e) >= s->layout.blocks[ph->block].nr_pages)
			return gw_fail(s, "postcopy", err, false, "page %llu outside block %u (%llu pages)",
				       (unsigned long long)gw_page_entry_page(e), ph->block,
				       (unsigned long long)s->layout.blocks[ph->block].nr_pages);
		if (gw_page_entry_kind(e) == GW_PAGE_XBZRLE)
			return gw_fail(s, "postcopy", err, false, "XBZRLE entry after the postcopy switch");
	}
	return gw_fail(s, "postcopy", err, false, "malformed PAGES entries");
}

/*
 * One PAGES frame after the switch: checked, received whole, CRC, then
 * placed. A PAGE_CRC frame's CRC covers all but the data area, whose pages
 * are checked one by one: after the switch the source's guest is paused,
 * nothing is sent from live memory and no PAGES_VOID may follow, so a page
 * that fails is corruption.
 */
static int recv_pages(struct dst_recv *r, const struct gw_frame_hdr *h, uint32_t *crc)
{
	struct gw_session *s = r->pc->s;
	uint8_t phbuf[GW_PAGES_HDR_BYTES];
	struct iovec iov[2] = { { phbuf, sizeof(phbuf) } };
	struct gw_msg_pages_hdr ph;
	struct gw_pages_plan plan;
	const uint8_t *raw;
	bool page_crc;
	int ret, n;

	if (h->len < GW_PAGES_HDR_BYTES)
		return gw_fail(s, "postcopy", -EPROTO, false, "PAGES frame of %u bytes", h->len);
	ret = gw_conn_recv_iov(r->conn, iov, 1, crc);
	if (ret)
		return ret;
	if (gw_msg_pages_hdr_decode(phbuf, h->len, &ph))
		return gw_fail(s, "postcopy", -EPROTO, false, "malformed PAGES sub-header");
	page_crc = ph.flags & GW_PAGES_F_PAGE_CRC;
	if (ph.flags & GW_PAGES_F_SETTLE_NEXT)
		return gw_fail(s, "postcopy", -EPROTO, false, "PAGES frame sent from live memory after the switch");
	iov[0] = (struct iovec){ r->in->entries, (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES };
	iov[1] = (struct iovec){ r->in->crcs, gw_pages_crc_bytes(&ph) };
	ret = gw_conn_recv_iov(r->conn, iov, 2, crc);
	if (ret)
		return ret;
	if (page_crc && gw_conn_recv_check(h, *crc))
		return gw_fail(s, "postcopy", -EBADMSG, false, "checksum mismatch on a postcopy PAGES frame");
	ret = gw_pages_in_check(r->in, &s->layout, &ph, &plan);
	if (ret)
		return refuse_entries(r, &ph, ret);
	ret = frame_allowed(r, &plan);
	if (ret)
		return ret;
	iov[0] = (struct iovec){ r->in->data, plan.ph.data_bytes };	/* never straight into RAM */
	ret = gw_conn_recv_iov(r->conn, iov, 1, page_crc ? NULL : crc);
	if (ret)
		return ret;
	if (!page_crc && gw_conn_recv_check(h, *crc))
		return gw_fail(s, "postcopy", -EBADMSG, false, "checksum mismatch on a postcopy PAGES frame");
	plan.direct = false;
	ret = gw_pages_in_decompress(r->in, &plan, &raw);
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "cannot decompress a postcopy PAGES frame");
	ret = gw_pages_in_verify(r->in, &plan, raw);
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "PAGES data does not match its entries");
	if (plan.nr_bad)
		return gw_fail(s, "postcopy", -EBADMSG, false, "%u page(s) of a postcopy PAGES frame for block %u "
			       "fail their CRC", plan.nr_bad, plan.ph.block);
	ret = frame_consume(r, &plan);
	if (ret)
		return ret;
	n = gw_pages_in_plan_writes(r->in, &plan, raw);
	if (n < 0)
		return gw_fail(s, "postcopy", n, false, "PAGES data does not match its entries");
	return place_writes(r, plan.ph.block, r->in->writes, n);
}

static void *recv_main(void *arg)
{
	struct dst_recv *r = arg;
	struct gw_pc_dst *pc = r->pc;
	struct gw_session *s = pc->s;

	gw_log_set_side(s->side);
	if (r->preempt)
		gw_thread_critical(s, "preempt-receiver");
	while (!gw_failed(s)) {
		struct gw_frame_hdr h;
		uint32_t crc;
		int ret = gw_conn_recv_hdr(r->conn, &h, &crc);

		if (!ret && h.type == GW_MSG_PAGES) {
			ret = recv_pages(r, &h, &crc);
		} else if (!ret && h.type == GW_MSG_ERROR) {
			uint8_t buf[8 + GW_WIRE_MAX_REASON];
			struct iovec iov = { buf, h.len };
			union gw_msg m;

			ret = gw_conn_recv_iov(r->conn, &iov, 1, &crc);
			if (!ret)
				ret = gw_conn_recv_check(&h, crc);
			if (!ret && !gw_msg_decode(GW_MSG_ERROR, buf, h.len, &m, NULL, 0))
				gw_fail_from_peer(s, "postcopy", &m.error);
		} else if (!ret) {
			ret = gw_fail(s, "postcopy", -EPROTO, false, "unexpected %s on a postcopy %s connection",
				      gw_frame_type_name(h.type), r->preempt ? "preempt" : "data");
		}
		/* Every page here: the source closing a data connection is its business. */
		if (ret && !__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE))
			break;
		if (ret && !gw_failed(s))
			gw_fail(s, "postcopy", ret, false, "%s connection %u: %s", r->preempt ? "preempt" : "data",
				r->index, gw_conn_err_text(ret, "source"));
	}
	pthread_mutex_lock(&pc->lock);
	gw_page_digest_merge(&pc->sum, &r->sum);
	memset(&r->sum, 0, sizeof(r->sum));
	pthread_mutex_unlock(&pc->lock);
	return NULL;
}

static int start_receivers(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;

	for (unsigned i = 0; i <= s->nr_channels; i++) {
		struct dst_recv *r = &pc->recv[i];
		bool pre = i == s->nr_channels;

		*r = (struct dst_recv){ .pc = pc, .conn = pre ? &s->preempt : &s->chans[i].conn,
					.in = pre ? &pc->preempt_in : &s->chans[i].in, .preempt = pre, .index = i };
		gw_conn_set_recv_timeout(r->conn, 0);	/* liveness: control pings */
		if (pthread_create(&r->thread, NULL, recv_main, r))
			return gw_fail(s, "postcopy", -EAGAIN, false, "postcopy receiver thread");
		r->started = true;
	}
	return 0;
}

static void join_receivers(struct gw_pc_dst *pc)
{
	for (unsigned i = 0; i < MAX_RECV; i++)
		if (pc->recv[i].started) {
			pthread_join(pc->recv[i].thread, NULL);
			pc->recv[i].started = false;
		}
}

/* ---- the fault handler ---- */

static int vcpu_of(struct gw_pc_dst *pc, pid_t tid)
{
	struct gw_session *s = pc->s;
	int v;

	if (!tid || !s->ops->vcpu_of_thread)
		return -1;
	for (unsigned i = 0; i < pc->nr_tids; i++)
		if (pc->tids[i].tid == tid)
			return pc->tids[i].vcpu;
	v = s->ops->vcpu_of_thread(s->opaque, tid);
	if (v >= pc->nr_vcpus)
		v = -1;
	if (pc->nr_tids < sizeof(pc->tids) / sizeof(pc->tids[0]))
		pc->tids[pc->nr_tids++] = (typeof(pc->tids[0])){ tid, v };
	return v;
}

/*
 * A trusted page about to be mapped: settled once, under its stripe lock;
 * when verifying it enters the digest as it is, before the guest can write
 * it (the mapper and the sweep take the same lock).
 */
static void settle_trusted(struct gw_pc_dst *pc, unsigned block, uint64_t page, struct gw_page_digest *sum)
{
	struct gw_dst_block *db = &pc->s->dblk[block];
	uint8_t buf[PAGE];

	if (gw_bitmap_test_atomic(&pc->settled[block], page))
		return;
	pthread_mutex_lock(stripe(pc, page));
	if (!gw_bitmap_test_atomic(&pc->settled[block], page)) {
		/* Pages precopy never wrote are still the zero they started as. */
		if (pc->verify && gw_bitmap_test_atomic(&db->written, page) &&
		    !gw_pread_all(db->fd, buf, PAGE, (off_t)(db->fd_offset_bytes + page * PAGE)))
			gw_page_digest_add(sum, block, page, buf);
		gw_bitmap_set_atomic(&pc->settled[block], page);
	}
	pthread_mutex_unlock(stripe(pc, page));
}

/* Send the gathered requests (req_lock held). */
static void flush_requests(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;

	for (unsigned b = 0; b < s->vm.nr_blocks; b++) {
		struct req_batch *q = &pc->req[b];
		struct gw_msg_pc_req m = { .block = b, .count = q->count, .pages = q->pages };
		int ret;

		if (!q->count)
			continue;
		q->count = 0;
		if (!pc->link_up)
			continue;	/* kept in requested: sent again by the recovery */
		ret = gw_conn_send_msg(&s->preempt, GW_MSG_PC_REQ, &m);
		if (ret) {
			gw_fail(s, "postcopy", ret, false, "sending a page request: %s", strerror(-ret));
			return;
		}
		__atomic_fetch_add(&pc->requests, m.count, __ATOMIC_RELAXED);
	}
}

/* One fault: map it at once if its page is right here, else wait and ask (once). */
static void on_fault(struct gw_pc_dst *pc, const struct gw_uffd_fault *f)
{
	struct gw_session *s = pc->s;
	uint64_t t = gw_now_ns();
	int vcpu = vcpu_of(pc, f->tid);
	struct req_batch *q;
	int ret;

	if (!gw_bitmap_test(&pc->untrusted[f->block], f->page) ||
	    gw_bitmap_test_atomic(&pc->received[f->block], f->page)) {
		if (!gw_bitmap_test(&pc->untrusted[f->block], f->page) && s->dblk[f->block].fd >= 0)
			settle_trusted(pc, f->block, f->page, &pc->handler_sum);
		ret = gw_uffd_post_resolve(pc->uffd, f->block, f->page, f->minor);
		if (ret)
			gw_fail(s, "postcopy", ret, false, "mapping page %llu of block %u: %s",
				(unsigned long long)f->page, f->block, strerror(-ret));
		gw_pc_faults_local(&pc->faults, vcpu, t, gw_now_ns());
		return;
	}
	gw_pc_faults_wait(&pc->faults, vcpu, f->block, f->page, t);
	/* Placed meanwhile (its placement did not see this waiter): done now. */
	if (gw_bitmap_test_atomic(&pc->received[f->block], f->page)) {
		gw_pc_faults_placed(&pc->faults, f->block, f->page, 1, gw_now_ns());
		(void)gw_uffd_post_wake(pc->uffd, f->block, f->page);
		return;
	}
	if (gw_bitmap_test_and_set_atomic(&pc->requested[f->block], f->page))
		return;		/* asked already: its answer wakes this one too */
	q = &pc->req[f->block];
	q->pages[q->count++] = f->page;
	if (q->count == GW_WIRE_MAX_BATCH_PAGES) {
		pthread_mutex_lock(&pc->req_lock);
		flush_requests(pc);
		pthread_mutex_unlock(&pc->req_lock);
	}
}

/* Periodic duties: statistics, and a request unanswered past the I/O timeout means a dead link. */
static void tick(struct gw_pc_dst *pc, uint64_t *last_stats_ns)
{
	struct gw_session *s = pc->s;
	uint64_t now = gw_now_ns(), timeout_ns = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS) * 1000000ull;
	uint64_t waited = gw_pc_faults_oldest_ns(&pc->faults, now);
	bool up;

	pthread_mutex_lock(&pc->req_lock);
	up = pc->link_up;
	if (up && waited > now - pc->t_link_up_ns)
		waited = now - pc->t_link_up_ns;	/* waits from before a recovery count from it */
	pthread_mutex_unlock(&pc->req_lock);
	if (up && waited > timeout_ns && !gw_failed(s))
		gw_fail(s, "postcopy", -ETIMEDOUT, false, "a page request unanswered for %llu ms",
			(unsigned long long)(waited / 1000000));
	if (now - *last_stats_ns < STATS_MS * 1000000ull)
		return;
	*last_stats_ns = now;
	publish(pc);
	if (up && !gw_failed(s) && __atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE)) {
		struct gw_msg_pc_stats m;

		figures(pc, &m);
		if (gw_conn_send_msg(&s->ctl, GW_MSG_PC_STATS, &m))
			gw_fail(s, "postcopy", -EPIPE, false, "sending postcopy statistics");
	}
}

/* The fault handler: lives from PC_PREPARE to the end, across recoveries. */
static void *handler_main(void *arg)
{
	struct gw_pc_dst *pc = arg;
	struct gw_session *s = pc->s;
	struct pollfd pfd[2] = { { gw_uffd_post_fd(pc->uffd), POLLIN, 0 }, { pc->stop_fd, POLLIN, 0 } };
	struct gw_uffd_fault *f = malloc(FAULTS_PER_READ * sizeof(*f));
	uint64_t last_stats_ns = 0;

	gw_log_set_side(s->side);
	gw_thread_critical(s, "fault-handler");
	while (f && !__atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE)) {
		int n;

		if (poll(pfd, 2, TICK_MS) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		n = gw_uffd_post_read(pc->uffd, f, FAULTS_PER_READ);
		for (int i = 0; i < n; i++)
			on_fault(pc, &f[i]);
		if (n > 0) {
			pthread_mutex_lock(&pc->req_lock);
			flush_requests(pc);
			pthread_mutex_unlock(&pc->req_lock);
		}
		if (gw_pc_state(s) == GW_PC_ACTIVE)
			tick(pc, &last_stats_ns);
	}
	free(f);
	return NULL;
}

static void stop_handler(struct gw_pc_dst *pc)
{
	uint64_t one = 1;

	if (!pc->handler_started)
		return;
	if (write(pc->stop_fd, &one, sizeof(one)) < 0)
		pthread_cancel(pc->handler);	/* cannot happen with an eventfd */
	pthread_join(pc->handler, NULL);
	pc->handler_started = false;
}

/* ---- the mapper: trusted pages mapped in bulk after resume ---- */

/*
 * Every first touch of a page faults under postcopy, and a fault resolved by
 * the handler costs a round trip through user space (tens of microseconds
 * here). The pages precopy wrote and the source did not re-dirty are right
 * in the page cache: this thread maps them in runs right after resume (one
 * UFFDIO_CONTINUE per run), hashing them first when verifying, so the guest
 * seldom faults on them. Normal priority: it yields to the guest.
 */
static void map_window(struct gw_pc_dst *pc, unsigned b, uint64_t w, uint8_t *buf, struct gw_page_digest *sum)
{
	struct gw_dst_block *db = &pc->s->dblk[b];
	uint64_t first = w * 64, n = db->nr_pages - first < 64 ? db->nr_pages - first : 64, todo;

	pthread_mutex_lock(stripe(pc, first));
	todo = __atomic_load_n(&db->written.words[w], __ATOMIC_RELAXED) & ~pc->untrusted[b].words[w] &
	       ~__atomic_load_n(&pc->settled[b].words[w], __ATOMIC_RELAXED);
	if (n < 64)
		todo &= (1ull << n) - 1;
	if (todo && pc->verify &&
	    gw_pread_all(db->fd, buf, n * PAGE, (off_t)(db->fd_offset_bytes + first * PAGE)))
		todo = 0;	/* left to the faults */
	for (uint64_t k = 0; k < 64 && (todo >> k);) {	/* k < 64 first: a shift by 64 is undefined */
		uint64_t run;

		if (!(todo >> k & 1)) {
			k++;
			continue;
		}
		for (run = 0; k + run < 64 && (todo >> (k + run) & 1); run++) {
			if (pc->verify)
				gw_page_digest_add(sum, b, first + k + run, buf + (k + run) * PAGE);
			gw_bitmap_set_atomic(&pc->settled[b], first + k + run);
		}
		(void)gw_uffd_post_map_cached(pc->uffd, b, first + k, run);	/* failures: faults map them */
		k += run;
	}
	pthread_mutex_unlock(stripe(pc, first));
}

static void *mapper_main(void *arg)
{
	struct gw_pc_dst *pc = arg;
	struct gw_session *s = pc->s;
	struct gw_page_digest sum = { 0 };
	uint8_t *buf = malloc(64 * PAGE);
	uint64_t t0 = gw_now_ns(), pages = 0;

	gw_log_set_side(s->side);
	for (unsigned b = 0; buf && b < s->vm.nr_blocks; b++) {
		if (s->dblk[b].fd < 0)
			continue;	/* anonymous: trusted pages stayed mapped */
		for (uint64_t w = 0; w < gw_bitmap_words(&s->dblk[b].written) &&
		     !__atomic_load_n(&pc->mapper_stop, __ATOMIC_ACQUIRE) &&
		     !__atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE); w++) {
			if (!s->dblk[b].written.words[w])
				continue;
			map_window(pc, b, w, buf, &sum);
			pages += (uint64_t)__builtin_popcountll(s->dblk[b].written.words[w] & ~pc->untrusted[b].words[w]);
		}
	}
	free(buf);
	pthread_mutex_lock(&pc->lock);
	gw_page_digest_merge(&pc->sum, &sum);
	pthread_mutex_unlock(&pc->lock);
	gw_log(GW_LOG_INFO, "mem", "postcopy_mapped", "pages=%llu duration_us=%llu", (unsigned long long)pages,
	       (unsigned long long)((gw_now_ns() - t0) / 1000));
	return NULL;
}

static void stop_mapper(struct gw_pc_dst *pc)
{
	if (!pc->mapper_started)
		return;
	__atomic_store_n(&pc->mapper_stop, true, __ATOMIC_RELEASE);
	pthread_join(pc->mapper, NULL);
	pc->mapper_started = false;
}

/* ---- admission of connections (PC_PREPARE, recovery) ---- */

/*
 * The next connection the acceptor (admit.h) admitted whose first frame is
 * @type (CHAN_HELLO or PC_RECOVER), within @timeout_ms: the acceptor
 * checked its migration id and (TLS) identity, and refused strangers on
 * their own connections. 0 with *@out, -ETIMEDOUT, -ECANCELED (the session
 * ends), or -EINVAL (nothing listens).
 */
static int admit(struct gw_session *s, uint16_t type, uint64_t timeout_ms, struct gw_admitted *out)
{
	return s->adm ? gw_admit_take(s->adm, type, gw_now_ns() + timeout_ms * 1000000ull, out) : -EINVAL;
}

/* Take over an admitted connection as @conn; frame 0 was its first frame. */
static void adopt(struct gw_session *s, struct gw_conn *conn, struct gw_admitted *c)
{
	gw_conn_adopt(conn, c->fd, c->sock, c->tls, 1);
	__atomic_store_n(&conn->bytes_recv, GW_WIRE_HDR_BYTES + (uint64_t)c->len, __ATOMIC_RELAXED);
	c->fd = -1;
	c->tls = NULL;
	gw_admitted_release(c);
	gw_conn_set_timeout(conn, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
}

/*
 * Data connections 0..nr_channels-1 and the preempt one (index
 * nr_channels) as @want_mask says, each once, within the I/O timeout.
 * 0 or -errno with @why.
 */
static int admit_data(struct gw_session *s, uint64_t want_mask, char *why, size_t why_len)
{
	uint64_t timeout_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS), t_end = gw_now_ns() + timeout_ms * 1000000ull;

	while (want_mask) {
		struct gw_msg_chan_hello m = { 0 };
		struct gw_msg_chan_ack ack;
		struct gw_admitted c;
		struct gw_conn *conn;
		uint64_t now = gw_now_ns();
		int ret;

		if (now >= t_end) {
			snprintf(why, why_len, "data connections missing after the I/O timeout");
			return -ETIMEDOUT;
		}
		ret = admit(s, GW_MSG_CHAN_HELLO, (t_end - now) / 1000000 + 1, &c);
		if (ret) {
			snprintf(why, why_len, "waiting for data connections: %s", strerror(-ret));
			return ret;
		}
		if (gw_msg_decode(GW_MSG_CHAN_HELLO, c.payload, c.len, &m, NULL, 0) ||
		    m.index > s->nr_channels || !(want_mask >> m.index & 1)) {
			gw_admitted_refuse(&c, -EPROTO, "connection index invalid or repeated");
			snprintf(why, why_len, "connection index %u invalid or repeated", m.index);
			return -EPROTO;
		}
		conn = m.index == s->nr_channels ? &s->preempt : &s->chans[m.index].conn;
		adopt(s, conn, &c);
		ack.index = m.index;
		ret = gw_conn_send_msg(conn, GW_MSG_CHAN_ACK, &ack);
		if (ret) {
			snprintf(why, why_len, "acknowledging connection %u: %s", ack.index, strerror(-ret));
			return ret;
		}
		want_mask &= ~(1ull << m.index);
	}
	return 0;
}

/* The listener of the migration or of a recovery is done with: a recovery may listen on the same address. */
static void stop_listening(struct gw_session *s)
{
	gw_session_stop_admit(s);
	pthread_mutex_lock(&s->lock);
	if (s->listen_fd >= 0) {
		s->url.ops->sock->close(s->listen_fd);
		s->url.ops->unlisten(s->url.addr);
	}
	s->listen_fd = -1;
	s->pc_recover_listening = false;
	pthread_mutex_unlock(&s->lock);
}

/* ---- PC_PREPARE .. resume ---- */

static int pc_alloc(struct gw_session *s)
{
	struct gw_pc_dst *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return -ENOMEM;
	pc->s = s;
	pc->stop_fd = -1;
	s->pcd = pc;
	pthread_mutex_init(&pc->lock, NULL);
	pthread_mutex_init(&pc->req_lock, NULL);
	for (unsigned i = 0; i < NR_STRIPES; i++)
		pthread_mutex_init(&pc->stripes[i], NULL);
	gw_pc_faults_init(&pc->faults, 0);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		uint64_t n = s->dblk[i].nr_pages;

		if (gw_bitmap_init(&pc->untrusted[i], n) || gw_bitmap_init(&pc->claimed[i], n) ||
		    gw_bitmap_init(&pc->received[i], n) || gw_bitmap_init(&pc->requested[i], n) ||
		    gw_bitmap_init(&pc->pushed[i], n) || gw_bitmap_init(&pc->settled[i], n))
			return -ENOMEM;
	}
	if (gw_pages_in_init(&pc->preempt_in))
		return -ENOMEM;
	pc->preempt_in_ready = true;
	pc->stop_fd = eventfd(0, EFD_CLOEXEC);
	return pc->stop_fd < 0 ? -errno : 0;
}

/*
 * The switch needs every page of fd-backed RAM unmapped (so that every
 * first touch faults) and unmapping a mapped GiB costs about 0.1 s here:
 * when postcopy is allowed the populate thread does it during precopy, in
 * 64 MiB steps, so that PC_PREPARE finds nothing left to unmap. Precopy
 * writes with pwrite and never maps pages again.
 */
#define UNMAP_STEP_BYTES (64ull << 20)
void dst_pc_unmap_ahead(struct gw_session *s)
{
	uint64_t t0 = gw_now_ns();

	for (unsigned i = 0; i < s->vm.nr_blocks && !gw_failed(s); i++) {
		const struct gw_ram_block *b = &s->vm.blocks[i];

		/* Stops at the switch: PC_PREPARE unmaps what is left (a late step costs a minor fault). */
		for (uint64_t off = 0; b->fd >= 0 && off < b->size_bytes && !gw_failed(s) &&
		     gw_pc_state(s) == GW_PC_NONE; off += UNMAP_STEP_BYTES)
			(void)madvise((uint8_t *)b->host + off,
				      b->size_bytes - off < UNMAP_STEP_BYTES ? b->size_bytes - off : UNMAP_STEP_BYTES,
				      MADV_DONTNEED);
	}
	gw_log(GW_LOG_INFO, "mem", "postcopy_unmapped_ahead", "duration_us=%llu",
	       (unsigned long long)((gw_now_ns() - t0) / 1000));
}

/* Every data channel ended with CHAN_END: every precopy page is applied. */
static int channels_ended(struct gw_session *s)
{
	int ret;

	gw_channels_join(s);
	ret = gw_failed(s);
	for (unsigned i = 0; !ret && i < s->nr_channels; i++)
		if (!s->chans[i].end_seen)
			return gw_fail(s, "postcopy", -EPROTO, false, "PC_PREPARE but channel %u ended without CHAN_END", i);
	return ret;
}

int dst_pc_prepare(struct gw_session *s)
{
	uint64_t t0 = gw_now_ns(), t_joined, t_registered;
	struct gw_msg_pc_prepared done;
	char why[256] = "";
	int ret;

	if (!(s->hello_flags & GW_HELLO_POSTCOPY) || s->pcd)
		return gw_fail(s, "receive", -EPROTO, false, "PC_PREPARE %s",
			       s->pcd ? "twice" : "without postcopy in HELLO");
	ret = channels_ended(s);
	if (ret)
		return ret;
	t_joined = gw_now_ns();
	ret = pc_alloc(s);
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "no memory for postcopy");
	__atomic_store_n(&s->pc_state, GW_PC_PREPARED, __ATOMIC_RELEASE);
	/* The verification snapshot's userfaultfd gives the RAM up to ours. */
	gw_snapshot_disable(s->snap);
	ret = gw_uffd_post_open(&s->vm, &s->pcd->uffd, &s->pcd->user_only);
	if (ret)
		return gw_fail(s, "postcopy", ret == -EOPNOTSUPP ? -EOPNOTSUPP : ret, false,
			       "cannot put guest RAM under userfaultfd: %s", strerror(-ret));
	t_registered = gw_now_ns();
	if (s->pcd->user_only)
		gw_log(GW_LOG_WARN, "mig", "postcopy_user_faults_only",
		       "reason=\"no CAP_SYS_PTRACE: faults from inside the kernel (KVM) are not trapped\"");
	ret = admit_data(s, 1ull << s->nr_channels, why, sizeof(why));
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "preempt connection: %s", why);
	/* The first listener is done: a recovery may listen on the same address. */
	stop_listening(s);
	if (pthread_create(&s->pcd->handler, NULL, handler_main, s->pcd))
		return gw_fail(s, "postcopy", -EAGAIN, false, "postcopy fault handler thread");
	s->pcd->handler_started = true;
	ret = start_receivers(s->pcd);
	if (ret)
		return ret;
	done.prepare_ns = gw_now_ns() - t0;
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_PREPARED, &done);
	if (ret)
		return gw_fail(s, "postcopy", ret, false, "sending PC_PREPARED: %s", strerror(-ret));
	gw_log(GW_LOG_INFO, "mig", "postcopy_prepared", "prepare_us=%llu channels_us=%llu register_us=%llu",
	       (unsigned long long)(done.prepare_ns / 1000), (unsigned long long)((t_joined - t0) / 1000),
	       (unsigned long long)((t_registered - t_joined) / 1000));
	return 0;
}

int dst_pc_dirty(struct gw_session *s, const struct gw_msg_pc_map *m)
{
	struct gw_pc_dst *pc = s->pcd;
	struct gw_bitmap *u;
	uint64_t words;

	if (!pc || pc->complete || gw_pc_state(s) != GW_PC_PREPARED)
		return gw_fail(s, "receive", -EPROTO, false, "PC_DIRTY outside the postcopy switch");
	if (m->block >= s->vm.nr_blocks)
		return gw_fail(s, "receive", -EPROTO, false, "PC_DIRTY for block %u of %u", m->block, s->vm.nr_blocks);
	u = &pc->untrusted[m->block];
	words = gw_bitmap_words(u);
	if (m->first_page / 64 + m->nr_words > words)
		return gw_fail(s, "receive", -ERANGE, false, "PC_DIRTY beyond block %u", m->block);
	for (uint32_t i = 0; i < m->nr_words; i++) {
		uint64_t w = gw_msg_pc_map_word(m, i), at = m->first_page / 64 + i;

		if (at == words - 1 && u->nr_bits % 64 && (w >> (u->nr_bits % 64)))
			return gw_fail(s, "receive", -ERANGE, false, "PC_DIRTY names pages beyond block %u", m->block);
		u->words[at] |= w;
	}
	return 0;
}

int dst_pc_complete(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->pcd;

	if (!pc || pc->complete)
		return gw_fail(s, "final", -EPROTO, false, "COMPLETE for postcopy without PC_PREPARE");
	pc->verify = (s->hello_flags & GW_HELLO_VERIFY) != 0;
	for (unsigned i = 0; i < s->vm.nr_blocks; i++) {
		struct gw_bitmap *u = &pc->untrusted[i];
		const struct gw_dst_block *db = &s->dblk[i];

		/* A page that failed its CRC in precopy is trusted only if sent again since. */
		for (uint64_t w = 0; __atomic_load_n(&db->nr_stale, __ATOMIC_RELAXED) &&
		     w < gw_bitmap_words(u); w++) {
			uint64_t bad = __atomic_load_n(&db->stale.words[w], __ATOMIC_RELAXED) & ~u->words[w];

			if (bad)
				return gw_fail(s, "final", -EBADMSG, false, "page %llu of block %u failed its CRC "
					       "and is not in the map of pages to fetch",
					       (unsigned long long)(w * 64 + (unsigned)__builtin_ctzll(bad)), i);
		}
		pc->pages += gw_bitmap_weight(u);
		if (s->dblk[i].fd >= 0)
			continue;
		/* Anonymous RAM: the stale copies go; the guest waits for the new ones. */
		pc->verify = false;
		for (uint64_t p = gw_bitmap_next_set(u, 0); p < u->nr_bits;) {
			uint64_t end = gw_bitmap_next_clear(u, p);
			int ret = gw_uffd_post_zap(pc->uffd, i, p, end - p);

			if (ret)
				return gw_fail(s, "final", ret, false, "dropping stale pages: %s", strerror(-ret));
			p = gw_bitmap_next_set(u, end);
		}
	}
	__atomic_store_n(&pc->remaining, pc->pages, __ATOMIC_RELEASE);
	pc->complete = true;
	gw_log(GW_LOG_INFO, "mig", "postcopy_map", "pages=%llu verify=%d", (unsigned long long)pc->pages,
	       pc->verify);
	return 0;
}

int dst_pc_go(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->pcd;
	int n = s->vm.nr_vcpus;

	if (s->ops->postcopy_ram)
		n = s->ops->postcopy_ram(s->opaque, false);
	pc->nr_vcpus = n > 0 && n <= GW_PC_MAX_VCPUS ? n : 0;
	gw_pc_faults_destroy(&pc->faults);
	gw_pc_faults_init(&pc->faults, (unsigned)pc->nr_vcpus);
	pthread_mutex_lock(&pc->req_lock);
	pc->link_up = true;
	pc->t_link_up_ns = gw_now_ns();
	pthread_mutex_unlock(&pc->req_lock);
	return 0;
}

void dst_pc_resumed(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->pcd;

	pthread_mutex_lock(&s->lock);
	pc->t_resumed_ns = gw_now_ns();
	s->status = s->stats.status = GW_STATUS_POSTCOPY_ACTIVE;
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
	__atomic_store_n(&s->pc_state, GW_PC_ACTIVE, __ATOMIC_RELEASE);
	gw_log(GW_LOG_INFO, "mig", "postcopy_active", "pages=%llu vcpus=%d", (unsigned long long)pc->pages,
	       pc->nr_vcpus);
	/* Best effort: without it the faults map the same pages, one by one. */
	pc->mapper_started = pthread_create(&pc->mapper, NULL, mapper_main, pc) == 0;
}

/* ---- recovery ---- */

int gw_postcopy_recover(struct gw_session *s, const char *url)
{
	struct gw_admit_config ac = { .side = "dst" };
	struct gw_admit *a;
	struct gw_url u;
	char why[200], bound[GW_URL_MAX];
	int fd, ret = 0;

	if (!s || s->role != GW_ROLE_DEST || !url || gw_url_parse_listen(url, &u, why, sizeof(why)))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (!s->running || (s->status != GW_STATUS_POSTCOPY_PAUSED && s->status != GW_STATUS_POSTCOPY_RECOVER))
		ret = -EINVAL;
	else if (s->pc_recover_listening)
		ret = -EBUSY;
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	if (s->tls_ctx && !u.ops->sock->kernel)
		return -EOPNOTSUPP;	/* TLS on kernel sockets only (session.c: tls_prepare) */
	fd = u.ops->listen(u.addr, bound, sizeof(bound));
	if (fd < 0)
		return fd;
	/*
	 * Its own acceptor, held from the start: only the source that sent
	 * the HELLO (migration id, TLS identity) gets through; anyone else is
	 * refused on their connection and never stalls the recovery.
	 */
	ac.listen_fd = fd;
	ac.sock = u.ops->sock;
	ac.tls = s->tls_ctx;
	ac.opening_ms = (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS);
	ac.recovery = true;
	a = gw_admit_start(&ac);
	if (!a) {
		ret = -errno;
		goto fail;
	}
	gw_admit_hold(a, s->mig_id, s->src_identity, s->src_holder);
	pthread_mutex_lock(&s->lock);
	if (s->pc_recover_listening || s->listen_fd >= 0 || s->adm) {
		ret = -EBUSY;
	} else {
		s->listen_fd = fd;
		s->url = u;
		s->adm = a;
		snprintf(s->bound_url, sizeof(s->bound_url), "%s", bound);
		s->pc_recover_listening = true;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	if (ret) {
		gw_admit_stop(a);
		goto fail;
	}
	gw_log(GW_LOG_INFO, "mig", "postcopy_recover_listen", "url=%s tls=%s", bound,
	       s->tls_ctx ? gw_tls_ctx_mode(s->tls_ctx) : "none");
	return 0;
fail:
	u.ops->sock->close(fd);
	u.ops->unlisten(u.addr);
	return ret;
}

/* The map of pages still missing, then PC_RECOVERED. 0 or -errno. */
static int send_needed(struct gw_session *s, struct gw_pc_dst *pc)
{
	struct gw_msg_pc_recovered done = { 0 };
	struct gw_bitmap need;
	int ret = 0;

	for (unsigned b = 0; !ret && b < s->vm.nr_blocks; b++) {
		uint64_t nw = gw_bitmap_words(&pc->untrusted[b]);

		ret = gw_bitmap_init(&need, pc->untrusted[b].nr_bits);
		if (ret)
			break;
		for (uint64_t w = 0; w < nw; w++)
			need.words[w] = pc->untrusted[b].words[w] &
					~__atomic_load_n(&pc->received[b].words[w], __ATOMIC_RELAXED);
		done.needed_pages += gw_bitmap_weight(&need);
		for (uint64_t w = 0; !ret && w < nw;) {
			struct gw_msg_pc_map m = { .block = b };
			uint64_t end;

			while (w < nw && !need.words[w])
				w++;
			if (w >= nw)
				break;
			end = w + GW_WIRE_MAX_MAP_WORDS < nw ? w + GW_WIRE_MAX_MAP_WORDS : nw;
			m.first_page = w * 64;
			m.nr_words = (uint32_t)(end - w);
			m.words = need.words + w;
			ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_NEEDED, &m);
			w = end;
		}
		gw_bitmap_free(&need);
	}
	if (!done.needed_pages)
		done.flags = GW_PC_RECOVERED_DONE;
	return ret ? ret : gw_conn_send_msg(&s->ctl, GW_MSG_PC_RECOVERED, &done);
}

/* Requests still unanswered go again on the new preempt connection (req_lock held). */
static void resend_requests(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;

	for (unsigned b = 0; b < s->vm.nr_blocks; b++) {
		struct gw_bitmap *rq = &pc->requested[b];

		for (uint64_t p = gw_bitmap_next_set(rq, 0); p < rq->nr_bits; p = gw_bitmap_next_set(rq, p + 1)) {
			struct req_batch *q = &pc->req[b];

			/* A push placed it while the answer was lost: nothing to ask. */
			if (gw_bitmap_test_atomic(&pc->received[b], p)) {
				gw_bitmap_clear_atomic(rq, p);
				continue;
			}
			q->pages[q->count++] = p;
			if (q->count == GW_WIRE_MAX_BATCH_PAGES)
				flush_requests(pc);
		}
	}
	flush_requests(pc);
}

/*
 * One recovery attempt on the listening socket: PC_RECOVER with our id,
 * the map of pages missing, every data connection. 0, -EAGAIN (nobody yet
 * or a stranger: wait on), or -errno with @why (this attempt failed).
 */
static int recover_once(struct gw_session *s, struct gw_pc_dst *pc, char *why, size_t why_len)
{
	struct gw_msg_pc_recover m;
	struct gw_admitted c;
	int ret = admit(s, GW_MSG_PC_RECOVER, TICK_MS * 5, &c);

	if (ret == -ETIMEDOUT)
		return -EAGAIN;
	if (ret) {
		snprintf(why, why_len, "accepting: %s", strerror(-ret));
		return ret;
	}
	ret = gw_msg_decode(GW_MSG_PC_RECOVER, c.payload, c.len, &m, NULL, 0);	/* the acceptor decoded it */
	if (ret) {
		gw_admitted_refuse(&c, ret, "malformed PC_RECOVER");
		return -EAGAIN;
	}
	pthread_mutex_lock(&s->lock);
	s->status = s->stats.status = GW_STATUS_POSTCOPY_RECOVER;
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
	gw_log(GW_LOG_INFO, "mig", "postcopy_recover", "peer=\"%s\" recoveries=%u", c.peer, m.recoveries);
	adopt(s, &s->ctl, &c);	/* PC_RECOVER was frame 0 */
	ret = send_needed(s, pc);
	if (ret) {
		snprintf(why, why_len, "sending the map of missing pages: %s", strerror(-ret));
		return ret;
	}
	return admit_data(s, (2ull << s->nr_channels) - 1, why, why_len);
}

static void close_conns(struct gw_session *s)
{
	gw_conn_close(&s->ctl);
	gw_conn_close(&s->preempt);
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_conn_close(&s->chans[i].conn);
}

/* Paused until a source reconnects. 0 when running again, or the sticky error. */
static int recover(struct gw_session *s, struct gw_pc_dst *pc)
{
	char why[256];
	int ret;

	pthread_mutex_lock(&pc->req_lock);
	pc->link_up = false;
	pthread_mutex_unlock(&pc->req_lock);
	gw_session_shutdown_conns(s);
	join_receivers(pc);
	close_conns(s);
	pthread_mutex_lock(&s->lock);
	pc->t_paused_ns = gw_now_ns();
	s->status = s->stats.status = GW_STATUS_POSTCOPY_PAUSED;
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
	gw_log(GW_LOG_WARN, "mig", "postcopy_paused", "remaining_pages=%llu",
	       (unsigned long long)__atomic_load_n(&pc->remaining, __ATOMIC_RELAXED));
	for (;;) {
		pthread_mutex_lock(&s->lock);
		while (!s->pc_recover_listening && !s->err.code)
			pthread_cond_wait(&s->cond, &s->lock);
		ret = s->err.code;
		pthread_mutex_unlock(&s->lock);
		if (ret)
			return ret;
		why[0] = 0;
		ret = recover_once(s, pc, why, sizeof(why));
		if (!ret)
			break;
		if (ret != -EAGAIN) {
			gw_log(GW_LOG_WARN, "mig", "postcopy_recover_failed", "reason=\"%s\"", why);
			pthread_mutex_lock(&s->lock);
			snprintf(s->stats.postcopy_reason, sizeof(s->stats.postcopy_reason), "%s", why);
			s->status = s->stats.status = GW_STATUS_POSTCOPY_PAUSED;
			pthread_mutex_unlock(&s->lock);
			gw_emit_status(s);
			close_conns(s);
		}
	}
	stop_listening(s);
	pthread_mutex_lock(&s->lock);
	pc->paused_ns += gw_now_ns() - pc->t_paused_ns;
	pc->t_paused_ns = 0;
	pc->recoveries++;
	s->status = s->stats.status = GW_STATUS_POSTCOPY_ACTIVE;
	s->stats.postcopy_reason[0] = 0;
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
	__atomic_store_n(&s->pc_broken, 0, __ATOMIC_RELEASE);
	gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	ret = start_receivers(pc);
	if (ret)
		return ret;
	pthread_mutex_lock(&pc->req_lock);
	/* Up first: flush_requests sends nothing while the link is down. */
	pc->link_up = true;
	pc->t_link_up_ns = gw_now_ns();
	resend_requests(pc);
	pthread_mutex_unlock(&pc->req_lock);
	__atomic_store_n(&pc->done_sent, false, __ATOMIC_RELEASE);
	gw_log(GW_LOG_INFO, "mig", "postcopy_recovered", "recoveries=%u paused_ms=%.3f remaining_pages=%llu",
	       pc->recoveries, pc->paused_ns / 1e6,
	       (unsigned long long)__atomic_load_n(&pc->remaining, __ATOMIC_RELAXED));
	send_done(pc);
	return 0;
}

/* ---- the end ---- */

/*
 * Verification: the pages precopy wrote that nobody touched since enter
 * the digest now (the rest did as they were placed or first touched).
 */
static void sweep(struct gw_session *s, struct gw_pc_dst *pc)
{
	struct gw_page_digest sum = { 0 };
	uint8_t *buf = malloc(64 * PAGE);
	uint64_t t0 = gw_now_ns();
	int ret = buf ? 0 : -ENOMEM;

	for (unsigned b = 0; !ret && b < s->vm.nr_blocks; b++) {
		struct gw_dst_block *db = &s->dblk[b];

		for (uint64_t w = 0; !ret && w < gw_bitmap_words(&db->written); w++) {
			uint64_t todo = db->written.words[w] & ~pc->untrusted[b].words[w] &
					~__atomic_load_n(&pc->settled[b].words[w], __ATOMIC_RELAXED);
			uint64_t first = w * 64, n = db->nr_pages - first < 64 ? db->nr_pages - first : 64;

			if (!todo)
				continue;
			pthread_mutex_lock(stripe(pc, first));
			ret = gw_pread_all(db->fd, buf, n * PAGE, (off_t)(db->fd_offset_bytes + first * PAGE));
			for (uint64_t k = 0; !ret && k < n; k++) {
				if (!(todo >> k & 1) || gw_bitmap_test_atomic(&pc->settled[b], first + k))
					continue;
				gw_page_digest_add(&sum, b, first + k, buf + k * PAGE);
				gw_bitmap_set_atomic(&pc->settled[b], first + k);
			}
			pthread_mutex_unlock(stripe(pc, first));
		}
	}
	free(buf);
	pthread_mutex_lock(&pc->lock);
	gw_page_digest_merge(&sum, &pc->sum);
	gw_page_digest_merge(&sum, &pc->handler_sum);
	pc->digest = (struct gw_digest){ sum.lo, sum.hi };
	pc->digest_err = ret;
	pthread_mutex_unlock(&pc->lock);
	gw_log(GW_LOG_INFO, "mig", "postcopy_digest", "sweep_us=%llu err=%d",
	       (unsigned long long)((gw_now_ns() - t0) / 1000), ret);
}

/* Every page is here: stop trapping, tell the VMM. */
static void finish(struct gw_session *s, struct gw_pc_dst *pc, bool verify)
{
	gw_conn_shutdown(&s->preempt);	/* the receivers wait for nothing more (control stays) */
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_conn_shutdown(&s->chans[i].conn);
	join_receivers(pc);
	stop_mapper(pc);	/* what it did not map, the sweep hashes */
	if (verify && pc->verify)
		sweep(s, pc);	/* the handler still maps (and hashes) first touches */
	stop_handler(pc);
	gw_uffd_post_unregister(pc->uffd);
	__atomic_store_n(&s->pc_state, GW_PC_DONE, __ATOMIC_RELEASE);
	publish(pc);
	if (s->ops->postcopy_ram)
		(void)s->ops->postcopy_ram(s->opaque, true);
}

int dst_pc_run(struct gw_session *s, uint8_t *buf, size_t cap)
{
	struct gw_pc_dst *pc = s->pcd;
	union gw_msg *m = malloc(sizeof(*m));
	int ret = m ? 0 : gw_fail(s, "postcopy", -ENOMEM, false, "no memory");

	/* The source pings every half second: silence past the I/O timeout is a dead link. */
	gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	send_done(pc);	/* nothing was missing */
	while (!ret) {
		char why[160] = "";
		int type = gw_conn_recv_msg(&s->ctl, m, buf, cap, why, sizeof(why));

		if (type < 0) {
			if (!__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE) &&
			    __atomic_load_n(&pc->done_sent, __ATOMIC_ACQUIRE)) {
				/* Every page is here and the source was told: the VM needs nothing more. */
				gw_log(GW_LOG_WARN, "mig", "postcopy_end_lost", "reason=\"%s\"",
				       gw_conn_err_text(type, "source"));
				finish(s, pc, false);
				free(m);
				return GW_PC_UNVERIFIED;
			}
			if (!gw_failed(s))
				gw_fail(s, "postcopy", type, false, "control connection: %s%s%s",
					gw_conn_err_text(type, "source"), why[0] ? ": " : "", why);
			ret = __atomic_load_n(&s->err.code, __ATOMIC_ACQUIRE);
			if (!ret)
				ret = recover(s, pc);
			continue;
		}
		switch (type) {
		case GW_MSG_PING:
			if (gw_conn_send_msg(&s->ctl, GW_MSG_PONG, &m->ping))
				gw_fail(s, "postcopy", -EPIPE, false, "sending PONG");
			break;
		case GW_MSG_PC_END:
			if (__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE))
				ret = gw_fail(s, "postcopy", -EPROTO, false, "PC_END with %llu pages missing",
					      (unsigned long long)__atomic_load_n(&pc->remaining, __ATOMIC_RELAXED));
			else
				goto out;
			break;
		case GW_MSG_ERROR:
			ret = gw_fail_from_peer(s, "postcopy", &m->error);
			break;
		default:
			ret = gw_fail(s, "postcopy", -EPROTO, false, "unexpected %s on control during postcopy",
				      gw_frame_type_name((uint16_t)type));
		}
	}
	free(m);
	return ret;
out:
	free(m);
	finish(s, pc, true);
	return 0;
}

int dst_pc_digest(struct gw_session *s, struct gw_digest *out, uint64_t *faults)
{
	struct gw_pc_dst *pc = s->pcd;
	struct gw_msg_pc_stats f;
	int ret;

	if (!pc->verify)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&pc->lock);
	*out = pc->digest;
	ret = pc->digest_err;
	pthread_mutex_unlock(&pc->lock);
	gw_pc_faults_figures(&pc->faults, gw_now_ns(), &f);
	*faults = f.faults;
	return ret;
}

void dst_pc_release(struct gw_session *s)
{
	struct gw_pc_dst *pc = s->pcd;

	if (!pc)
		return;
	if (gw_pc_state(s) == GW_PC_ACTIVE)
		gw_log(GW_LOG_ERROR, "mig", "postcopy_failed",
		       "vm=lost remaining_pages=%llu reason=\"the guest runs here with pages that will never come\"",
		       (unsigned long long)__atomic_load_n(&pc->remaining, __ATOMIC_RELAXED));
	gw_session_shutdown_conns(s);
	join_receivers(pc);
	stop_mapper(pc);
	stop_handler(pc);
	publish(pc);
	/* Closing the userfaultfd wakes every thread still waiting in a fault. */
	gw_uffd_post_close(pc->uffd);
	if (pc->preempt_in_ready)
		gw_pages_in_release(&pc->preempt_in);
	if (pc->stop_fd >= 0)
		close(pc->stop_fd);
	for (unsigned i = 0; i < GW_MAX_RAM_BLOCKS; i++) {
		gw_bitmap_free(&pc->untrusted[i]);
		gw_bitmap_free(&pc->claimed[i]);
		gw_bitmap_free(&pc->received[i]);
		gw_bitmap_free(&pc->requested[i]);
		gw_bitmap_free(&pc->pushed[i]);
		gw_bitmap_free(&pc->settled[i]);
	}
	gw_pc_faults_destroy(&pc->faults);
	for (unsigned i = 0; i < NR_STRIPES; i++)
		pthread_mutex_destroy(&pc->stripes[i]);
	pthread_mutex_destroy(&pc->lock);
	pthread_mutex_destroy(&pc->req_lock);
	free(pc);
	s->pcd = NULL;
	gw_conn_close(&s->preempt);
}
