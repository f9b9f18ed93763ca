/* SPDX-License-Identifier: MIT */
/*
 * Readable migration reports from a status object: the engine's statistics
 * JSON (QEMU query-migrate names: times in milliseconds, ram.* in bytes and
 * pages) plus the API's own members. Members this file does not know are
 * still printed, generically, so that new engine statistics show up
 * without a change here.
 */
#include "cli.h"
#include "cli_parse.h"

#include <inttypes.h>
#include <string.h>

/* The TLS line: mode, the peer, the cipher, and whether the kernel did the records. */
static void print_tls(FILE *out, const struct json *tls)
{
	const char *mode = json_str(json_get(tls, "mode"), "none");

	if (!tls)
		return;
	if (!strcmp(mode, "none")) {
		fprintf(out, "%-19snone (plain TCP or UNIX socket)\n", "tls:");
		return;
	}
	fprintf(out, "%-19s%s, peer %s, %s, kernel TLS: send %s, receive %s\n", "tls:", mode,
		json_str(json_get(tls, "peer"), "?"), json_str(json_get(tls, "cipher"), "?"),
		json_bool(json_get(tls, "ktls-tx"), false) ? "yes" : "no (OpenSSL in user space)",
		json_bool(json_get(tls, "ktls-rx"), false) ? "yes" : "no");
}

/* Members printed by name (or deliberately not at all). */
static const char *const known_top[] = {
	"ok", "status", "error-desc", "error-phase", "error-code", "total-time", "setup-time",
	"downtime", "expected-downtime", "ram", "downtime-breakdown", "rounds", "round-table",
	"channel-bytes", "cpu-user-seconds", "cpu-system-seconds", "dirty-backend", "compress",
	"role", "vm-status", "workload", "guest-progress-count", "verify-check", "incoming-url",
	"verified", "guest-progress", "source-vm-status", "destination-vm-status",
	"destination-verify-check", "guest-progress-samples", "cpu-throttle-percentage",
	"dirty-limit-rate", "rtt", "converging", "converge-hint", "tls", "connections-refused", NULL,
};
static const char *const known_ram[] = {
	"total", "transferred", "remaining", "duplicate", "normal", "normal-bytes",
	"dirty-sync-count", "mbps", "pages-per-second", "dirty-pages-rate", "skipped",
	"xbzrle-pages", "payload-raw-bytes", "payload-wire-bytes", "compression-ratio",
	"rate-bps", "free-hinted", "free-discarded", NULL,
};

static bool in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

void report_extra_init(struct report_extra *x)
{
	memset(x, 0, sizeof(*x));
	x->verified = -1;
	x->guest_progress = -1;
}

static void print_scalar(FILE *out, const struct json *v)
{
	if (v->type == JSON_STRING)
		fputs(v->str, out);
	else
		json_write(out, v);
}

/* An array of objects as a table, columns from the first element. */
static void print_table(FILE *out, const char *name, const struct json *arr)
{
	const struct json *row, *col;

	if (!arr->child)
		return;
	fprintf(out, "%s:\n ", name);
	for (col = arr->child->child; col; col = col->next)
		fprintf(out, " %*s", (int)(strlen(col->key) > 10 ? strlen(col->key) : 10), col->key);
	fputc('\n', out);
	for (row = arr->child; row; row = row->next) {
		const struct json *hdr = arr->child->child;

		fputc(' ', out);
		for (; hdr; hdr = hdr->next) {
			const struct json *v = json_get(row, hdr->key);
			int w = (int)(strlen(hdr->key) > 10 ? strlen(hdr->key) : 10);

			if (!v)
				fprintf(out, " %*s", w, "-");
			else if (v->type == JSON_NUMBER && v->number != (double)(int64_t)v->number)
				fprintf(out, " %*.3f", w, v->number);
			else if (v->type == JSON_STRING)
				fprintf(out, " %*s", w, v->str);
			else if (v->type == JSON_NUMBER)
				fprintf(out, " %*s", w, v->str);
			else
				fprintf(out, " %*s", w, "?");
		}
		fputc('\n', out);
	}
}

static void print_generic(FILE *out, const struct json *m)
{
	const struct json *c;

	if (m->type == JSON_ARRAY && m->child && m->child->type == JSON_OBJECT) {
		print_table(out, m->key, m);
		return;
	}
	fprintf(out, "%-19s", m->key);
	if (m->type == JSON_OBJECT) {
		for (c = m->child; c; c = c->next) {
			fprintf(out, "%s%s ", c == m->child ? "" : ", ", c->key);
			if (c->type == JSON_OBJECT || c->type == JSON_ARRAY)
				json_write(out, c);
			else
				print_scalar(out, c);
		}
	} else if (m->type == JSON_ARRAY) {
		json_write(out, m);
	} else {
		print_scalar(out, m);
	}
	fputc('\n', out);
}

