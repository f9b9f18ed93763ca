/* SPDX-License-Identifier: MIT */
/*
 * What `godwit run` checks before it makes anything: the options that go
 * together, the --incoming URL, the workload, the backend (--accel auto
 * takes the first that probes and can make this VM), and whether the RAM
 * fits this host. A refusal here leaves nothing allocated: a bad command
 * line exits 2, a VM this host cannot hold 1.
 */
#include "cli/cli.h"
#include "common/hostmem.h"

#include <string.h>

void run_backend_names(char *buf, size_t len, const char *sep)
{
	size_t at = 0;

	buf[0] = '\0';
	for (unsigned i = 0; vmm_backends[i] && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? sep : "",
				       vmm_backends[i]->name);
}

void run_config_of(const struct run_opts *o, bool dest, struct vmm_config *cfg)
{
	enum vmm_fill fill = VMM_FILL_NONE;

	vmm_fill_parse(o->fill, &fill);
	memset(cfg, 0, sizeof(*cfg));
	cfg->memory_bytes = dest && !o->memory_given ? 0 : o->memory_bytes;
	cfg->nr_vcpus = o->nr_vcpus;
	cfg->memory_file = o->memory_file;
	cfg->prealloc = o->prealloc;
	cfg->fill = dest ? VMM_FILL_NONE : fill;
	cfg->seed = o->seed;
	cfg->workload = o->workload;
	cfg->incoming = dest;
	cfg->dirty_backend = GW_DIRTY_AUTO;
	cfg->nics = o->nics;
	cfg->nr_nics = o->nr_nics;
	for (unsigned i = 0; i < o->params.nr; i++)	/* --dirty-track or --set dirty-backend= */
		if (o->params.v[i].p == GW_PARAM_DIRTY_BACKEND)
			cfg->dirty_backend = (enum gw_dirty_backend_id)o->params.v[i].value;
}

/* --accel auto: the first backend that probes and takes @cfg, each one skipped logged with why. */
static const struct vmm_backend *choose_auto(const struct vmm_config *cfg, const char *names, int *code)
{
	char why[256], refused[256] = "";

	for (unsigned i = 0; vmm_backends[i]; i++) {
		const struct vmm_backend *be = vmm_backends[i];

		why[0] = '\0';
		if (be->probe(why, sizeof(why)) == 0) {
			char probed[256];

			memcpy(probed, why, sizeof(probed));
			if (!be->check_config(cfg, why, sizeof(why))) {
				gw_log(GW_LOG_INFO, "cli", "accel", "chosen=%s reason=\"first usable of %s: %s\"",
				       be->name, names, probed);
				return be;
			}
			snprintf(refused, sizeof(refused), "%s", why);
		}
		gw_log(GW_LOG_INFO, "cli", "accel_skipped", "backend=%s reason=\"%s\"", be->name, why);
	}
	if (refused[0]) {	/* a VM no usable backend can make: the command line's fault */
		cli_usage_error("run", "%s", refused);
		*code = CLI_EXIT_USAGE;
	} else {
		cli_error("--accel auto: no usable backend (tried %s; see the accel_skipped lines)", names);
		*code = CLI_EXIT_FAIL;
	}
	return NULL;
}

const struct vmm_backend *run_choose_backend(const char *accel, const struct vmm_config *cfg, int *code)
{
	const struct vmm_backend *be;
	char why[256] = "", names[64];

	run_backend_names(names, sizeof(names), ", ");
	if (!strcmp(accel, "auto"))
		return choose_auto(cfg, names, code);
	*code = CLI_EXIT_USAGE;
	be = vmm_backend_by_name(accel);
	if (!be) {
		cli_usage_error("run", "--accel %s: this godwit has no %s backend (built: %s)", accel, accel, names);
		return NULL;
	}
	if (be->check_config(cfg, why, sizeof(why))) {
		cli_usage_error("run", "--accel %s: %s", accel, why);
		return NULL;
	}
	if (be->probe(why, sizeof(why))) {
		cli_error("--accel %s: not usable here: %s", accel, why);
		*code = CLI_EXIT_FAIL;
		return NULL;
	}
	gw_log(GW_LOG_INFO, "cli", "accel", "chosen=%s reason=\"asked for: %s\"", be->name, why);
	return be;
}

int run_memory_check(const struct run_opts *o, unsigned copies, const char *by, const char *alt,
		     const char *cmd)
{
	struct cli_host_mem h;
	char why[400];

	if (o->memory_file || cli_host_mem_read(NULL, &h))
		return 0;	/* a file's pages are its own; no figures: the kernel decides */
	if (!cli_memory_fits(&h, o->memory_bytes, copies, by, alt, why, sizeof(why)))
		return 0;
	fprintf(stderr, "godwit %s: --memory %s: %s\n", cmd, o->memory_arg ? o->memory_arg : "1G (the default)",
		why);
	return -1;
}

/* The options a destination takes its values of from the source. 0, or -1 printed. */
static int dest_options(const struct run_opts *o)
{
	const char *opt = o->fill_given ? "--fill" : o->workload ? "--workload" : o->seed_given ? "--seed" : NULL;

	if (!opt)
		return 0;
	cli_usage_error("run", "%s is a source's: a destination (--incoming) receives the guest's RAM and "
			"workload from the source; leave out %s", opt, opt);
	return -1;
}

int run_check(const struct run_opts *o, bool dest, struct vmm_config *cfg, const struct vmm_backend **be)
{
	struct vmm_workload wl;
	char why[400], by[64];
	int code;

	if (dest && dest_options(o))
		return CLI_EXIT_USAGE;
	if (dest && strcmp(o->incoming_url, "defer") && gw_url_check(o->incoming_url, true, why, sizeof(why))) {
		cli_usage_error("run", "--incoming: %s", why);
		return CLI_EXIT_USAGE;
	}
	if (vmm_workload_parse(o->workload, &wl, why, sizeof(why))) {
		cli_usage_error("run", "--workload: %s", why);
		return CLI_EXIT_USAGE;
	}
	run_config_of(o, dest, cfg);
	if (wl.ws_given && cfg->memory_bytes && wl.ws_bytes > cfg->memory_bytes) {
		char ws[32], mem[32];

		cli_usage_error("run", "--workload %s: its working set (ws=%s) is larger than the guest's "
				"--memory %s: give ws=%s or less", o->workload, gw_size_str(ws, sizeof(ws), wl.ws_bytes),
				gw_size_str(mem, sizeof(mem), cfg->memory_bytes), mem);
		return CLI_EXIT_USAGE;
	}
	snprintf(by, sizeof(by), "--%s%s allocates all of it at start", o->prealloc ? "prealloc" : "fill ",
		 o->prealloc ? "" : o->fill);
	if (cfg->memory_bytes && run_memory_check(o, o->prealloc || cfg->fill != VMM_FILL_NONE, by,
						  o->prealloc ? ", or leave out --prealloc" : ", or use --fill none",
						  "run"))
		return CLI_EXIT_FAIL;
	*be = run_choose_backend(o->accel, cfg, &code);
	return *be ? -1 : code;
}
