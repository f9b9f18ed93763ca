/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the destination: placement and the receivers (dest/pc_int.h).
 * One receiver thread per connection (data channels, preempt) reads PAGES
 * frames, checks them against what was untrusted or requested (hostile
 * input refused with a reason) and places each page once: a claim bit is
 * taken before the page is written, so a late copy is dropped.
 */
#include "dest/pc_int.h"
#include "util/thread_name.h"

/* ---- placement: each page once ---- */

/* Testing: dst-pc-cut:N cuts every connection once N pages were placed. */
static void fault_cut(struct gw_pc_dst *pc, uint64_t placed)
{
	struct gw_session *s = pc->s;

	if (!GW_FAULT_DUE(s, GW_FAULT_DST_PC_CUT, placed) ||
	    __atomic_exchange_n(&pc->cut_fired, true, __ATOMIC_ACQ_REL))
		return;
	gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=dst-pc-cut placed=%llu action=cut",
	       (unsigned long long)placed);
	gw_fail(s, GW_PHASE_POSTCOPY, -ECONNRESET, "fault injection: every connection cut");
}

/*
 * @nr claimed pages from @page of @block placed (@src: their bytes, NULL:
 * zeros). The receiver that places the last page sets r->placed_last: it
 * sends PC_DONE once out of its placement window.
 */
void pcd_placed(struct dst_recv *r, unsigned block, uint64_t page, uint64_t nr, const uint8_t *src)
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
		r->placed_last = true;
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
		return gw_fail(pc->s, GW_PHASE_POSTCOPY, ret == -EEXIST ? -EIO : ret,
			       "placing pages %llu..%llu of block %u: %s", (unsigned long long)page,
			       (unsigned long long)(page + nr - 1), block, strerror(-ret));
	pcd_placed(r, block, page, nr, src);
	return 0;
}

/*
 * The writes of one frame: every page claimed first, so that a copy that
 * comes second (a push after an answer, or the reverse) is dropped.
 * *@in_flight: a page was claimed by another receiver that has not placed
 * it yet.
 */
static int place_writes(struct dst_recv *r, unsigned block, const struct gw_page_write *w, int n,
			bool *in_flight)
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
			if (!gw_bitmap_test_atomic(&pc->received[block], p))
				*in_flight = true;
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

/*
 * Place a checked frame's @n writes. A data connection's receiver does it
 * inside its placement window (dst_recv.placing); the preempt receiver,
 * when a page it answers is in another receiver's window, waits for each
 * window once so that its priority carries the holder through.
 */
static int place_frame(struct dst_recv *r, unsigned block, int n)
{
	struct gw_pc_dst *pc = r->pc;
	bool in_flight = false;
	int ret;

	if (!r->preempt)
		pthread_mutex_lock(&r->placing);
	ret = place_writes(r, block, r->in->writes, n, &in_flight);
	if (!r->preempt)
		pthread_mutex_unlock(&r->placing);
	for (unsigned i = 0; in_flight && i < pc->s->nr_channels; i++) {
		pthread_mutex_lock(&pc->recv[i].placing);
		pthread_mutex_unlock(&pc->recv[i].placing);
	}
	if (r->placed_last) {
		r->placed_last = false;
		pcd_send_done(pc);
	}
	return ret;
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
		return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "XBZRLE entry after the postcopy switch");
	for (uint32_t i = 0; i < plan->ph.nr_entries; i++) {
		uint64_t p = entry_page(r->in, i);

		if (r->preempt && !gw_bitmap_test_atomic(&pc->requested[b], p))
			return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO,
				       "page %llu of block %u on the preempt connection was never requested "
				       "(or answered twice)", (unsigned long long)p, b);
		if (!r->preempt && !gw_bitmap_test(&pc->untrusted[b], p))
			return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO,
				       "pushed page %llu of block %u is not one the destination lacks",
				       (unsigned long long)p, b);
		if (!r->preempt && gw_bitmap_test_atomic(&pc->pushed[b], p))
			return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "page %llu of block %u pushed twice",
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
			return gw_fail(pc->s, GW_PHASE_POSTCOPY, -EPROTO, "page %llu of block %u twice in one frame",
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

	if (ph->block >= s->layout->nr_blocks)
		return gw_fail(s, GW_PHASE_POSTCOPY, err, "PAGES for block %u of %u", ph->block, s->layout->nr_blocks);
	for (uint32_t i = 0; i < ph->nr_entries; i++) {
		uint64_t e = gw_le64_get((const uint8_t *)&r->in->entries[i]);

		if (gw_page_entry_page(e) >= s->layout->blocks[ph->block].nr_pages)
			return gw_fail(s, GW_PHASE_POSTCOPY, err, "page %llu outside block %u (%llu pages)",
				       (unsigned long long)gw_page_entry_page(e), ph->block,
				       (unsigned long long)s->layout->blocks[ph->block].nr_pages);
		if (gw_page_entry_kind(e) == GW_PAGE_XBZRLE)
			return gw_fail(s, GW_PHASE_POSTCOPY, err, "XBZRLE entry after the postcopy switch");
	}
	return gw_fail(s, GW_PHASE_POSTCOPY, err, "malformed PAGES entries");
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
		return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "PAGES frame of %u bytes", h->len);
	ret = gw_conn_recv_iov(r->conn, iov, 1, crc);
	if (ret)
		return ret;
	if (gw_msg_pages_hdr_decode(phbuf, h->len, &ph))
		return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "malformed PAGES sub-header");
	page_crc = ph.flags & GW_PAGES_F_PAGE_CRC;
	if (ph.flags & GW_PAGES_F_SETTLE_NEXT)
		return gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "PAGES frame sent from live memory after the switch");
	iov[0] = (struct iovec){ r->in->entries, (size_t)ph.nr_entries * GW_PAGES_ENTRY_BYTES };
	iov[1] = (struct iovec){ r->in->crcs, gw_pages_crc_bytes(&ph) };
	ret = gw_conn_recv_iov(r->conn, iov, 2, crc);
	if (ret)
		return ret;
	if (page_crc && gw_conn_recv_check(h, *crc))
		return gw_fail(s, GW_PHASE_POSTCOPY, -EBADMSG, "checksum mismatch on a postcopy PAGES frame");
	ret = gw_pages_in_check(r->in, s->layout, &ph, &plan);
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
		return gw_fail(s, GW_PHASE_POSTCOPY, -EBADMSG, "checksum mismatch on a postcopy PAGES frame");
	plan.direct = false;
	ret = gw_pages_in_decompress(r->in, &plan, &raw);
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "cannot decompress a postcopy PAGES frame");
	ret = gw_pages_in_verify(r->in, &plan, raw);
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "PAGES data does not match its entries");
	if (plan.nr_bad)
		return gw_fail(s, GW_PHASE_POSTCOPY, -EBADMSG, "%u page(s) of a postcopy PAGES frame for block %u "
			       "fail their CRC", plan.nr_bad, plan.ph.block);
	ret = frame_consume(r, &plan);
	if (ret)
		return ret;
	n = gw_pages_in_plan_writes(r->in, &plan, raw);
	if (n < 0)
		return gw_fail(s, GW_PHASE_POSTCOPY, n, "PAGES data does not match its entries");
	return place_frame(r, plan.ph.block, n);
}

