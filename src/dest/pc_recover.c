/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the destination: admission of connections (PC_PREPARE and
 * recovery) and recovery from a broken link (gw_postcopy_recover, then on
 * the migration thread: PC_RECOVER, PC_NEEDED, the connections reopened,
 * outstanding requests sent again). See dest/pc_int.h.
 */
#include "dest/pc_int.h"

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
int pcd_admit_data(struct gw_session *s, uint64_t want_mask, char *why, size_t why_len)
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
void pcd_stop_listening(struct gw_session *s)
{
	gw_session_stop_admit(s);
	pthread_mutex_lock(&s->lock);
	if (s->listen_fd >= 0) {
		s->url.ops->sock->close(s->listen_fd);
		s->url.ops->unlisten(s->url.addr, &s->url.lid);
	}
	s->listen_fd = -1;
	s->dst->pc_recover_listening = false;
	pthread_mutex_unlock(&s->lock);
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
	else if (s->dst->pc_recover_listening)
		ret = -EBUSY;
	pthread_mutex_unlock(&s->lock);
	if (ret)
		return ret;
	if (s->tls_ctx && !u.ops->sock->kernel)
		return -EOPNOTSUPP;	/* TLS on kernel sockets only (session.c: tls_prepare) */
	fd = u.ops->listen(u.addr, bound, sizeof(bound), &u.lid);
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
	gw_admit_hold(a, s->mig_id, s->challenge, s->dst->src_identity, s->dst->src_holder);
	pthread_mutex_lock(&s->lock);
	if (s->dst->pc_recover_listening || s->listen_fd >= 0 || s->adm) {
		ret = -EBUSY;
	} else {
		s->listen_fd = fd;
		s->url = u;
		s->adm = a;
		snprintf(s->bound_url, sizeof(s->bound_url), "%s", bound);
		s->dst->pc_recover_listening = true;
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
	u.ops->unlisten(u.addr, &u.lid);
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

/*
 * Requests still unanswered go again on the new preempt connection, each
 * once (req_lock held, so the fault handler adds none meanwhile). The
 * gathered ones are in the bitmap too: dropped from the batches first. The
 * words are read atomically: the new preempt receiver clears the bits of
 * the answers to what this already sent.
 */
static void resend_requests(struct gw_pc_dst *pc)
{
	struct gw_session *s = pc->s;

	for (unsigned b = 0; b < s->vm.nr_blocks; b++)
		pc->req[b].count = 0;
	for (unsigned b = 0; b < s->vm.nr_blocks; b++) {
		struct gw_bitmap *rq = &pc->requested[b];
		struct req_batch *q = &pc->req[b];

		for (uint64_t w = 0; w < gw_bitmap_words(rq); w++) {
			uint64_t word = __atomic_load_n(&rq->words[w], __ATOMIC_RELAXED);

			for (; word; word &= word - 1) {
				uint64_t p = w * 64 + (uint64_t)__builtin_ctzll(word);

				/* A push placed it while the answer was lost: nothing to ask. */
				if (gw_bitmap_test_atomic(&pc->received[b], p)) {
					gw_bitmap_clear_atomic(rq, p);
					continue;
				}
				q->pages[q->count++] = p;
				if (q->count == GW_WIRE_MAX_BATCH_PAGES)
					pcd_flush_requests(pc);
			}
		}
	}
	pcd_flush_requests(pc);
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
	return pcd_admit_data(s, (2ull << s->nr_channels) - 1, why, why_len);
}

static void close_conns(struct gw_session *s)
{
	gw_conn_close(&s->ctl);
	gw_conn_close(&s->preempt);
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_conn_close(&s->chans[i].conn);
}

/* Paused until a source reconnects. 0 when running again, or the sticky error. */
int pcd_recover(struct gw_session *s, struct gw_pc_dst *pc)
{
	char why[256];
	int ret;

	pthread_mutex_lock(&pc->req_lock);
	pc->link_up = false;
	pthread_mutex_unlock(&pc->req_lock);
	gw_session_shutdown_conns(s);
	pcd_join_receivers(pc);
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
		while (!s->dst->pc_recover_listening && !s->err.code)
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
	pcd_stop_listening(s);
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
	ret = pcd_start_receivers(pc);
	if (ret)
		return ret;
	pthread_mutex_lock(&pc->req_lock);
	/* Up first: pcd_flush_requests sends nothing while the link is down. */
	pc->link_up = true;
	pc->t_link_up_ns = gw_now_ns();
	resend_requests(pc);
	pthread_mutex_unlock(&pc->req_lock);
	__atomic_store_n(&pc->done_sent, false, __ATOMIC_RELEASE);
	gw_log(GW_LOG_INFO, "mig", "postcopy_recovered", "recoveries=%u paused_ms=%.3f remaining_pages=%llu",
	       pc->recoveries, pc->paused_ns / 1e6,
	       (unsigned long long)__atomic_load_n(&pc->remaining, __ATOMIC_RELAXED));
	pcd_send_done(pc);
	return 0;
}
