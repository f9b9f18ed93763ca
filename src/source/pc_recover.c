/* SPDX-License-Identifier: MIT */
/*
 * Postcopy on the source: recovery, on the migration thread. A broken
 * connection stops every thread; postcopy-paused until gw_postcopy_resume
 * names the destination's recovery URL: PC_RECOVER, PC_NEEDED (replaces
 * our map), new data and preempt connections, the threads again.
 */
#include "source/pc_int.h"

/* ---- recovery ---- */

int gw_postcopy_resume(struct gw_session *s, const char *url)
{
	struct gw_url u;
	char why[200];
	int ret = 0;

	if (!s || s->role != GW_ROLE_SOURCE || !url || gw_url_parse(url, &u, why, sizeof(why)))
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (!s->running || s->status != GW_STATUS_POSTCOPY_PAUSED)
		ret = s->status == GW_STATUS_POSTCOPY_RECOVER ? -EBUSY : -EINVAL;
	else if (s->src->pc_resume_url[0])
		ret = -EBUSY;
	else
		snprintf(s->src->pc_resume_url, sizeof(s->src->pc_resume_url), "%s", url);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (!ret)
		gw_log(GW_LOG_INFO, "mig", "postcopy_resume_requested", "url=%s", url);
	return ret;
}

/* The destination's map of missing pages replaces ours. 0 or -errno with @why. */
static int take_needed(struct gw_session *s, struct gw_pc_src *pc, const struct gw_msg_pc_map *m,
		       char *why, size_t why_len)
{
	struct gw_bitmap *t;
	uint64_t words;

	if (m->block >= s->vm.nr_blocks) {
		snprintf(why, why_len, "PC_NEEDED for block %u", m->block);
		return -EPROTO;
	}
	t = &pc->todo[m->block];
	words = gw_bitmap_words(t);
	if (m->first_page / 64 + m->nr_words > words) {
		snprintf(why, why_len, "PC_NEEDED beyond block %u", m->block);
		return -ERANGE;
	}
	for (uint32_t i = 0; i < m->nr_words; i++) {
		uint64_t w = gw_msg_pc_map_word(m, i), at = m->first_page / 64 + i;

		if (at == words - 1 && t->nr_bits % 64 && (w >> (t->nr_bits % 64))) {
			snprintf(why, why_len, "PC_NEEDED names pages beyond block %u", m->block);
			return -ERANGE;
		}
		t->words[at] |= w;
	}
	return 0;
}

/* PC_RECOVER, the map of what is missing, PC_RECOVERED. 0 or -errno with @why. */
static int exchange_maps(struct gw_session *s, struct gw_pc_src *pc, char *why, size_t why_len)
{
	struct gw_msg_pc_recover rec = { .recoveries = pc->recoveries + 1 };
	size_t cap = gw_frame_max_payload(GW_MSG_PC_NEEDED);
	uint8_t *buf = malloc(cap);
	uint64_t needed = 0;
	union gw_msg m;
	int ret;

	if (!buf)
		return -ENOMEM;
	memcpy(rec.id, s->mig_id, sizeof(rec.id));
	ret = gw_conn_send_msg(&s->ctl, GW_MSG_PC_RECOVER, &rec);
	pthread_mutex_lock(&pc->lock);
	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		gw_bitmap_zero(&pc->todo[i]);
	while (!ret) {
		why[0] = 0;
		ret = pcs_recv(&s->ctl, &m, buf, cap, why, why_len);
		if (ret == GW_MSG_PC_NEEDED) {
			ret = take_needed(s, pc, &m.pc_map, why, why_len);
			continue;
		}
		if (ret == GW_MSG_PC_RECOVERED)
			break;
		if (ret >= 0) {
			snprintf(why, why_len, "unexpected %s", gw_frame_type_name((uint16_t)ret));
			ret = -EPROTO;
		}
	}
	for (unsigned i = 0; ret >= 0 && i < s->vm.nr_blocks; i++) {
		gw_bitmap_and(&pc->zero[i], &pc->todo[i]);
		needed += gw_bitmap_weight(&pc->todo[i]);
	}
	if (ret >= 0 && needed != m.pc_recovered.needed_pages) {
		snprintf(why, why_len, "PC_RECOVERED counts %llu missing pages, the map %llu",
			 (unsigned long long)m.pc_recovered.needed_pages, (unsigned long long)needed);
		ret = -EPROTO;
	}
	gw_pc_pick_reset(&pc->pick);
	pthread_mutex_unlock(&pc->lock);
	free(buf);
	if (ret >= 0)
		gw_log(GW_LOG_INFO, "mig", "postcopy_needed", "pages=%llu", (unsigned long long)needed);
	return ret < 0 ? ret : 0;
}