static void *recv_main(void *arg)
{
	struct dst_recv *r = arg;
	struct gw_pc_dst *pc = r->pc;
	struct gw_session *s = pc->s;

	gw_log_set_side(s->side);
	if (r->preempt)
		gw_thread_critical(s, "preempt-receiver");
	else
		gw_thread_background(s, "postcopy-receiver");
	pcd_thread_up(pc);
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
				gw_fail_from_peer(s, GW_PHASE_POSTCOPY, &m.error);
		} else if (!ret) {
			ret = gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "unexpected %s on a postcopy %s connection",
				      gw_frame_type_name(h.type), r->preempt ? "preempt" : "data");
		}
		/* Every page here: the source closing a data connection is its business. */
		if (ret && !__atomic_load_n(&pc->remaining, __ATOMIC_ACQUIRE))
			break;
		if (ret && !gw_failed(s))
			gw_fail(s, GW_PHASE_POSTCOPY, ret, "%s connection %u: %s", r->preempt ? "preempt" : "data",
				r->index, gw_conn_err_text(ret, "source"));
	}
	pthread_mutex_lock(&pc->lock);
	gw_page_digest_merge(&pc->sum, &r->sum);
	memset(&r->sum, 0, sizeof(r->sum));
	pthread_mutex_unlock(&pc->lock);
	return NULL;
}

void pcd_thread_up(struct gw_pc_dst *pc)
{
	pthread_mutex_lock(&pc->s->lock);
	pc->nr_threads_up++;
	pthread_cond_broadcast(&pc->s->cond);
	pthread_mutex_unlock(&pc->s->lock);
}

void pcd_wait_threads_up(struct gw_pc_dst *pc, unsigned nr)
{
	pthread_mutex_lock(&pc->s->lock);
	while (pc->nr_threads_up < nr)
		pthread_cond_wait(&pc->s->cond, &pc->s->lock);
	pthread_mutex_unlock(&pc->s->lock);
}

int pcd_start_receivers(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;

	for (unsigned i = 0; i <= s->nr_channels; i++) {
		struct dst_recv *r = &pc->recv[i];
		bool pre = i == s->nr_channels;

		*r = (struct dst_recv){ .pc = pc, .conn = pre ? &s->preempt : &s->chans[i].conn,
					.in = pre ? &pc->preempt_in : &s->chans[i].rx.in, .preempt = pre, .index = i };
		if (gw_mutex_init_pi(&r->placing))
			return gw_fail(s, GW_PHASE_POSTCOPY, -ENOMEM, "postcopy receiver lock");
		r->placing_init = true;
		gw_conn_set_recv_timeout(r->conn, 0);	/* liveness: control pings */
		if (pthread_create(&r->thread, NULL, recv_main, r))
			return gw_fail(s, GW_PHASE_POSTCOPY, -EAGAIN, "postcopy receiver thread");
		gw_thread_name(r->thread, "gw-pc-rx%u", i);
		r->started = true;
	}
	return 0;
}

void pcd_join_receivers(struct gw_pc_dst *pc)
{
	for (unsigned i = 0; i < MAX_RECV; i++)
		if (pc->recv[i].started) {
			pthread_join(pc->recv[i].thread, NULL);
			pc->recv[i].started = false;
		}
	/* Every receiver gone: none takes another's window any more. */
	for (unsigned i = 0; i < MAX_RECV; i++)
		if (pc->recv[i].placing_init) {
			pthread_mutex_destroy(&pc->recv[i].placing);
			pc->recv[i].placing_init = false;
		}
}
