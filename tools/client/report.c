/* SPDX-License-Identifier: MIT */
/*
 * Readable migration reports from a status object: the engine's statistics
 * JSON (QEMU query-migrate names: times in milliseconds, ram.* in bytes and
 * pages) plus the API's own members. Members this file does not know are
 * still printed, generically, so that new engine statistics show up
 * without a change here.
 *
 * What is printed depends on what happened: a failure shows its reason,
 * its phase and the figures that mean something (what was sent before it
 * failed), never a block of zeros; a destination shows what it received.
 */
#include "client/client.h"
#include "common/cli_parse.h"

#include <inttypes.h>
#include <string.h>

/* The TLS line: mode, the peer, the cipher, and who did the records (kernel, godwit, OpenSSL). */
static void print_tls(FILE *out, const json_t *tls)
{
	const char *mode = js_str(js_get(tls, "mode"), "none");

	if (!tls)
		return;
	if (!strcmp(mode, "none")) {
		fprintf(out, "%-19snone (plain TCP or UNIX socket)\n", "tls:");
		return;
	}
	fprintf(out, "%-19s%s, peer %s, %s, kernel TLS: send %s, receive %s, records: %s\n", "tls:", mode,
		js_str(js_get(tls, "peer"), "?"), js_str(js_get(tls, "cipher"), "?"),
		js_bool(js_get(tls, "ktls-tx"), false) ? "yes" : "no",
		js_bool(js_get(tls, "ktls-rx"), false) ? "yes" : "no",
		js_str(js_get(tls, "records"), "openssl"));
}

