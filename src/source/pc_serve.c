/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the source: the server thread answers page requests on the
 * preempt connection at once; one pusher thread per data channel sends the
 * remaining pages around recent requests (postcopy/pick.h). Who owns what:
 * pc_int.h.
 */
#include "source/pc_int.h"
#include "util/thread_name.h"

/* ---- the postcopy phase ---- */

static void count_frame(struct gw_session *s, const struct gw_pages_frame *f)
{
	__atomic_fetch_add(&s->ctr_normal_pages, f->nr_normal, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_zero_pages, f->nr_zero, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_raw_bytes, (uint64_t)f->nr_normal * GW_PAGE_BYTES, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->ctr_wire_payload_bytes, f->data_bytes, __ATOMIC_RELAXED);
}

/*
 * Build batch @b with @po and send it on @conn. 0 or the error, recorded
 * unless PC_DONE came (every page is there: the connections are being shut).
 */
static int send_pages(struct gw_session *s, struct gw_pages_out *po, struct gw_conn *conn,
		      const struct gw_batch *b, bool capped, const char *what)
{
	const struct gw_ram_block *blk = &s->vm.blocks[b->block];
	/*
	 * The guest is paused here: pages are stable, so they are copied (never
	 * sent live, no PAGES_VOID after the switch), fd-backed ones by pread.
	 */
	struct gw_ram_view ram = { b->block, blk->host, blk->fd, blk->fd_offset_bytes, NULL, false };
	double link = gw_codec_auto_link_cost(&po->autoc, gw_param(s, GW_PARAM_MAX_BANDWIDTH_BPS),
					      s->nr_channels);
	struct gw_pages_frame f;
	/* One frame at a time on this thread: buffer 0, free again once sent. */
	int ret = gw_pages_out_build(po, 0, &ram, b, gw_round(s), link, &f);

	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "%s: preparing pages: %s", what, strerror(-ret));
	if (!f.iovcnt)
		return 0;
	if (capped)
		gw_ratelimit(s, GW_WIRE_HDR_BYTES + f.payload_bytes);
	ret = gw_conn_send_prefix_crc(conn, GW_MSG_PAGES, f.iov, f.iovcnt, f.crc_iovcnt, NULL, NULL);
	if (ret && __atomic_load_n(&s->src->pcs->done, __ATOMIC_ACQUIRE))
		return ret;
	if (ret)
		return gw_fail(s, GW_PHASE_POSTCOPY, ret, "%s: sending pages: %s", what, strerror(-ret));
	count_frame(s, &f);
	return 0;
}

static unsigned batch_pages(const struct gw_batch *b)
{
	unsigned n = 0;

	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++)
		n += (unsigned)__builtin_popcountll(b->mask[w]);
	return n;
}

/* Testing: src-pc-cut:N cuts every connection once N pages were pushed, as a broken link would. */
static void fault_cut(struct gw_session *s, struct gw_pc_src *pc, uint64_t pushed)
{
	if (!GW_FAULT_DUE(s, GW_FAULT_SRC_PC_CUT, pushed) ||
	    __atomic_exchange_n(&pc->cut_fired, true, __ATOMIC_ACQ_REL))
		return;
	gw_log(GW_LOG_WARN, "fault", "fault_inject", "point=src-pc-cut pushed=%llu action=cut",
	       (unsigned long long)pushed);
	gw_fail(s, GW_PHASE_POSTCOPY, -ECONNRESET, "fault injection: every connection cut");
}

/* One data channel: the next region of the push order, until none is left. */
static void *pusher_main(void *arg)
{
	struct pc_pusher *p = arg;
	struct gw_pc_src *pc = p->pc;
	struct gw_session *s = pc->s;
	struct gw_channel *ch = &s->chans[p->index];

	gw_log_set_side(s->side);
	gw_thread_background(s, "postcopy-pusher");
	while (!gw_failed(s)) {
		struct gw_batch b;
		bool got;
		uint64_t n;

		pthread_mutex_lock(&pc->lock);
		got = gw_pc_pick_next(&pc->pick, &b);
		pthread_mutex_unlock(&pc->lock);
		if (!got)
			break;
		if (send_pages(s, &ch->tx.out, &ch->conn, &b, true, "postcopy push"))
			break;
		n = __atomic_add_fetch(&pc->pushed, batch_pages(&b), __ATOMIC_RELAXED);
		fault_cut(s, pc, n);
	}
	return NULL;
}