static const char *yes_no(int v)
{
	return v < 0 ? "n/a" : v ? "yes" : "no";
}

static double num(const struct json *o, const char *key)
{
	return json_num(json_get(o, key), 0);
}

static void print_breakdown(FILE *out, const struct json *b)
{
	const struct json *m;
	bool first = true;

	if (!b || b->type != JSON_OBJECT)
		return;
	fprintf(out, "%-19s", "  breakdown:");
	for (m = b->child; m; m = m->next) {
		if (!strcmp(m->key, "verify-excluded") || m->type != JSON_NUMBER)
			continue;
		fprintf(out, "%s%s %.3f", first ? "" : ", ", m->key, m->number);
		first = false;
	}
	fputs(" ms", out);
	if (json_get(b, "verify-excluded"))
		fprintf(out, " (digest check %.3f ms, not counted)", num(b, "verify-excluded"));
	fputc('\n', out);
}

static void print_rounds(FILE *out, const struct json *table)
{
	const struct json *r;
	char b[32];

	if (!table || table->type != JSON_ARRAY || !table->child)
		return;
	fprintf(out, "  %5s %12s %12s %12s %11s %12s %16s %9s\n", "round", "duration-ms",
		"dirty-pages", "sent", "rate-MiB/s", "dirty-MiB/s", "exp-downtime-ms", "throttle");
	for (r = table->child; r; r = r->next)
		fprintf(out, "  %5.0f %12.3f %12.0f %12s %11.1f %12.1f %16.3f %8.0f%%%s\n",
			num(r, "round"), num(r, "duration"), num(r, "dirty-pages"),
			cli_fmt_bytes((uint64_t)num(r, "sent-bytes"), b, sizeof(b)),
			num(r, "rate-bps") / 1048576.0,
			num(r, "dirty-rate-pps") * GW_PAGE_BYTES / 1048576.0, num(r, "expected-downtime"),
			num(r, "cpu-throttle-percentage"),
			json_bool(json_get(r, "dirty-limit"), false) ? " +dirty-limit" : "");
}

/* Throttle, dirty limit, round trip; why it does not converge, if so. */
static void print_convergence(FILE *out, const struct json *st)
{
	const char *hint = json_str(json_get(st, "converge-hint"), "");
	char b[32];

	if (!json_get(st, "cpu-throttle-percentage"))
		return;
	fprintf(out, "%-19sthrottle %.0f%%, dirty limit %s, rtt %.3f ms, %s\n", "convergence:",
		num(st, "cpu-throttle-percentage"),
		num(st, "dirty-limit-rate") > 0 ?
		cli_fmt_bytes((uint64_t)num(st, "dirty-limit-rate"), b, sizeof(b)) : "off",
		num(st, "rtt"), json_bool(json_get(st, "converging"), true) ? "converging" : "not converging");
	if (hint[0])
		fprintf(out, "%-19s%s\n", "  why:", hint);
}