/* Members printed by name (or deliberately not at all). */
static const char *const known_top[] = {
	"ok", "status", "error-desc", "error-phase", "error-code", "total-time", "setup-time",
	"downtime", "expected-downtime", "ram", "downtime-breakdown", "rounds", "round-table",
	"channel-bytes", "channel-codecs", "cpu-user-seconds", "cpu-system-seconds", "dirty-backend",
	"compress", "role", "vm-status", "workload", "guest-progress-count", "verify-check",
	"incoming-url", "verified", "guest-progress", "source-vm-status", "destination-vm-status",
	"destination-verify-check", "verified-detail", "guest-progress-samples", "cpu-throttle-percentage",
	"dirty-limit-rate", "rtt", "converging", "converge-hint", "converge-state", "converge-eta",
	"expected-downtime-known", "settled", "logs", "postcopy",
	"postcopy-blocktime", "postcopy-vcpu-blocktime", "accel", "tls", "connections-refused",
	"downtime-measured", "verify", "verify-time", "verify-faults", "stage-time", "stage-ns-per-page",
	"live-pages", "void-pages", "direct-pages", "zerocopy-sends", "zerocopy-copied", "escalate",
	"ram-shmem-bytes", NULL,
};
static const char *const known_ram[] = {
	"total", "transferred", "remaining", "duplicate", "normal", "normal-bytes",
	"dirty-sync-count", "mbps", "pages-per-second", "dirty-pages-rate", "skipped",
	"xbzrle-pages", "payload-raw-bytes", "payload-wire-bytes", "compression-ratio",
	"rate-bps", "free-hinted", "free-discarded",
	/* QEMU's own (godwit status --qmp against QEMU) */
	"postcopy-requests", "page-size", "multifd-bytes", "precopy-bytes", "downtime-bytes",
	"postcopy-bytes", "dirty-sync-missed-zero-copy", NULL,
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

static void print_scalar(FILE *out, const json_t *v)
{
	if (json_is_string(v))
		fputs(json_string_value(v), out);
	else
		js_write(out, v);
}

static int col_width(const char *key)
{
	return (int)(strlen(key) > 10 ? strlen(key) : 10);
}

/* An array of objects as a table, columns from the first element. */
static void print_table(FILE *out, const char *name, const json_t *arr)
{
	const json_t *first = json_array_get(arr, 0), *row, *v;
	const char *key;
	size_t i;

	if (!json_is_object(first))
		return;
	fprintf(out, "%s:\n ", name);
	json_object_foreach((json_t *)first, key, v)
		fprintf(out, " %*s", col_width(key), key);
	fputc('\n', out);
	json_array_foreach(arr, i, row) {
		const json_t *hv;

		fputc(' ', out);
		json_object_foreach((json_t *)first, key, hv) {
			int w = col_width(key);

			v = js_get(row, key);
			if (!v)
				fprintf(out, " %*s", w, "-");
			else if (json_is_real(v))
				fprintf(out, " %*.3f", w, json_real_value(v));
			else if (json_is_integer(v))
				fprintf(out, " %*" JSON_INTEGER_FORMAT, w, json_integer_value(v));
			else if (json_is_string(v))
				fprintf(out, " %*s", w, json_string_value(v));
			else if (json_is_boolean(v))
				fprintf(out, " %*s", w, json_is_true(v) ? "true" : "false");
			else
				fprintf(out, " %*s", w, "?");
		}
		fputc('\n', out);
	}
}

static void print_generic(FILE *out, const char *key, const json_t *m)
{
	const char *ck;
	json_t *c;
	bool first = true;

	if (json_is_array(m) && json_is_object(json_array_get(m, 0))) {
		print_table(out, key, m);
		return;
	}
	fprintf(out, "%-19s", key);
	if (json_is_object(m)) {
		json_object_foreach((json_t *)m, ck, c) {
			fprintf(out, "%s%s ", first ? "" : ", ", ck);
			first = false;
			if (json_is_object(c) || json_is_array(c))
				js_write(out, c);
			else
				print_scalar(out, c);
		}
	} else if (json_is_array(m)) {
		js_write(out, m);
	} else {
		print_scalar(out, m);
	}
	fputc('\n', out);
}

static const char *yes_no(int v)
{
	return v < 0 ? "n/a" : v ? "yes" : "no";
}

static double num(const json_t *o, const char *key)
{
	return js_num(js_get(o, key), 0);
}

static void print_breakdown(FILE *out, const json_t *b)
{
	const char *key;
	json_t *m;
	bool first = true;

	if (!json_is_object(b))
		return;
	fprintf(out, "%-19s", "  breakdown:");
	json_object_foreach((json_t *)b, key, m) {
		if (!json_is_number(m))
			continue;
		fprintf(out, "%s%s %.3f", first ? "" : ", ", key, json_number_value(m));
		first = false;
	}
	fputs(" ms\n", out);
}

/*
 * The round table, "?" where no rate gave an expected downtime. The engine
 * keeps the first rows only: fewer rows than @rounds says so.
 */
static void print_rounds(FILE *out, const json_t *table, double rounds)
{
	const json_t *r;
	char b[32], exp[32];
	size_t i;

	if (!json_array_size(table))
		return;
	fprintf(out, "  %5s %12s %12s %12s %11s %12s %16s %9s\n", "round", "duration-ms",
		"dirty-pages", "sent", "rate-MiB/s", "dirty-MiB/s", "exp-downtime-ms", "throttle");
	json_array_foreach(table, i, r) {
		if (js_bool(js_get(r, "expected-downtime-known"), true))
			snprintf(exp, sizeof(exp), "%.3f", num(r, "expected-downtime"));
		else
			snprintf(exp, sizeof(exp), "?");
		fprintf(out, "  %5.0f %12.3f %12.0f %12s %11.1f %12.1f %16s %8.0f%%%s\n",
			num(r, "round"), num(r, "duration"), num(r, "dirty-pages"),
			cli_fmt_bytes((uint64_t)num(r, "sent-bytes"), b, sizeof(b)),
			num(r, "rate-bps") / 1048576.0,
			num(r, "dirty-rate-pps") * GW_PAGE_BYTES / 1048576.0, exp,
			num(r, "cpu-throttle-percentage"),
			js_bool(js_get(r, "dirty-limit"), false) ? " +dirty-limit" : "");
	}
	if (rounds > (double)json_array_size(table))
		fprintf(out, "  (rounds %zu-%.0f not shown: the table keeps the first %zu rounds)\n",
			json_array_size(table), rounds - 1, json_array_size(table));
}

/*
 * Throttle, dirty limit, round trip; the model's verdict at the last round
 * (fits the limit, converging, not converging) and the words for it: why
 * not, or how fast. Source only.
 */
static void print_convergence(FILE *out, const json_t *st)
{
	const char *hint = js_str(js_get(st, "converge-hint"), "");
	bool converging = js_bool(js_get(st, "converging"), true);
	const char *state = js_str(js_get(st, "converge-state"), "");
	char b[32];

	if (!js_get(st, "cpu-throttle-percentage") || !js_get(st, "rtt"))
		return;
	fprintf(out, "%-19sthrottle %.0f%%, dirty limit %s, rtt %.3f ms, %s\n", "convergence:",
		num(st, "cpu-throttle-percentage"),
		num(st, "dirty-limit-rate") > 0 ?
		cli_fmt_bytes((uint64_t)num(st, "dirty-limit-rate"), b, sizeof(b)) : "off",
		num(st, "rtt"), !converging ? "not converging" : !strcmp(state, "fits") ? "fits the limit" :
		!strcmp(state, "unknown") ? "no rate measured" : "converging");
	if (hint[0])
		fprintf(out, "%-19s%s\n", converging ? "  how:" : "  why:", hint);
}

/*
 * The downtime, what the model expected ("unknown" without a rate; QEMU
 * gives none once completed) and how it was measured: godwit says whether
 * both ends shared one clock; over QMP it is the server's own figure.
 */
static void print_downtime(FILE *out, const json_t *st, double downtime_ms)
{
	const json_t *measured = js_get(st, "downtime-measured");
	char exp[48] = "";

	if (!js_bool(js_get(st, "expected-downtime-known"), true))
		snprintf(exp, sizeof(exp), "expected: unknown; ");
	else if (js_get(st, "expected-downtime"))
		snprintf(exp, sizeof(exp), "expected %.3f ms; ", num(st, "expected-downtime"));
	fprintf(out, "%-19s%.3f ms (%s%s)\n", "downtime:", downtime_ms, exp,
		!measured ? "as query-migrate gives it" : json_is_true(measured) ?
		"pause to resume on one clock" : "resume estimated as RESUMED minus RTT/2");
}

/* Postcopy: how long the state was split, the faults and what they cost. */
static void print_postcopy(FILE *out, const json_t *st)
{
	const json_t *pc = js_get(st, "postcopy"), *v;
	const char *reason;
	size_t i;

	if (!pc)
		return;
	reason = js_str(js_get(pc, "reason"), "");
	fprintf(out, "%-19s%.3f ms with the VM's state split (paused %.3f ms, %.0f recoveries)\n",
		"postcopy:", num(pc, "postcopy-time"), num(pc, "paused-time"), num(pc, "recoveries"));
	fprintf(out, "%-19s%.0f not trusted at the switch, %.0f missing now; placed: %.0f pushed, "
		"%.0f requested, %.0f late copies dropped\n", "  pages:", num(pc, "pages"),
		num(pc, "remaining"), num(pc, "placed-pushed"), num(pc, "placed-requested"),
		num(pc, "duplicates"));
	fprintf(out, "%-19s%.0f pages requested (postcopy-requests), %.0f sent on request, %.0f pushed\n",
		"  requests:", num(pc, "requests"), num(pc, "answered"), num(pc, "pushed"));
	fprintf(out, "%-19s%.0f (%.0f resolved at once); latency p50 %.1f us, p99 %.1f us, max %.1f us "
		"(%.0f waited)\n", "  faults:", num(pc, "faults"), num(pc, "local-faults"),
		js_path_num(pc, "fault-latency-us.p50", 0), js_path_num(pc, "fault-latency-us.p99", 0),
		js_path_num(pc, "fault-latency-us.max", 0), js_path_num(pc, "fault-latency-us.samples", 0));
	fprintf(out, "%-19sall vCPUs at once %.3f ms, summed %.3f ms; per vCPU", "  blocktime:",
		num(st, "postcopy-blocktime"), num(pc, "vcpu-blocktime-total"));
	v = js_get(st, "postcopy-vcpu-blocktime");
	for (i = 0; i < json_array_size(v); i++)
		fprintf(out, " %.3f", js_num(json_array_get(v, i), 0));
	fputs(" ms\n", out);
	if (reason[0])
		fprintf(out, "%-19s%s\n", "  why paused:", reason);
}

/* "rounds:" in the numbering of the round table and the progress line. */
static void print_rounds_line(FILE *out, const json_t *st, bool completed)
{
	double n = num(st, "rounds");

	if (!js_get(st, "rounds") || (n == 0 && !completed))
		return;
	if (n == 0)
		fprintf(out, "%-19sno precopy round, the final one (round 0) with the VM paused\n", "rounds:");
	else if (n == 1)
		fprintf(out, "%-19s1 precopy (round 0)%s\n", "rounds:",
			completed ? ", then the final one (round 1) with the VM paused" : "");
	else if (completed)
		fprintf(out, "%-19s%.0f precopy (rounds 0-%.0f), then the final one (round %.0f) with the VM paused\n",
			"rounds:", n, n - 1, n);
	else
		fprintf(out, "%-19s%.0f precopy (rounds 0-%.0f)\n", "rounds:", n, n - 1);
}

/* "#0 1.00 GiB (lz4 80%, none 20%), #1 ..." */
static void print_channels(FILE *out, const json_t *st)
{
	const json_t *bytes = js_get(st, "channel-bytes"), *codecs = js_get(st, "channel-codecs");
	char b[32];
	size_t i;

	if (!json_array_size(bytes))
		return;
	fprintf(out, "%-19s", "channels:");
	for (i = 0; i < json_array_size(bytes); i++) {
		const json_t *cu = json_array_get(codecs, i), *v;
		double all = 0;
		const char *key;
		bool first = true;

		fprintf(out, "%s#%zu %s", i ? ", " : "", i,
			cli_fmt_bytes((uint64_t)js_num(json_array_get(bytes, i), 0), b, sizeof(b)));
		json_object_foreach((json_t *)cu, key, v)
			all += js_num(v, 0);
		json_object_foreach((json_t *)cu, key, v) {
			if (all <= 0)
				break;
			fprintf(out, "%s%s %.0f%%", first ? " (" : ", ", key, 100.0 * js_num(v, 0) / all);
			first = false;
		}
		if (!first)
			fputc(')', out);
	}
	fputc('\n', out);
}

/* What moved: bytes, rate, pages, compression, dirty tracking. */
static void print_ram(FILE *out, const json_t *st, const json_t *ram, bool dest)
{
	char b1[32], b2[32], b3[32];
	const char *key;
	json_t *m;

	fprintf(out, "%-19s%s of %s RAM%s%s%s\n", dest ? "received:" : "transferred:",
		cli_fmt_bytes((uint64_t)num(ram, "transferred"), b1, sizeof(b1)),
		cli_fmt_bytes((uint64_t)num(ram, "total"), b2, sizeof(b2)),
		dest ? "" : " (remaining ", dest ? "" : cli_fmt_bytes((uint64_t)num(ram, "remaining"), b3, sizeof(b3)),
		dest ? "" : ")");
	fprintf(out, "%-19s%.1f Mbit/s (%.1f MiB/s), %.0f pages/s\n", "throughput:",
		num(ram, "mbps"), num(ram, "mbps") * 1e6 / 8 / 1048576.0, num(ram, "pages-per-second"));
	fprintf(out, "%-19snormal %.0f, zero %.0f, skipped %.0f, xbzrle %.0f\n", "pages:",
		num(ram, "normal"), num(ram, "duplicate"), num(ram, "skipped"), num(ram, "xbzrle-pages"));
	if (num(ram, "free-hinted") > 0 || num(ram, "free-discarded") > 0)
		fprintf(out, "%-19s%.0f pages not sent, %.0f sent before and zeroed at the end\n",
			"free-page hints:", num(ram, "free-hinted"), num(ram, "free-discarded"));
	if (js_get(st, "compress"))
		fprintf(out, "%-19s%s%s, ratio %.3f (page payload %s -> %s)\n", "compression:",
			js_str(js_get(st, "compress"), "none"), dest ? " (as the source asked)" : "",
			js_num(js_get(ram, "compression-ratio"), 1),
			cli_fmt_bytes((uint64_t)num(ram, "payload-raw-bytes"), b1, sizeof(b1)),
			cli_fmt_bytes((uint64_t)num(ram, "payload-wire-bytes"), b2, sizeof(b2)));
	if (js_get(st, "accel"))
		fprintf(out, "%-19s%s\n", "accelerator:", js_str(js_get(st, "accel"), "?"));
	if (!dest && js_get(st, "dirty-backend"))
		fprintf(out, "%-19s%s, %.0f syncs, %.0f pages/s dirtied at the last\n", "dirty tracking:",
			js_str(js_get(st, "dirty-backend"), "?"), num(ram, "dirty-sync-count"),
			num(ram, "dirty-pages-rate"));
	json_object_foreach((json_t *)ram, key, m) {
		if (in_list(known_ram, key))
			continue;
		fputs("  ram.", out);
		print_generic(out, key, m);
	}
}

/* Where the page time went (ns per page moved, stage by stage) and which copy paths ran. */
static void print_datapath(FILE *out, const json_t *st)
{
	const json_t *ns = js_get(st, "stage-ns-per-page");
	const char *key;
	json_t *m;
	bool first = true;

	if (!ns || !json_object_size(ns))
		return;
	fprintf(out, "%-19s", "stages (ns/page):");
	json_object_foreach((json_t *)ns, key, m) {
		fprintf(out, "%s%s %.0f", first ? "" : ", ", key, js_num(m, 0));
		first = false;
	}
	fputc('\n', out);
	if (num(st, "live-pages") + num(st, "void-pages") + num(st, "direct-pages") +
	    num(st, "zerocopy-sends") > 0)
		fprintf(out, "%-19slive %.0f, voided %.0f, received in place %.0f, zero-copy sends %.0f "
			"(%.0f copied by the kernel)\n", "copy paths (pages):", num(st, "live-pages"),
			num(st, "void-pages"), num(st, "direct-pages"), num(st, "zerocopy-sends"),
			num(st, "zerocopy-copied"));
}

/* The RAM digests compared after the resume, and what they cost (outside the downtime). */
static void print_verify(FILE *out, const json_t *st)
{
	const json_t *vt = js_get(st, "verify-time");
	const char *v = js_str(js_get(st, "verify"), "");

	if (!v[0] || !strcmp(v, "off"))
		return;
	fprintf(out, "%-19s%s", "verification:", v);
	if (vt)
		fprintf(out, ", hashing source %.3f ms, destination %.3f ms (after resume)",
			num(vt, "source"), num(vt, "destination"));
	if (num(st, "verify-faults") > 0)
		fprintf(out, ", %.0f guest writes waited for their chunk", num(st, "verify-faults"));
	fputc('\n', out);
}

/* The escalation policy's steps, when it took any (docs/params.md, "Escalation"). */
static void print_escalate(FILE *out, const json_t *e)
{
	if (!e || num(e, "steps") <= 0)
		return;
	fprintf(out, "%-19s%.0f step(s), the last %s; downtime limit %.1f ms, best expected downtime %.1f ms\n",
		"escalation:", num(e, "steps"), js_str(js_get(e, "step"), "?"), num(e, "downtime-limit"),
		num(e, "best-expected-downtime"));
}

void report_print(FILE *out, const json_t *st, const struct report_extra *x)
{
	const json_t *ram = js_get(st, "ram"), *v;
	const char *err = js_str(js_get(st, "error-desc"), "");
	const char *phase = js_str(js_get(st, "error-phase"), "");
	bool completed = cli_status_is(st, GW_STATUS_COMPLETED);
	bool dest = !strcmp(js_str(js_get(st, "role"), "source"), "destination");
	/* A failure shows figures only when pages moved before it (a handshake is no figure). */
	bool moved = num(ram, "normal") + num(ram, "duplicate") + num(ram, "xbzrle-pages") > 0;
	/* verify "off": no digests compared (--no-verify, or a local migration's one copy of RAM). */
	bool compared = strcmp(js_str(js_get(st, "verify"), "off"), gw_verify_name(GW_VERIFY_OFF)) != 0;
	int verified = x && x->verified >= 0 ? x->verified :
		       completed && compared && js_get(st, "verified") ?
		       js_bool(js_get(st, "verified"), false) : -1;
	const char *key;
	json_t *m;

	fprintf(out, "%-19s%s%s\n", "status:", js_str(js_get(st, "status"), "?"),
		dest ? " (destination)" : "");
	if (err[0])
		fprintf(out, "%-19s%s%s%s%s\n", "error:", err, phase[0] ? " (phase " : "",
			phase, phase[0] ? ")" : "");
	if ((v = js_get(st, "total-time")) && (completed || js_num(v, 0) > 0)) {
		fprintf(out, "%-19s%.3f ms", completed ? "total time:" : "after:", js_num(v, 0));
		if (completed || num(st, "setup-time") > 0)
			fprintf(out, " (setup %.3f ms)", num(st, "setup-time"));
		fputc('\n', out);
	}
	if ((v = js_get(st, "downtime")) && completed && !dest)
		print_downtime(out, st, js_num(v, 0));
	if (completed && !dest)
		print_breakdown(out, js_get(st, "downtime-breakdown"));
	if (ram && (completed || moved))
		print_ram(out, st, ram, dest);
	if (!dest && (completed || moved))
		print_convergence(out, st);
	print_postcopy(out, st);
	print_rounds_line(out, st, completed);
	if (completed || moved) {
		print_rounds(out, js_get(st, "round-table"), num(st, "rounds"));
		print_channels(out, st);
		print_datapath(out, st);
		if (num(st, "cpu-user-seconds") + num(st, "cpu-system-seconds") > 0)
			fprintf(out, "%-19suser %.3f s, system %.3f s\n",
				dest ? "cpu (destination):" : "cpu (source):",
				num(st, "cpu-user-seconds"), num(st, "cpu-system-seconds"));
	}
	print_tls(out, js_get(st, "tls"));
	print_escalate(out, js_get(st, "escalate"));
	/* Members this file does not know; a failure before any page moved has none worth it. */
	json_object_foreach((json_t *)st, key, m) {
		if (!in_list(known_top, key) && (completed || moved))
			print_generic(out, key, m);
	}
	if (completed)
		print_verify(out, st);
	if (completed || verified >= 0)
		fprintf(out, "%-19s%s%s%s%s\n", "verified:", yes_no(verified),
			x && x->verify_detail ? " (" : "", x && x->verify_detail ? x->verify_detail : "",
			x && x->verify_detail ? ")" : "");
	if (x && x->guest_progress >= 0)
		fprintf(out, "%-19s%s\n", "guest progress:", yes_no(x->guest_progress));
	if (x && x->source_vm_status)
		fprintf(out, "%-19s%s\n", "source vm:", x->source_vm_status);
	if (x && x->destination_vm_status)
		fprintf(out, "%-19s%s\n", "destination vm:", x->destination_vm_status);
	if (x && x->logs)
		fprintf(out, "%-19s%s\n", "logs:", x->logs);
}