/* Connect everything again at @url_str. 0 or -errno with @why (nothing recorded). */
static int reconnect(struct gw_session *s, struct gw_pc_src *pc, const char *url_str, char *why, size_t why_len)
{
	struct gw_url url;
	char cwhy[200];
	int ret = gw_url_parse(url_str, &url, why, why_len);

	if (ret)
		return ret;
	ret = pcs_connect(s, &url, &s->ctl, cwhy, sizeof(cwhy));
	if (ret) {
		snprintf(why, why_len, "cannot connect to %.100s: %.130s", url_str, cwhy);
		return ret;
	}
	ret = exchange_maps(s, pc, why, why_len);
	for (unsigned i = 0; !ret && i < s->nr_channels; i++)
		ret = pcs_open_data_conn(s, &url, &s->chans[i].conn, i, why, why_len);
	if (!ret)
		ret = pcs_open_data_conn(s, &url, &s->preempt, s->nr_channels, why, why_len);
	if (ret)
		return ret;
	gw_conn_set_recv_timeout(&s->preempt, 0);
	gw_conn_set_recv_timeout(&s->ctl, (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS));
	s->url = url;
	snprintf(s->url_str, sizeof(s->url_str), "%s", url_str);
	return 0;
}

static void close_conns(struct gw_session *s)
{
	gw_conn_close(&s->ctl);
	gw_conn_close(&s->preempt);
	for (unsigned i = 0; i < s->nr_channels; i++)
		gw_conn_close(&s->chans[i].conn);
}

static void set_paused(struct gw_session *s, enum gw_status st, const char *reason)
{
	pthread_mutex_lock(&s->lock);
	s->status = s->stats.status = st;
	if (reason)
		snprintf(s->stats.postcopy_reason, sizeof(s->stats.postcopy_reason), "%s", reason);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	gw_emit_status(s);
}

/*
 * A connection broke: stop everything, wait for the operator's URL, and
 * reconnect, as often as it takes. 0 once running again, or the sticky
 * error (the session is being freed).
 */
int pcs_recover(struct gw_session *s, struct src_ctx *c, struct gw_pc_src *pc)
{
	char url[GW_URL_MAX], why[256];
	int ret;

	gw_session_shutdown_conns(s);
	pcs_join_threads(s, pc);
	src_join_ctl_reader(s);
	close_conns(s);
	pc->t_paused_ns = gw_now_ns();
	set_paused(s, GW_STATUS_POSTCOPY_PAUSED, NULL);
	gw_log(GW_LOG_WARN, "mig", "postcopy_paused", "pages_left=%llu resumed_seen=%d",
	       (unsigned long long)pc->pick.left_pages, pc->resumed_seen);
	for (;;) {
		pthread_mutex_lock(&s->lock);
		s->src->pc_resolvable = !pc->resumed_seen;
		while (!s->src->pc_resume_url[0] && !s->err.code && !s->src->pc_resolve_source)
			pthread_cond_wait(&s->cond, &s->lock);
		snprintf(url, sizeof(url), "%s", s->src->pc_resume_url);
		ret = s->err.code;
		if (!ret && s->src->pc_resolve_source && !s->src->pc_resume_url[0]) {
			/* The operator found the VM not running there: it is ours again. */
			gw_error_set_locked(s, GW_PHASE_HANDOVER, -ECANCELED, "GO sent, RESUMED lost; the "
					    "operator resolved: the VM runs on the source");
			ret = -ECANCELED;
			c->paused = true;
		}
		s->src->pc_resolvable = false;
		if (!ret)
			s->status = s->stats.status = GW_STATUS_POSTCOPY_RECOVER;
		pthread_mutex_unlock(&s->lock);
		gw_emit_status(s);
		if (ret)
			return ret;
		gw_log(GW_LOG_INFO, "mig", "postcopy_recover", "url=%s", url);
		why[0] = 0;
		ret = reconnect(s, pc, url, why, sizeof(why));
		pthread_mutex_lock(&s->lock);
		s->src->pc_resume_url[0] = 0;
		pthread_mutex_unlock(&s->lock);
		if (!ret)
			break;
		gw_log(GW_LOG_WARN, "mig", "postcopy_recover_failed", "url=%s reason=\"%s\"", url, why);
		close_conns(s);
		set_paused(s, GW_STATUS_POSTCOPY_PAUSED, why);
	}
	pc->resumed_seen = true;	/* the destination answered the recovery: it runs the VM */
	if (!pc->t_resumed_ns)
		pc->t_resumed_ns = pc->t_paused_ns;
	pc->paused_ns += gw_now_ns() - pc->t_paused_ns;
	pc->t_paused_ns = 0;
	pc->recoveries++;
	__atomic_store_n(&s->pc_broken, 0, __ATOMIC_RELEASE);
	gw_log(GW_LOG_INFO, "mig", "postcopy_recovered", "recoveries=%u paused_ms=%.3f pages_left=%llu",
	       pc->recoveries, pc->paused_ns / 1e6, (unsigned long long)pc->pick.left_pages);
	ret = src_start_ctl_reader(s);
	if (!ret)
		ret = pcs_start_threads(s, pc);
	if (!ret)
		set_paused(s, GW_STATUS_POSTCOPY_ACTIVE, "");
	return ret;
}