void report_print(FILE *out, const struct json *st, const struct report_extra *x)
{
	const struct json *ram = json_get(st, "ram"), *m, *v;
	const char *err = json_str(json_get(st, "error-desc"), "");
	const char *phase = json_str(json_get(st, "error-phase"), "");
	bool completed = cli_status_is(st, GW_STATUS_COMPLETED);
	int verified = x && x->verified >= 0 ? x->verified :
		       completed && json_get(st, "verified") ?
		       json_bool(json_get(st, "verified"), false) : -1;
	char b1[32], b2[32], b3[32];

	fprintf(out, "%-19s%s\n", "status:", json_str(json_get(st, "status"), "?"));
	if (err[0])
		fprintf(out, "%-19s%s%s%s%s\n", "error:", err, phase[0] ? " (phase " : "",
			phase, phase[0] ? ")" : "");
	if ((v = json_get(st, "total-time")))
		fprintf(out, "%-19s%.3f ms (setup %.3f ms)\n", "total time:", json_num(v, 0),
			num(st, "setup-time"));
	if ((v = json_get(st, "downtime")) && completed)
		fprintf(out, "%-19s%.3f ms (expected %.3f ms)\n", "downtime:", json_num(v, 0),
			num(st, "expected-downtime"));
	if (completed)
		print_breakdown(out, json_get(st, "downtime-breakdown"));
	if (ram) {
		fprintf(out, "%-19s%s of %s RAM (remaining %s)\n", "transferred:",
			cli_fmt_bytes((uint64_t)num(ram, "transferred"), b1, sizeof(b1)),
			cli_fmt_bytes((uint64_t)num(ram, "total"), b2, sizeof(b2)),
			cli_fmt_bytes((uint64_t)num(ram, "remaining"), b3, sizeof(b3)));
		fprintf(out, "%-19s%.1f Mbit/s (%.1f MiB/s), %.0f pages/s\n", "throughput:",
			num(ram, "mbps"), num(ram, "mbps") * 1e6 / 8 / 1048576.0,
			num(ram, "pages-per-second"));
		fprintf(out, "%-19snormal %.0f, zero %.0f, skipped %.0f, xbzrle %.0f\n", "pages:",
			num(ram, "normal"), num(ram, "duplicate"), num(ram, "skipped"),
			num(ram, "xbzrle-pages"));
		if (num(ram, "free-hinted") > 0 || num(ram, "free-discarded") > 0)
			fprintf(out, "%-19s%.0f pages not sent, %.0f sent before and zeroed at the end\n",
				"free-page hints:", num(ram, "free-hinted"), num(ram, "free-discarded"));
		fprintf(out, "%-19s%s, ratio %.3f (page payload %s -> %s)\n", "compression:",
			json_str(json_get(st, "compress"), "none"), json_num(json_get(ram, "compression-ratio"), 1),
			cli_fmt_bytes((uint64_t)num(ram, "payload-raw-bytes"), b1, sizeof(b1)),
			cli_fmt_bytes((uint64_t)num(ram, "payload-wire-bytes"), b2, sizeof(b2)));
		fprintf(out, "%-19s%s, %.0f syncs, %.0f pages/s dirtied at the last\n", "dirty tracking:",
			json_str(json_get(st, "dirty-backend"), "?"), num(ram, "dirty-sync-count"),
			num(ram, "dirty-pages-rate"));
		for (m = ram->child; m; m = m->next) {
			if (in_list(known_ram, m->key))
				continue;
			fputs("  ram.", out);
			print_generic(out, m);
		}
	}
	print_convergence(out, st);
	if ((v = json_get(st, "rounds")))
		fprintf(out, "%-19s%.0f precopy (+ the final one, paused)\n", "rounds:", json_num(v, 0));
	print_rounds(out, json_get(st, "round-table"));
	if ((v = json_get(st, "channel-bytes")) && v->type == JSON_ARRAY && v->child) {
		unsigned i = 0;

		fprintf(out, "%-19s", "channels:");
		for (m = v->child; m; m = m->next, i++)
			fprintf(out, "%s#%u %s", i ? ", " : "", i,
				cli_fmt_bytes((uint64_t)json_num(m, 0), b1, sizeof(b1)));
		fputc('\n', out);
	}
	if (json_get(st, "cpu-user-seconds"))
		fprintf(out, "%-19suser %.3f s, system %.3f s\n", "cpu (source):",
			num(st, "cpu-user-seconds"), num(st, "cpu-system-seconds"));
	print_tls(out, json_get(st, "tls"));
	for (m = st->child; m; m = m->next)
		if (!in_list(known_top, m->key))
			print_generic(out, m);
	fprintf(out, "%-19s%s%s%s%s\n", "verified:", yes_no(verified),
		x && x->verify_detail ? " (" : "", x && x->verify_detail ? x->verify_detail : "",
		x && x->verify_detail ? ")" : "");
	if (x && x->guest_progress >= 0)
		fprintf(out, "%-19s%s\n", "guest progress:", yes_no(x->guest_progress));
	if (x && x->source_vm_status)
		fprintf(out, "%-19s%s\n", "source vm:", x->source_vm_status);
	if (x && x->destination_vm_status)
		fprintf(out, "%-19s%s\n", "destination vm:", x->destination_vm_status);
}

void report_progress_line(FILE *out, const struct json *st)
{
	char t[32], r[32];

	fprintf(out, "%s: %.0f ms, transferred %s, remaining %s, rounds %.0f, link %.0f MiB/s, "
		"dirtied %.0f MiB/s, expected downtime %.1f ms, throttle %.0f%%%s",
		json_str(json_get(st, "status"), "?"), json_num(json_get(st, "total-time"), 0),
		cli_fmt_bytes((uint64_t)json_path_num(st, "ram.transferred", 0), t, sizeof(t)),
		cli_fmt_bytes((uint64_t)json_path_num(st, "ram.remaining", 0), r, sizeof(r)),
		json_path_num(st, "ram.dirty-sync-count", 0),
		json_path_num(st, "ram.rate-bps", 0) / 1048576.0,
		json_path_num(st, "ram.dirty-pages-rate", 0) * GW_PAGE_BYTES / 1048576.0,
		json_num(json_get(st, "expected-downtime"), 0),
		json_num(json_get(st, "cpu-throttle-percentage"), 0),
		json_num(json_get(st, "dirty-limit-rate"), 0) > 0 ? ", dirty limit on" : "");
	if (!json_bool(json_get(st, "converging"), true))
		fputs(", NOT converging", out);
}
