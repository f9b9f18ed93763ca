/* SPDX-License-Identifier: MIT */
/*
 * Statistics to JSON, with QEMU query-migrate names where they exist
 * (milliseconds with microsecond precision, mbps) and our own beside them.
 * Units are converted here, at the edge, and nowhere else.
 */
#include <errno.h>
#include <stdio.h>
#include <godwit/stats.h>

static const char *const status_names[] = {
	[GW_STATUS_NONE] = "none", [GW_STATUS_SETUP] = "setup", [GW_STATUS_ACTIVE] = "active",
	[GW_STATUS_DEVICE] = "device", [GW_STATUS_HANDOVER] = "handover",
	[GW_STATUS_COMPLETED] = "completed", [GW_STATUS_FAILED] = "failed",
	[GW_STATUS_CANCELLED] = "cancelled", [GW_STATUS_UNKNOWN] = "unknown",
};

const char *gw_status_name(enum gw_status st)
{
	return (unsigned)st < sizeof(status_names) / sizeof(status_names[0]) ? status_names[st] : "invalid";
}

static const char *const verify_names[] = {
	[GW_VERIFY_OFF] = "off", [GW_VERIFY_PENDING] = "pending", [GW_VERIFY_OK] = "ok",
	[GW_VERIFY_MISMATCH] = "mismatch", [GW_VERIFY_UNKNOWN] = "unknown",
};

