/* SPDX-License-Identifier: MIT */
/*
 * The engine's statistics as JSON, with QEMU query-migrate names where they
 * exist (milliseconds with microsecond precision, mbps) and our own beside
 * them. Units are converted here, at the edge, and nowhere else. Member
 * names and their order are the contract of docs/api.md.
 */
#include "run/stats_json.h"
#include "common/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Milliseconds rounded to the microsecond: the contract's precision. */
static json_t *ms(uint64_t ns)
{
	return json_real((double)((ns + 500) / 1000) / 1000.0);
}

static json_t *u64(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* Round a ratio to 3 decimals, as the contract has always printed it. */
static json_t *ratio(double v)
{
	return json_real(round(v * 1000.0) / 1000.0);
}

/*
 * Every member added with set(), which remembers the first failure (no
 * memory): one check at the end instead of one per member.
 */
struct builder {
	bool failed;
};

static void set(struct builder *b, json_t *obj, const char *key, json_t *v)
{
	if (!obj || !v) {
		json_decref(v);
		b->failed = true;
	} else if (json_object_set_new(obj, key, v)) {	/* drops @v on failure */
		b->failed = true;
	}
}

/* Stage times from..to, each divided by @div (1e6: ms; a page count: ns per page). */
static json_t *stages_object(struct builder *b, const uint64_t *ns, unsigned from, unsigned to, double div)
{
	json_t *o = json_object();

	for (unsigned i = from; o && i <= to; i++)
		set(b, o, gw_stage_name((enum gw_stage)i), div == 1e6 ? ms(ns[i]) : ratio((double)ns[i] / div));
	return o;
}

/* Stage times of this side, in ms and in ns per page moved (zero pages count); live and zero-copy sends. */
static void stage_members(struct builder *b, json_t *root, const struct gw_stats *st)
{
	uint64_t pages = st->normal_pages + st->duplicate_pages + st->xbzrle_pages;
	bool src = st->stage_ns[GW_STAGE_READ] || st->stage_ns[GW_STAGE_SEND] || st->stage_ns[GW_STAGE_CLASSIFY];
	unsigned from = src ? GW_STAGE_READ : GW_STAGE_RECV, to = src ? GW_STAGE_SETTLE : GW_STAGE_APPLY;

	set(b, root, "stage-time", stages_object(b, st->stage_ns, from, to, 1e6));
	set(b, root, "stage-ns-per-page", stages_object(b, st->stage_ns, from, to, pages ? (double)pages : 1));
	set(b, root, "live-pages", u64(st->live_pages));
	set(b, root, "void-pages", u64(st->void_pages));
	set(b, root, "direct-pages", u64(st->direct_pages));
	set(b, root, "zerocopy-sends", u64(st->zerocopy_sends));
	set(b, root, "zerocopy-copied", u64(st->zerocopy_copied));
}

static json_t *ram_object(struct builder *b, const struct gw_stats *st)
{
	double mbps = st->total_time_ns ? (double)st->transferred_bytes * 8 / 1e6 /
					  ((double)st->total_time_ns / 1e9) : 0;
	json_t *r = json_object();

	set(b, r, "total", u64(st->ram_total_bytes));
	set(b, r, "transferred", u64(st->transferred_bytes));
	set(b, r, "remaining", u64(st->remaining_bytes));
	set(b, r, "duplicate", u64(st->duplicate_pages));
	set(b, r, "normal", u64(st->normal_pages));
	set(b, r, "normal-bytes", u64(st->normal_bytes));
	set(b, r, "dirty-sync-count", u64(st->dirty_sync_count));
	set(b, r, "mbps", ratio(mbps));
	set(b, r, "pages-per-second", u64(st->pages_per_second));
	set(b, r, "dirty-pages-rate", u64(st->dirty_pages_rate));
	set(b, r, "skipped", u64(st->skipped_pages));
	set(b, r, "xbzrle-pages", u64(st->xbzrle_pages));
	set(b, r, "payload-raw-bytes", u64(st->payload_bytes_raw));
	set(b, r, "payload-wire-bytes", u64(st->payload_bytes_wire));
	set(b, r, "compression-ratio", ratio(st->payload_bytes_wire ?
		(double)st->payload_bytes_raw / (double)st->payload_bytes_wire : 1.0));
	set(b, r, "rate-bps", u64(st->rate_bps));
	set(b, r, "free-hinted", u64(st->free_hinted_pages));
	set(b, r, "free-discarded", u64(st->free_discarded_pages));
	set(b, r, "postcopy-requests", u64(st->postcopy_requests));
	return r;
}

static json_t *breakdown_object(struct builder *b, const struct gw_downtime_breakdown *bd)
{
	json_t *o = json_object();

	set(b, o, "pause", ms(bd->pause_ns));
	set(b, o, "final-harvest", ms(bd->final_harvest_ns));
	set(b, o, "final-send", ms(bd->final_send_ns));
	set(b, o, "state-save", ms(bd->state_save_ns));
	set(b, o, "state-send", ms(bd->state_send_ns));
	set(b, o, "dst-load", ms(bd->dst_load_ns));
	set(b, o, "handover", ms(bd->handover_ns));
	return o;
}

/* The model's verdict (enum gw_converge_state), named at this edge. */
static const char *converge_state_name(enum gw_converge_state st)
{
	static const char *const names[] = {
		[GW_CONVERGE_FITS] = "fits", [GW_CONVERGE_UNKNOWN] = "unknown",
		[GW_CONVERGE_DRAINING] = "draining", [GW_CONVERGE_CAPPED] = "capped",
		[GW_CONVERGE_OUTRUN] = "outrun", [GW_CONVERGE_FLAT] = "flat",
		[GW_CONVERGE_FIXED_COST] = "fixed-cost",
	};

	return (unsigned)st < sizeof(names) / sizeof(names[0]) && names[st] ? names[st] : "unknown";
}

/* The round table, a row per gw_session_round() call: @st gives its length. */
static json_t *round_array(struct builder *b, struct gw_session *s, const struct gw_stats *st)
{
	json_t *a = json_array();
	struct gw_round_stats row = { .size = sizeof(row) }, *r = &row;

	for (unsigned i = 0; a && s && i < st->nr_rounds_kept && !gw_session_round(s, i, r); i++) {
		json_t *o = json_object();

		set(b, o, "round", json_integer(r->round));
		set(b, o, "duration", ms(r->duration_ns));
		set(b, o, "dirty-pages", u64(r->dirty_pages));
		set(b, o, "sent-bytes", u64(r->sent_bytes));
		set(b, o, "pages", u64(r->normal_pages));
		set(b, o, "zero-pages", u64(r->zero_pages));
		set(b, o, "skipped-pages", u64(r->skipped_pages));
		set(b, o, "rate-bps", u64(r->rate_bps));
		set(b, o, "expected-downtime", ms(r->expected_downtime_ns));
		set(b, o, "expected-downtime-known", json_boolean(!r->expected_downtime_unknown));
		set(b, o, "dirty-rate-pps", u64(r->dirty_rate_pps));
		set(b, o, "cpu-throttle-percentage", json_integer(r->throttle_pct));
		set(b, o, "dirty-limit", json_boolean(r->dirty_limit));
		set(b, o, "void-pages", u64(r->void_pages));
		set(b, o, "stage-time", stages_object(b, r->stage_ns, GW_STAGE_READ, GW_STAGE_SETTLE, 1e6));
		if (!o || json_array_append_new(a, o))
			b->failed = true;
	}
	return a;
}

/* Bytes per channel, and per channel the page bytes each codec actually carried. */
static void channel_members(struct builder *b, json_t *root, struct gw_session *s, const struct gw_stats *st)
{
	json_t *bytes = json_array(), *codecs = json_array();
	struct gw_channel_stats ch = { .size = sizeof(ch) };

	for (unsigned i = 0; bytes && codecs && s && i < st->nr_channels && !gw_session_channel(s, i, &ch); i++) {
		json_t *o = json_object();

		if (json_array_append_new(bytes, u64(ch.bytes)))
			b->failed = true;
		for (unsigned c = 0; c < GW_CODEC__COUNT; c++)
			if (ch.codec_bytes[c])
				set(b, o, gw_codec_name((enum gw_codec_id)c), u64(ch.codec_bytes[c]));
		if (!o || json_array_append_new(codecs, o))
			b->failed = true;
	}
	set(b, root, "channel-bytes", bytes);
	set(b, root, "channel-codecs", codecs);
}

/*
 * Postcopy: QEMU's postcopy-blocktime and postcopy-vcpu-blocktime (ms) at
 * the top level, and ours in "postcopy".
 */
static void postcopy_members(struct builder *b, json_t *root, struct gw_session *s, const struct gw_stats *st)
{
	json_t *vcpu = json_array(), *pc = json_object(), *lat = json_object();
	struct gw_vcpu_stats v = { .size = sizeof(v) };

	for (unsigned i = 0; vcpu && s && i < st->postcopy_nr_vcpus && !gw_session_vcpu(s, i, &v); i++)
		if (json_array_append_new(vcpu, ms(v.postcopy_blocktime_ns)))
			b->failed = true;
	set(b, root, "postcopy-blocktime", ms(st->postcopy_blocktime_ns));
	set(b, root, "postcopy-vcpu-blocktime", vcpu);
	set(b, pc, "postcopy-time", ms(st->postcopy_time_ns));
	set(b, pc, "paused-time", ms(st->postcopy_paused_ns));
	set(b, pc, "recoveries", json_integer(st->postcopy_recoveries));
	set(b, pc, "pages", u64(st->postcopy_pages));
	set(b, pc, "remaining", u64(st->postcopy_remaining_pages));
	set(b, pc, "requests", u64(st->postcopy_requests));
	set(b, pc, "pushed", u64(st->postcopy_pushed_pages));
	set(b, pc, "answered", u64(st->postcopy_answered_pages));
	set(b, pc, "placed-requested", u64(st->postcopy_placed_requested));
	set(b, pc, "placed-pushed", u64(st->postcopy_placed_pushed));
	set(b, pc, "duplicates", u64(st->postcopy_dup_pages));
	set(b, pc, "faults", u64(st->postcopy_faults));
	set(b, pc, "local-faults", u64(st->postcopy_local_faults));
	set(b, pc, "vcpu-blocktime-total", ms(st->postcopy_vcpu_blocktime_total_ns));
	set(b, lat, "p50", json_real(round(st->postcopy_latency_p50_ns / 100.0) / 10.0));
	set(b, lat, "p99", json_real(round(st->postcopy_latency_p99_ns / 100.0) / 10.0));
	set(b, lat, "max", json_real(round(st->postcopy_latency_max_ns / 100.0) / 10.0));
	set(b, lat, "samples", u64(st->postcopy_latency_samples));
	set(b, pc, "fault-latency-us", lat);
	set(b, pc, "reason", js_string(st->postcopy_reason));
	set(b, root, "postcopy", pc);
}

/* Security (docs/security.md): the TLS session of the control connection, refusals at admission. */
static void tls_members(struct builder *b, json_t *root, const struct gw_stats *st)
{
	json_t *tls = json_object();

	set(b, tls, "mode", js_string(st->tls[0] ? st->tls : "none"));
	set(b, tls, "peer", js_string(st->tls_peer));
	set(b, tls, "cipher", js_string(st->tls_cipher));
	set(b, tls, "ktls-tx", json_boolean(st->ktls_tx));
	set(b, tls, "ktls-rx", json_boolean(st->ktls_rx));
	if (st->tls_records[0])
		set(b, tls, "records", js_string(st->tls_records));
	set(b, root, "tls", tls);
	set(b, root, "connections-refused", u64(st->conns_refused));
}

json_t *stats_json(struct gw_session *s, const struct gw_stats *st)
{
	struct builder b = { false };
	json_t *root = json_object(), *vt = json_object();

	set(&b, root, "status", json_string(gw_status_name(st->status)));
	set(&b, root, "total-time", ms(st->total_time_ns));
	set(&b, root, "setup-time", ms(st->setup_time_ns));
	set(&b, root, "downtime", ms(st->downtime_ns));
	set(&b, root, "expected-downtime", ms(st->expected_downtime_ns));
	set(&b, root, "expected-downtime-known", json_boolean(!st->expected_downtime_unknown));
	set(&b, root, "ram", ram_object(&b, st));
	if (st->postcopy)
		postcopy_members(&b, root, s, st);
	set(&b, root, "cpu-throttle-percentage", json_integer(st->throttle_pct));
	set(&b, root, "dirty-limit-rate", u64(st->dirty_limit_bps));
	set(&b, root, "rtt", ms(st->rtt_ns));
	set(&b, root, "converging", json_boolean(st->converging));
	set(&b, root, "converge-hint", js_string(st->converge_hint));
	set(&b, root, "converge-state", json_string(converge_state_name(st->converge_state)));
	set(&b, root, "converge-eta", ms(st->converge_eta_ns));
	if (st->escalate_step[0])	/* a source's rounds ran: escalation's state, "none" while off */
		set(&b, root, "escalate", json_pack("{s:s,s:I,s:o,s:o}", "step", st->escalate_step, "steps",
						   (json_int_t)st->escalate_steps, "downtime-limit",
						   ms(st->escalate_limit_ns), "best-expected-downtime",
						   ms(st->escalate_best_expected_ns)));
	set(&b, root, "downtime-breakdown", breakdown_object(&b, &st->downtime));
	set(&b, root, "downtime-measured", json_boolean(st->downtime_measured));
	set(&b, root, "rounds", json_integer(st->rounds));
	set(&b, root, "round-table", round_array(&b, s, st));
	channel_members(&b, root, s, st);
	stage_members(&b, root, st);
	set(&b, root, "cpu-user-seconds", ratio((double)st->cpu_user_ns / 1e9));
	set(&b, root, "cpu-system-seconds", ratio((double)st->cpu_sys_ns / 1e9));
	set(&b, root, "verified", json_boolean(st->verified));
	set(&b, root, "verify", json_string(gw_verify_name(st->verify)));
	set(&b, vt, "source", ms(st->verify_src_ns));
	set(&b, vt, "destination", ms(st->verify_dst_ns));
	set(&b, root, "verify-time", vt);
	set(&b, root, "verify-faults", u64(st->verify_faults));
	set(&b, root, "dirty-backend", js_string(st->dirty_backend));
	set(&b, root, "compress", js_string(st->codec[0] ? st->codec : "none"));
	tls_members(&b, root, st);
	if (st->error[0] || st->error_code) {
		set(&b, root, "error-desc", js_string(st->error));
		set(&b, root, "error-phase", js_string(st->error_phase));
		set(&b, root, "error-code", json_integer(st->error_code));
	}
	if (b.failed) {
		json_decref(root);
		return NULL;
	}
	return root;
}
