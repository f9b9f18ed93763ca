/* SPDX-License-Identifier: MIT */
/* Option sets shared by the godwit subcommands, error printing, the parameter list. */
#include "cli/cli.h"
#include "common/cli_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "common/qemu_names.h"
#include "vmm.h"

void cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "godwit%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see 'godwit%s%s --help')\n", cmd ? " " : "", cmd ? cmd : "");
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("godwit: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_repeated(const char *cmd, const char *opt, const char *first, const char *again)
{
	cli_usage_error(cmd, "%s given twice ('%s', then '%s'): give it once", opt, first, again);
	return -1;
}

void cli_bad_option(const char *cmd, int ret, char **argv)
{
	const char *opt = argv[optind - 1];

	if (ret == ':') {
		cli_usage_error(cmd, "option %s needs a value", opt);
	} else if (optopt && optopt < 256) {
		cli_usage_error(cmd, "unknown option -%c", optopt);
	} else if (optopt) {
		/* A long option given a value it does not take: --local=1. */
		cli_usage_error(cmd, "option %s takes no value", opt);
	} else {
		cli_usage_error(cmd, "unknown option %s", opt);
	}
}

/* A string parameter from an option. 0, or -1 with the error printed. */
static int put_str_checked(struct cli_params *ps, enum gw_str_param p, const char *value,
			   const char *cmd, const char *opt)
{
	if (!value[0] || cli_params_put_str(ps, p, value)) {
		cli_usage_error(cmd, "%s: '%s' is empty, too long or holds blanks", opt, value);
		return -1;
	}
	return 0;
}

/* --tls-creds, --tls-psk, --tls-hostname, --tls-authz into @ps. 0, or -1 printed. */
static int tls_opt_apply(struct cli_params *ps, int id, const char *arg, const char *cmd)
{
	static const struct { int id; enum gw_str_param p; const char *opt; } map[] = {
		{ OPT_TLS_CREDS, GW_SPARAM_TLS_CREDS, "--tls-creds" },
		{ OPT_TLS_PSK, GW_SPARAM_TLS_PSK, "--tls-psk" },
		{ OPT_TLS_HOSTNAME, GW_SPARAM_TLS_HOSTNAME, "--tls-hostname" },
		{ OPT_TLS_AUTHZ, GW_SPARAM_TLS_AUTHZ, "--tls-authz" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].id == id)
			return put_str_checked(ps, map[i].p, arg, cmd, map[i].opt);
	return 1;
}

/* Put @value for @p after checking the parameter's bounds. */
static int put_checked(struct cli_params *ps, enum gw_param p, int64_t value,
		       const char *cmd, const char *opt)
{
	const struct gw_param_info *pi = gw_param_info(p);

	if (!pi) {
		cli_usage_error(cmd, "%s: parameter unknown to this engine", opt);
		return -1;
	}
	if (value < pi->min || value > pi->max) {
		cli_usage_error(cmd, "%s: out of range: it sets %s, which takes %" PRId64 " to %" PRId64
				" (this is %" PRId64 ")", opt, pi->name, pi->min, pi->max, value);
		return -1;
	}
	if (cli_params_put(ps, p, value)) {
		cli_usage_error(cmd, "too many parameter settings");
		return -1;
	}
	return 0;
}

static int apply_set(struct cli_params *ps, const char *arg, const char *cmd, const char *opt)
{
	const char *eq = strchr(arg, '=');
	char err[256], name[64];
	enum gw_str_param sp;
	enum gw_param p;
	int64_t v;

	if (eq && (size_t)(eq - arg) < sizeof(name)) {
		memcpy(name, arg, (size_t)(eq - arg));
		name[eq - arg] = 0;
		if (!gw_str_param_by_name(name, &sp))
			return put_str_checked(ps, sp, eq + 1, cmd, opt);
	}
	if (cli_parse_param(arg, &p, &v, err, sizeof(err))) {
		cli_usage_error(cmd, "%s: %s", opt, err);
		return -1;
	}
	return put_checked(ps, p, v, cmd, opt);
}

void run_opts_init(struct run_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->memory_bytes = 1ull << 30;
	o->nr_vcpus = 1;
	o->accel = "auto";
	o->fill = "none";
	o->seed = 1;
}

/* The VM's options of `run` (CLI_RUN_VM_OPTS but --log-level). 0, 1 not one of them, -1 bad. */
static int run_vm_opt_apply(struct run_opts *o, int id, const char *arg, const char *cmd)
{
	enum vmm_fill fill;
	int64_t v;
	int ret;

	switch (id) {
	case OPT_MEMORY:
		ret = cli_parse_size(arg, &o->memory_bytes);
		if (ret || o->memory_bytes == 0 || o->memory_bytes % 4096) {
			cli_usage_error(cmd, "--memory: bad size '%s'%s", arg,
					ret == -ERANGE ? " (too large)" :
					!ret ? " (must be a non-zero multiple of 4K)" : "");
			return -1;
		}
		o->memory_given = true;
		o->memory_arg = arg;
		return 0;
	case OPT_VCPUS:
		if (cli_parse_int(arg, 1, 64, &v)) {
			cli_usage_error(cmd, "--vcpus: expected 1..64, got '%s'", arg);
			return -1;
		}
		o->nr_vcpus = (unsigned)v;
		return 0;
	case OPT_ACCEL:
		if (strcmp(arg, "kvm") && strcmp(arg, "soft") && strcmp(arg, "auto")) {
			cli_usage_error(cmd, "--accel: expected kvm, soft or auto, got '%s'", arg);
			return -1;
		}
		o->accel = arg;
		return 0;
	case OPT_WORKLOAD:
		if (!*arg || strpbrk(arg, " \t\n")) {
			cli_usage_error(cmd, "--workload: bad spec '%s'", arg);
			return -1;
		}
		o->workload = arg;
		return 0;
	case OPT_FILL:
		if (vmm_fill_parse(arg, &fill)) {
			cli_usage_error(cmd, "--fill: expected zero, mix, random, text or none, got '%s'",
					arg);
			return -1;
		}
		o->fill = arg;
		o->fill_given = true;
		return 0;
	case OPT_SEED:
		if (cli_parse_int(arg, 0, INT64_MAX, &v)) {
			cli_usage_error(cmd, "--seed: expected a non-negative integer, got '%s'", arg);
			return -1;
		}
		o->seed = (uint64_t)v;
		o->seed_given = true;
		return 0;
	case OPT_MEMORY_FILE:
		o->memory_file = arg;
		return 0;
	case OPT_PREALLOC:
		o->prealloc = true;
		return 0;
	case OPT_DIRTY_TRACK: {
		/*
		 * The dirty-backend parameter, given where the VM is created: a
		 * KVM VM enables its dirty ring (kvm-ring) or not (kvm-log) then.
		 */
		char set[64];

		snprintf(set, sizeof(set), "dirty-backend=%s", arg);
		return apply_set(&o->params, set, cmd, "--dirty-track");
	}
	default:
		return 1;
	}
}

int run_opt_apply(struct run_opts *o, int id, const char *arg, const char *cmd)
{
	switch (id) {
	case OPT_API:
		o->api_path = arg;
		return 0;
	case OPT_QMP:
		o->qmp_path = arg;
		return 0;
	case OPT_INCOMING:
		if (!*arg || strpbrk(arg, " \t\n")) {
			cli_usage_error(cmd, "--incoming: bad URL '%s' (tcp:HOST:PORT, unix:PATH, rdma:HOST:PORT or defer)", arg);
			return -1;
		}
		if (o->incoming_url)
			return cli_repeated(cmd, "--incoming", o->incoming_url, arg);
		o->incoming_url = arg;
		return 0;
	case OPT_SET:
		return apply_set(&o->params, arg, cmd, "--set");
	case OPT_LOG_LEVEL:
		if (strcmp(arg, "error") && strcmp(arg, "warn") && strcmp(arg, "info") &&
		    strcmp(arg, "debug")) {
			cli_usage_error(cmd, "--log-level: expected error, warn, info or debug, got '%s'",
					arg);
			return -1;
		}
		o->log_level = arg;
		return 0;
	case OPT_EXIT_AFTER_MIGRATE:
		o->exit_after_migrate = true;
		return 0;
	case OPT_NIC: {
		char why[128] = "";

		if (o->nr_nics >= RUN_MAX_NICS) {
			cli_usage_error(cmd, "--nic: at most %u NICs", RUN_MAX_NICS);
			return -1;
		}
		if (virtio_net_parse_nic(arg, &o->nics[o->nr_nics], why, sizeof(why))) {
			cli_usage_error(cmd, "--nic: bad spec '%s': %s", arg, why);
			return -1;
		}
		o->nr_nics++;
		return 0;
	}
	case OPT_TLS_CREDS:
	case OPT_TLS_PSK:
	case OPT_TLS_HOSTNAME:
	case OPT_TLS_AUTHZ:
		return tls_opt_apply(&o->params, id, arg, cmd);
	case OPT_MAX_MEMORY: {
		uint64_t bytes;

		if (cli_parse_size(arg, &bytes) || !bytes || bytes > INT64_MAX) {
			cli_usage_error(cmd, "--max-memory: bad size '%s'", arg);
			return -1;
		}
		o->max_memory_given = true;
		return put_checked(&o->params, GW_PARAM_MAX_MEMORY_BYTES, (int64_t)bytes, cmd, "--max-memory");
	}
	default:
		return run_vm_opt_apply(o, id, arg, cmd);
	}
}

/*
 * --postcopy-after auto|ROUNDS|MS: "auto" switches when the expected
 * downtime has not fallen for 3 rounds, a plain number after that many
 * precopy rounds, a duration (with ms or s) after that long. Implies
 * --postcopy.
 */
#define CLI_POSTCOPY_AUTO_ROUNDS 3
static int postcopy_after_apply(struct migrate_opts *o, const char *arg, const char *cmd)
{
	size_t n = strlen(arg);
	uint64_t ns;
	int64_t v;

	if (put_checked(&o->params, GW_PARAM_POSTCOPY, 1, cmd, "--postcopy-after"))
		return -1;
	if (!strcmp(arg, "auto"))
		return put_checked(&o->params, GW_PARAM_POSTCOPY_AUTO_ROUNDS, CLI_POSTCOPY_AUTO_ROUNDS, cmd,
				   "--postcopy-after");
	if (n && arg[n - 1] >= '0' && arg[n - 1] <= '9') {
		if (cli_parse_int(arg, 1, 100000, &v)) {
			cli_usage_error(cmd, "--postcopy-after: bad round count '%s'", arg);
			return -1;
		}
		return put_checked(&o->params, GW_PARAM_POSTCOPY_AFTER_ROUNDS, v, cmd, "--postcopy-after");
	}
	if (cli_parse_duration(arg, 1000000, &ns) || ns < 1000000) {
		cli_usage_error(cmd, "--postcopy-after: expected auto, a round count or a duration "
				"(e.g. 2000ms, 2s), got '%s'", arg);
		return -1;
	}
	return put_checked(&o->params, GW_PARAM_POSTCOPY_AFTER_MS, (int64_t)(ns / 1000000), cmd, "--postcopy-after");
}

/* --on-timeout: the convergence policy. */
static int on_timeout_apply(struct migrate_opts *o, const char *arg, const char *cmd)
{
	int64_t v;

	if (!strcmp(arg, "cancel"))
		v = GW_CONVERGE_CANCEL;
	else if (!strcmp(arg, "force"))
		v = GW_CONVERGE_FORCE;
	else if (!strcmp(arg, "keep-going"))
		v = GW_CONVERGE_KEEP_GOING;
	else {
		cli_usage_error(cmd, "--on-timeout: expected cancel, force or keep-going, got '%s'", arg);
		return -1;
	}
	o->on_timeout_given = true;
	return put_checked(&o->params, GW_PARAM_CONVERGE_POLICY, v, cmd, "--on-timeout");
}

/*
 * The migration parameters an option sets in one uniform way: a flag (a
 * fixed value), a rate (bytes/s with K/M/G suffixes) or a duration (a plain
 * number is milliseconds) converted to the parameter's unit. The hint ends
 * the option's error message.
 */
enum param_opt_kind { PO_FLAG, PO_RATE, PO_DURATION };

static const struct param_opt {
	int id;
	enum gw_param p;
	const char *opt;
	enum param_opt_kind kind;
	int64_t value;			/* PO_FLAG: the value set; PO_DURATION: ns per unit of @p */
	const char *hint;		/* PO_RATE, PO_DURATION: what the value may be */
} param_opts[] = {
	{ OPT_LOCAL, GW_PARAM_LOCAL, "--local", PO_FLAG, 1, NULL },
	{ OPT_NO_VERIFY, GW_PARAM_VERIFY, "--no-verify", PO_FLAG, 0, NULL },
	{ OPT_AUTO_CONVERGE, GW_PARAM_AUTO_CONVERGE, "--auto-converge", PO_FLAG, 1, NULL },
	{ OPT_DIRTY_LIMIT_START, GW_PARAM_DIRTY_LIMIT_START, "--dirty-limit-start", PO_FLAG, 1, NULL },
	{ OPT_POSTCOPY, GW_PARAM_POSTCOPY, "--postcopy", PO_FLAG, 1, NULL },
	{ OPT_MAX_BANDWIDTH, GW_PARAM_MAX_BANDWIDTH_BPS, "--max-bandwidth", PO_RATE, 0,
	  "bytes/s, K/M/G suffixes" },
	{ OPT_DIRTY_LIMIT, GW_PARAM_DIRTY_LIMIT_BPS, "--dirty-limit", PO_RATE, 0,
	  "bytes/s per vCPU, K/M/G suffixes" },
	{ OPT_DOWNTIME_LIMIT, GW_PARAM_DOWNTIME_LIMIT_US, "--downtime-limit", PO_DURATION, 1000,
	  "milliseconds, or with us/ms/s" },
	{ OPT_CONVERGE_TIMEOUT, GW_PARAM_CONVERGE_TIMEOUT_MS, "--converge-timeout", PO_DURATION, 1000000,
	  "milliseconds, or with ms/s" },
};

/* @po's value from @arg into *@v. 0, or -1 with the error printed. */
static int param_opt_value(const struct param_opt *po, const char *arg, const char *cmd, int64_t *v)
{
	uint64_t u;

	switch (po->kind) {
	case PO_FLAG:
		*v = po->value;
		return 0;
	case PO_RATE:
		if (cli_parse_rate(arg, &u) || u > INT64_MAX) {
			cli_usage_error(cmd, "%s: bad rate '%s' (%s)", po->opt, arg, po->hint);
			return -1;
		}
		*v = (int64_t)u;
		return 0;
	case PO_DURATION:
		if (cli_parse_duration(arg, 1000000, &u) || u / (uint64_t)po->value > INT64_MAX) {
			cli_usage_error(cmd, "%s: bad duration '%s' (%s)", po->opt, arg, po->hint);
			return -1;
		}
		*v = (int64_t)(u / (uint64_t)po->value);
		return 0;
	}
	return -1;
}

/* --compress ALG[:LEVEL]: the codec and its level. */
static int compress_apply(struct cli_params *ps, const char *arg, const char *cmd)
{
	enum gw_codec_id codec;
	int64_t v;
	int ret;

	ret = cli_parse_codec(arg, &codec, &v);
	if (ret) {
		cli_usage_error(cmd, "--compress: %s '%s' (e.g. zstd, zstd:3, lz4, zlib, isal, none, auto)",
				ret == -ENOENT ? "unknown codec" : "bad spec", arg);
		return -1;
	}
	if (put_checked(ps, GW_PARAM_COMPRESS, codec, cmd, "--compress"))
		return -1;
	return put_checked(ps, GW_PARAM_COMPRESS_LEVEL, v, cmd, "--compress");
}

/* --xbzrle[=CACHE_SIZE]: the cache size, CLI_XBZRLE_DEFAULT_BYTES without one. */
static int xbzrle_apply(struct cli_params *ps, const char *arg, const char *cmd)
{
	uint64_t u = CLI_XBZRLE_DEFAULT_BYTES;

	if (arg && (cli_parse_size(arg, &u) || u > INT64_MAX)) {
		cli_usage_error(cmd, "--xbzrle: bad cache size '%s'", arg);
		return -1;
	}
	return put_checked(ps, GW_PARAM_XBZRLE_CACHE_BYTES, (int64_t)u, cmd, "--xbzrle");
}

/* The parameters of a migration (CLI_MIGRATE_PARAM_OPTS). 0, 1 not one of them, -1 bad. */
static int migrate_param_opt_apply(struct migrate_opts *o, int id, const char *arg,
				   const char *cmd)
{
	int64_t v;

	for (size_t i = 0; i < sizeof(param_opts) / sizeof(param_opts[0]); i++) {
		const struct param_opt *po = &param_opts[i];

		if (po->id != id)
			continue;
		if (param_opt_value(po, arg, cmd, &v))
			return -1;
		return put_checked(&o->params, po->p, v, cmd, po->opt);
	}
	switch (id) {
	case OPT_CHANNELS:
		if (cli_parse_int(arg, 1, INT32_MAX, &v)) {
			cli_usage_error(cmd, "--channels: expected a positive integer, got '%s'", arg);
			return -1;
		}
		return put_checked(&o->params, GW_PARAM_CHANNELS, v, cmd, "--channels");
	case OPT_COMPRESS:
		return compress_apply(&o->params, arg, cmd);
	case OPT_XBZRLE:
		return xbzrle_apply(&o->params, arg, cmd);
	case OPT_ON_TIMEOUT:
		return on_timeout_apply(o, arg, cmd);
	case OPT_POSTCOPY_AFTER:
		return postcopy_after_apply(o, arg, cmd);
	case OPT_TLS_CREDS:
	case OPT_TLS_PSK:
	case OPT_TLS_HOSTNAME:
		return tls_opt_apply(&o->params, id, arg, cmd);
	case OPT_SET:
		return apply_set(&o->params, arg, cmd, "--set");
	default:
		return 1;
	}
}

int migrate_opt_apply(struct migrate_opts *o, int id, const char *arg, const char *cmd)
{
	switch (id) {
	case OPT_TO:
		if (!*arg || strpbrk(arg, " \t\n")) {
			cli_usage_error(cmd, "--to: bad URL '%s' (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)", arg);
			return -1;
		}
		if (o->to)
			return cli_repeated(cmd, "--to", o->to, arg);
		o->to = arg;
		return 0;
	case OPT_DETACH:
		o->detach = true;
		return 0;
	case OPT_JSON:
		o->json = true;
		return 0;
	case OPT_CANCEL:
		o->cancel = true;
		return 0;
	case OPT_PROGRESS:
		return cli_parse_progress(arg, &o->progress, cmd);
	case OPT_TIMELINE:
		o->timeline = arg;
		return 0;
	case OPT_INCOMING_URL:
		if (!*arg || strpbrk(arg, " \t\n")) {
			cli_usage_error(cmd, "--incoming: bad URL '%s' (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)", arg);
			return -1;
		}
		if (o->incoming)
			return cli_repeated(cmd, "--incoming", o->incoming, arg);
		o->incoming = arg;
		return 0;
	case OPT_START_POSTCOPY:
		o->start_postcopy = true;
		return 0;
	case OPT_RESUME:
		o->resume = true;
		return 0;
	case OPT_RECOVER:
		if (!*arg || strpbrk(arg, " \t\n")) {
			cli_usage_error(cmd, "--recover: bad URL '%s' (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)", arg);
			return -1;
		}
		if (o->recover)
			return cli_repeated(cmd, "--recover", o->recover, arg);
		o->recover = arg;
		return 0;
	case OPT_RESOLVE:
		if (strcmp(arg, "source") && strcmp(arg, "destination")) {
			cli_usage_error(cmd, "--resolve takes 'source' or 'destination' (where the VM runs)");
			return -1;
		}
		o->resolve = arg;
		return 0;
	default:
		return migrate_param_opt_apply(o, id, arg, cmd);
	}
}

int migrate_opts_check(const struct migrate_opts *o, bool starting, const char *cmd)
{
	bool timeout = cli_params_value(&o->params, GW_PARAM_CONVERGE_TIMEOUT_MS, 0) > 0;

	if (starting && o->on_timeout_given && !timeout) {
		cli_usage_error(cmd, "--on-timeout says what happens when --converge-timeout expires, and no "
				"timeout is given: add --converge-timeout MS, or leave out --on-timeout");
		return -1;
	}
	return 0;
}

/* "1000..600000000" ("0.." without a bound), or the value names of parameter @p. */
static void param_values(enum gw_param p, const struct gw_param_info *pi, char *buf, size_t len)
{
	cli_param_value_names(p, buf, len);
	if (buf[0])
		return;
	if (pi->max == INT64_MAX)
		snprintf(buf, len, "%" PRId64 "..", pi->min);
	else
		snprintf(buf, len, "%" PRId64 "..%" PRId64, pi->min, pi->max);
}

void cli_print_params(FILE *out)
{
	char values[96], def[32];
	int p;

	fprintf(out, "Parameters (--set NAME=VALUE; 'live' ones may change while migrating;\n"
		"a QEMU name is an alias whose value is in QEMU's unit):\n");
	fprintf(out, "  %-26s %-5s %-30s %-11s %s\n", "name", "when", "values", "default", "QEMU name");
	for (p = 0; p < GW_PARAM__COUNT; p++) {
		const struct gw_param_info *pi = gw_param_info((enum gw_param)p);
		const struct qemu_param *q = qemu_param_of((enum gw_param)p);
		const char *dn;

		if (!pi || !pi->name)
			continue;
		param_values((enum gw_param)p, pi, values, sizeof(values));
		dn = cli_param_value_name((enum gw_param)p, pi->def);
		if (dn)
			snprintf(def, sizeof(def), "%s", dn);
		else
			snprintf(def, sizeof(def), "%" PRId64, pi->def);
		fprintf(out, "  %-26s %-5s %-30s %-11s %s%s%s%s\n", pi->name, pi->live ? "live" : "setup",
			values, def, q ? q->name : "-", q && q->unit[0] ? " (" : "",
			q && q->unit[0] ? q->unit : "", q && q->unit[0] ? ")" : "");
		fprintf(out, "      %s\n", pi->help ? pi->help : "");
	}
	fprintf(out, "  %-22s %-5s %s\n", "tls-creds", "setup", "x509 directory, QEMU's layout (TLS 1.3)");
	fprintf(out, "  %-22s %-5s %s\n", "tls-psk", "setup", "pre-shared keys file, QEMU's keys.psk");
	fprintf(out, "  %-22s %-5s %s\n", "tls-hostname", "setup", "source: name in the destination's certificate");
	fprintf(out, "  %-22s %-5s %s\n", "tls-authz", "setup", "destination: client names accepted, NAME[,NAME]");
}

int cli_parse_progress(const char *arg, enum cli_progress *out, const char *cmd)
{
	if (!strcmp(arg, "auto"))
		*out = CLI_PROGRESS_AUTO;
	else if (!strcmp(arg, "always"))
		*out = CLI_PROGRESS_ALWAYS;
	else if (!strcmp(arg, "never"))
		*out = CLI_PROGRESS_NEVER;
	else {
		cli_usage_error(cmd, "--progress: expected auto, always or never, got '%s'", arg);
		return -1;
	}
	return 0;
}

int run_opts_check_nics(const struct run_opts *o, const char *cmd)
{
	struct vmm_workload wl;
	char err[128];

	if (!o->workload || vmm_workload_parse(o->workload, &wl, err, sizeof(err)) ||
	    !vmm_workload_needs_nic(&wl) || o->nr_nics)
		return 0;
	if (strcmp(cmd, "run"))
		cli_usage_error(cmd, "--workload %s drives the guest's NICs, and %s gives the VM none "
				"(use godwit run --nic)", o->workload, cmd);
	else
		cli_usage_error(cmd, "--workload %s drives the guest's NICs: give at least one "
				"--nic tap=IFNAME", o->workload);
	return -1;
}