const char *gw_verify_name(enum gw_verify v)
{
	return (unsigned)v < sizeof(verify_names) / sizeof(verify_names[0]) ? verify_names[v] : "invalid";
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* JSON string: escape quotes, backslashes and control characters. */
static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

int gw_stats_json(const struct gw_stats *st, const char *extra, FILE *out)
{
	const struct gw_downtime_breakdown *bd = &st->downtime;
	double mbps = st->total_time_ns ? (double)st->transferred_bytes * 8 / 1e6 /
					  ((double)st->total_time_ns / 1e9) : 0;

	fprintf(out, "{\"status\":\"%s\"", gw_status_name(st->status));
	fprintf(out, ",\"total-time\":%.3f,\"setup-time\":%.3f,\"downtime\":%.3f,\"expected-downtime\":%.3f",
		ms(st->total_time_ns), ms(st->setup_time_ns), ms(st->downtime_ns),
		ms(st->expected_downtime_ns));
	fprintf(out, ",\"ram\":{\"total\":%llu,\"transferred\":%llu,\"remaining\":%llu,\"duplicate\":%llu,"
		"\"normal\":%llu,\"normal-bytes\":%llu,\"dirty-sync-count\":%llu,\"mbps\":%.3f,"
		"\"pages-per-second\":%llu,\"dirty-pages-rate\":%llu,\"skipped\":%llu,\"xbzrle-pages\":%llu,"
		"\"payload-raw-bytes\":%llu,\"payload-wire-bytes\":%llu,\"compression-ratio\":%.3f,"
		"\"rate-bps\":%llu,\"free-hinted\":%llu,\"free-discarded\":%llu}",
		(unsigned long long)st->ram_total_bytes, (unsigned long long)st->transferred_bytes,
		(unsigned long long)st->remaining_bytes, (unsigned long long)st->duplicate_pages,
		(unsigned long long)st->normal_pages, (unsigned long long)st->normal_bytes,
		(unsigned long long)st->dirty_sync_count, mbps,
		(unsigned long long)st->pages_per_second, (unsigned long long)st->dirty_pages_rate,
		(unsigned long long)st->skipped_pages, (unsigned long long)st->xbzrle_pages,
		(unsigned long long)st->payload_bytes_raw, (unsigned long long)st->payload_bytes_wire,
		st->payload_bytes_wire ? (double)st->payload_bytes_raw / (double)st->payload_bytes_wire : 1.0,
		(unsigned long long)st->rate_bps, (unsigned long long)st->free_hinted_pages,
		(unsigned long long)st->free_discarded_pages);
	fprintf(out, ",\"cpu-throttle-percentage\":%u,\"dirty-limit-rate\":%llu,\"rtt\":%.3f,"
		"\"converging\":%s,\"converge-hint\":",
		st->throttle_pct, (unsigned long long)st->dirty_limit_bps, ms(st->rtt_ns),
		st->converging ? "true" : "false");
	json_str(out, st->converge_hint);
	fprintf(out, ",\"downtime-breakdown\":{\"pause\":%.3f,\"final-harvest\":%.3f,\"final-send\":%.3f,"
		"\"state-save\":%.3f,\"state-send\":%.3f,\"dst-load\":%.3f,\"handover\":%.3f},"
		"\"downtime-measured\":%s",
		ms(bd->pause_ns), ms(bd->final_harvest_ns), ms(bd->final_send_ns), ms(bd->state_save_ns),
		ms(bd->state_send_ns), ms(bd->dst_load_ns), ms(bd->handover_ns),
		st->downtime_measured ? "true" : "false");
	fprintf(out, ",\"rounds\":%u,\"round-table\":[", st->rounds);
	for (unsigned i = 0; i < st->nr_rounds_kept && i < GW_STATS_MAX_ROUNDS; i++) {
		const struct gw_round_stats *r = &st->round[i];

		fprintf(out, "%s{\"round\":%u,\"duration\":%.3f,\"dirty-pages\":%llu,\"sent-bytes\":%llu,"
			"\"pages\":%llu,\"zero-pages\":%llu,\"skipped-pages\":%llu,\"rate-bps\":%llu,"
			"\"expected-downtime\":%.3f,\"dirty-rate-pps\":%llu,\"cpu-throttle-percentage\":%u,"
			"\"dirty-limit\":%s}",
			i ? "," : "", r->round, ms(r->duration_ns), (unsigned long long)r->dirty_pages,
			(unsigned long long)r->sent_bytes, (unsigned long long)r->normal_pages,
			(unsigned long long)r->zero_pages, (unsigned long long)r->skipped_pages,
			(unsigned long long)r->rate_bps, ms(r->expected_downtime_ns),
			(unsigned long long)r->dirty_rate_pps, r->throttle_pct,
			r->dirty_limit ? "true" : "false");
	}
	fprintf(out, "],\"channel-bytes\":[");
	for (unsigned i = 0; i < st->nr_channels && i < GW_STATS_MAX_CHANNELS; i++)
		fprintf(out, "%s%llu", i ? "," : "", (unsigned long long)st->channel_bytes[i]);
	fprintf(out, "],\"cpu-user-seconds\":%.3f,\"cpu-system-seconds\":%.3f",
		(double)st->cpu_user_ns / 1e9, (double)st->cpu_sys_ns / 1e9);
	fprintf(out, ",\"verified\":%s,\"verify\":\"%s\",\"verify-time\":{\"source\":%.3f,"
		"\"destination\":%.3f},\"verify-faults\":%llu",
		st->verified ? "true" : "false", gw_verify_name(st->verify), ms(st->verify_src_ns),
		ms(st->verify_dst_ns), (unsigned long long)st->verify_faults);
	fprintf(out, ",\"dirty-backend\":");
	json_str(out, st->dirty_backend);
	fprintf(out, ",\"compress\":");
	json_str(out, st->codec[0] ? st->codec : "none");
	fprintf(out, ",\"tls\":{\"mode\":");
	json_str(out, st->tls[0] ? st->tls : "none");
	fprintf(out, ",\"peer\":");
	json_str(out, st->tls_peer);
	fprintf(out, ",\"cipher\":");
	json_str(out, st->tls_cipher);
	fprintf(out, ",\"ktls-tx\":%s,\"ktls-rx\":%s},\"connections-refused\":%llu",
		st->ktls_tx ? "true" : "false", st->ktls_rx ? "true" : "false",
		(unsigned long long)st->conns_refused);
	if (st->error[0] || st->error_code) {
		fprintf(out, ",\"error-desc\":");
		json_str(out, st->error);
		fprintf(out, ",\"error-phase\":");
		json_str(out, st->error_phase);
		fprintf(out, ",\"error-code\":%d", st->error_code);
	}
	if (extra && extra[0])
		fprintf(out, ",%s", extra);
	fputc('}', out);
	return ferror(out) ? -EIO : 0;
}
