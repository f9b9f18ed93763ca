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

/* Members printed by name (or deliberately not at all). */
static const char *const known_top[] = {
	"ok", "status", "error", "error-phase", "error-code", "total-time", "setup-time",
	"downtime", "expected-downtime", "ram", "role", "vm-status", "workload",
	"guest-progress-count", "verify-check", "incoming-url", "verified",
	"guest-progress", "source-vm-status", "destination-vm-status", NULL,
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

static void print_bytes(FILE *out, const char *label, const struct json *v)
{
	char b[32];

	if (!v || v->type != JSON_NUMBER)
		return;
	fprintf(out, "%-19s%s\n", label, cli_fmt_bytes((uint64_t)(v->number < 0 ? 0 : v->number),
						       b, sizeof(b)));
}

static void print_ms(FILE *out, const char *label, const struct json *v)
{
	if (!v || v->type != JSON_NUMBER)
		return;
	fprintf(out, "%-19s%.3f ms\n", label, v->number);
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

void report_print(FILE *out, const struct json *st, const struct report_extra *x)
{
	const struct json *ram = json_get(st, "ram"), *m, *v;
	const char *err = json_str(json_get(st, "error"), "");
	int verified = x && x->verified >= 0 ? x->verified :
		       json_get(st, "verified") ? json_bool(json_get(st, "verified"), false) : -1;

	fprintf(out, "%-19s%s\n", "status:", json_str(json_get(st, "status"), "?"));
	if (err[0])
		fprintf(out, "%-19s%s%s%s\n", "error:", err,
			json_str(json_get(st, "error-phase"), "")[0] ? " in phase " : "",
			json_str(json_get(st, "error-phase"), ""));
	print_ms(out, "total time:", json_get(st, "total-time"));
	print_ms(out, "downtime:", json_get(st, "downtime"));
	print_ms(out, "expected downtime:", json_get(st, "expected-downtime"));
	print_ms(out, "setup time:", json_get(st, "setup-time"));
	if (ram) {
		print_bytes(out, "ram total:", json_get(ram, "total"));
		print_bytes(out, "transferred:", json_get(ram, "transferred"));
		print_bytes(out, "remaining:", json_get(ram, "remaining"));
		if ((v = json_get(ram, "mbps")))
			fprintf(out, "%-19s%.1f Mbit/s (%.1f MiB/s)\n", "throughput:", json_num(v, 0),
				json_num(v, 0) * 1e6 / 8 / 1048576.0);
		if ((v = json_get(ram, "pages-per-second")))
			fprintf(out, "%-19s%.0f\n", "pages/s:", json_num(v, 0));
		fprintf(out, "%-19snormal %.0f, zero %.0f", "pages:",
			json_num(json_get(ram, "normal"), 0), json_num(json_get(ram, "duplicate"), 0));
		for (m = ram->child; m; m = m->next) {
			/* Our own page counters next to QEMU's (skipped, xbzrle, ...). */
			if (m->type == JSON_NUMBER && strstr(m->key, "pages") &&
			    strcmp(m->key, "pages-per-second") && strcmp(m->key, "dirty-pages-rate"))
				fprintf(out, ", %s %s", m->key, m->str);
		}
		fputc('\n', out);
		if ((v = json_get(ram, "dirty-sync-count")))
			fprintf(out, "%-19s%.0f\n", "dirty syncs:", json_num(v, 0));
		for (m = ram->child; m; m = m->next) {
			static const char *const shown[] = {
				"total", "transferred", "remaining", "mbps", "pages-per-second",
				"normal", "duplicate", "dirty-sync-count", NULL,
			};

			if (in_list(shown, m->key) || (m->type == JSON_NUMBER && strstr(m->key, "pages") &&
						       strcmp(m->key, "dirty-pages-rate")))
				continue;
			fputs("  ram.", out);
			print_generic(out, m);
		}
	}
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

	fprintf(out, "%s: %.0f ms, transferred %s, remaining %s, %.0f Mbit/s, rounds %.0f",
		json_str(json_get(st, "status"), "?"), json_num(json_get(st, "total-time"), 0),
		cli_fmt_bytes((uint64_t)json_path_num(st, "ram.transferred", 0), t, sizeof(t)),
		cli_fmt_bytes((uint64_t)json_path_num(st, "ram.remaining", 0), r, sizeof(r)),
		json_path_num(st, "ram.mbps", 0), json_path_num(st, "ram.dirty-sync-count", 0));
}