/* The pages of one PC_REQ, answered on the preempt connection region by region. */
int pcs_answer(struct gw_session *s, struct gw_pc_src *pc, const struct gw_msg_pc_req *m)
{
	uint32_t region = (uint32_t)gw_param(s, GW_PARAM_BATCH_PAGES);
	uint64_t nr_pages = s->vm.blocks[m->block].size_bytes / GW_PAGE_BYTES;
	struct gw_batch b[2];		/* [0] normal, [1] zeros: never in one frame */
	int ret = 0;

	memset(b, 0, sizeof(b));
	for (uint32_t i = 0; i <= m->count && !ret; i++) {
		uint64_t page = i < m->count ? gw_msg_pc_req_page(m, i) : UINT64_MAX;
		bool zero;

		/* A batch is one region: flush when the next page lies elsewhere. */
		for (int k = 0; k < 2; k++) {
			if (b[k].nr_pages && (page == UINT64_MAX || page / region * region != b[k].first_page)) {
				ret = send_pages(s, &pc->pout, &s->preempt, &b[k], false, "preempt connection");
				if (!ret)
					__atomic_fetch_add(&pc->answered, batch_pages(&b[k]), __ATOMIC_RELAXED);
				memset(&b[k], 0, sizeof(b[k]));
			}
		}
		if (page == UINT64_MAX || ret)
			break;
		pthread_mutex_lock(&pc->lock);
		(void)gw_pc_pick_take(&pc->pick, m->block, page);
		gw_pc_pick_hint(&pc->pick, m->block, page);
		zero = gw_bitmap_test(&pc->zero[m->block], page);
		pthread_mutex_unlock(&pc->lock);
		{
			struct gw_batch *t = &b[zero];
			uint64_t first = page / region * region;

			t->block = m->block;
			t->first_page = first;
			t->nr_pages = (uint32_t)(first + region < nr_pages ? region : nr_pages - first);
			t->discard = zero;
			t->mask[(page - first) / 64] |= 1ull << ((page - first) % 64);
		}
	}
	return ret;
}

/* Page requests, answered at once: the only thread receiving on the preempt connection. */
static void *server_main(void *arg)
{
	struct gw_pc_src *pc = arg;
	struct gw_session *s = pc->s;
	uint8_t *buf = malloc(gw_frame_max_payload(GW_MSG_PC_REQ));
	union gw_msg m;

	gw_log_set_side(s->side);
	gw_thread_critical(s, "postcopy-server");
	while (buf && !gw_failed(s)) {
		char why[160] = "";
		int type = gw_conn_recv_msg(&s->preempt, &m, buf, gw_frame_max_payload(GW_MSG_PC_REQ),
					    why, sizeof(why));

		if (type < 0) {
			if (!__atomic_load_n(&pc->done, __ATOMIC_ACQUIRE) && !gw_failed(s))
				gw_fail(s, GW_PHASE_POSTCOPY, type, "preempt connection: %s%s%s",
					gw_conn_err_text(type, "destination"), why[0] ? ": " : "", why);
			break;
		}
		if (type == GW_MSG_ERROR) {
			gw_fail_from_peer(s, GW_PHASE_POSTCOPY, &m.error);
			break;
		}
		if (type != GW_MSG_PC_REQ) {
			gw_fail(s, GW_PHASE_POSTCOPY, -EPROTO, "unexpected %s on the preempt connection",
				gw_frame_type_name((uint16_t)type));
			break;
		}
		if (m.pc_req.block >= s->vm.nr_blocks) {
			gw_fail(s, GW_PHASE_POSTCOPY, -ERANGE, "page request for block %u of %u",
				m.pc_req.block, s->vm.nr_blocks);
			break;
		}
		for (uint32_t i = 0; i < m.pc_req.count; i++)
			if (gw_msg_pc_req_page(&m.pc_req, i) >= s->vm.blocks[m.pc_req.block].size_bytes / GW_PAGE_BYTES) {
				gw_fail(s, GW_PHASE_POSTCOPY, -ERANGE, "page request for page %llu outside block %u",
					(unsigned long long)gw_msg_pc_req_page(&m.pc_req, i), m.pc_req.block);
				goto out;
			}
		__atomic_fetch_add(&pc->requests, m.pc_req.count, __ATOMIC_RELAXED);
		if (pcs_answer(s, pc, &m.pc_req))
			break;
	}
out:
	free(buf);
	return NULL;
}

int pcs_start_threads(struct gw_session *s, struct gw_pc_src *pc)
{
	if (pthread_create(&pc->server, NULL, server_main, pc))
		return gw_fail(s, GW_PHASE_POSTCOPY, -EAGAIN, "postcopy server thread");
	gw_thread_name(pc->server, "gw-pc-serve");
	pc->server_started = true;
	for (unsigned i = 0; i < s->nr_channels; i++) {
		pc->push[i] = (struct pc_pusher){ .pc = pc, .index = i };
		if (pthread_create(&pc->push[i].thread, NULL, pusher_main, &pc->push[i]))
			return gw_fail(s, GW_PHASE_POSTCOPY, -EAGAIN, "postcopy pusher thread");
		gw_thread_name(pc->push[i].thread, "gw-pc-push%u", i);
		pc->push[i].started = true;
	}
	return 0;
}

void pcs_join_threads(struct gw_session *s, struct gw_pc_src *pc)
{
	for (unsigned i = 0; i < GW_WIRE_MAX_CHANNELS; i++)
		if (pc->push[i].started) {
			pthread_join(pc->push[i].thread, NULL);
			pc->push[i].started = false;
		}
	if (pc->server_started) {
		gw_conn_shutdown(&s->preempt);
		pthread_join(pc->server, NULL);
		pc->server_started = false;
	}
}
