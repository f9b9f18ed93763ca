/* SPDX-License-Identifier: MIT */
/* QEMU's names of godwit's parameters, capabilities and states (see qemu_names.h). */
#include "common/qemu_names.h"

#include <string.h>

const struct qemu_param qemu_params[] = {
	{ "downtime-limit", GW_PARAM_DOWNTIME_LIMIT_US, 1000, QEMU_INT, "ms" },
	{ "max-bandwidth", GW_PARAM_MAX_BANDWIDTH_BPS, 1, QEMU_INT, "bytes/s" },
	{ "multifd-channels", GW_PARAM_CHANNELS, 1, QEMU_INT, "" },
	{ "multifd-compression", GW_PARAM_COMPRESS, 1, QEMU_CODEC, "" },
	{ "multifd-zstd-level", GW_PARAM_COMPRESS_LEVEL, 1, QEMU_INT, "" },
	{ "multifd-zlib-level", GW_PARAM_COMPRESS_LEVEL, 1, QEMU_INT, "" },
	{ "xbzrle-cache-size", GW_PARAM_XBZRLE_CACHE_BYTES, 1, QEMU_INT, "bytes" },
	{ "cpu-throttle-initial", GW_PARAM_CPU_THROTTLE_INITIAL, 1, QEMU_INT, "%" },
	{ "cpu-throttle-increment", GW_PARAM_CPU_THROTTLE_INCREMENT, 1, QEMU_INT, "%" },
	{ "cpu-throttle-tailslow", GW_PARAM_CPU_THROTTLE_TAILSLOW, 1, QEMU_BOOL, "" },
	{ "max-cpu-throttle", GW_PARAM_MAX_CPU_THROTTLE, 1, QEMU_INT, "%" },
	{ "throttle-trigger-threshold", GW_PARAM_THROTTLE_TRIGGER_THRESHOLD, 1, QEMU_INT, "%" },
	/* QEMU's MB are MiB (dirtylimit.c works in 1 << 20). */
	{ "vcpu-dirty-limit", GW_PARAM_DIRTY_LIMIT_BPS, 1 << 20, QEMU_INT, "MiB/s" },
	{ NULL, 0, 0, 0, NULL },
};

const struct qemu_param *qemu_param_by_name(const char *name)
{
	for (const struct qemu_param *q = qemu_params; q->name; q++)
		if (!strcmp(q->name, name))
			return q;
	return NULL;
}

const struct qemu_param *qemu_param_of(enum gw_param p)
{
	for (const struct qemu_param *q = qemu_params; q->name; q++)
		if (q->p == p)
			return q;
	return NULL;
}

const struct qemu_vmm_param_name qemu_vmm_params[] = {
	{ "announce-initial", QEMU_VMM_ANNOUNCE_INITIAL, "ms" },
	{ "announce-max", QEMU_VMM_ANNOUNCE_MAX, "ms" },
	{ "announce-rounds", QEMU_VMM_ANNOUNCE_ROUNDS, "" },
	{ "announce-step", QEMU_VMM_ANNOUNCE_STEP, "ms" },
	{ NULL, 0, NULL },
};

const struct qemu_vmm_param_name *qemu_vmm_param_by_name(const char *name)
{
	for (const struct qemu_vmm_param_name *q = qemu_vmm_params; q->name; q++)
		if (!strcmp(q->name, name))
			return q;
	return NULL;
}

const struct qemu_cap qemu_caps[] = {
	{ "events", NULL },
	{ "xbzrle", NULL },
	{ "auto-converge", NULL },
	{ "multifd", NULL },
	{ "dirty-limit", NULL },
	{ "postcopy-ram", NULL },
	{ "pause-before-switchover", NULL },
	{ NULL, NULL },
};

const struct qemu_cap *qemu_cap_by_name(const char *name)
{
	for (const struct qemu_cap *c = qemu_caps; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

const char *qemu_status_name(enum gw_status st)
{
	switch (st) {
	case GW_STATUS_NONE: return "none";
	case GW_STATUS_SETUP: return "setup";
	case GW_STATUS_ACTIVE: return "active";
	case GW_STATUS_DEVICE:
	case GW_STATUS_HANDOVER: return "device";
	case GW_STATUS_COMPLETED: return "completed";
	case GW_STATUS_POSTCOPY_ACTIVE: return "postcopy-active";
	case GW_STATUS_POSTCOPY_PAUSED: return "postcopy-paused";
	case GW_STATUS_POSTCOPY_RECOVER: return "postcopy-recover";
	case GW_STATUS_PRE_SWITCHOVER: return "pre-switchover";
	case GW_STATUS_CANCELLED: return "cancelled";
	case GW_STATUS_FAILED:
	case GW_STATUS_UNKNOWN: return "failed";
	}
	return "failed";
}

const char *qemu_runstate_name(const char *vm_status)
{
	static const struct { const char *godwit, *qemu; } map[] = {
		{ "created", "prelaunch" }, { "incoming", "inmigrate" }, { "running", "running" },
		{ "paused", "paused" }, { "postmigrate", "postmigrate" }, { "shutdown", "shutdown" },
	};

	for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(map[i].godwit, vm_status))
			return map[i].qemu;
	return "debug";
}

unsigned qemu_edit_distance(const char *a, const char *b, unsigned cap)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned row[65], i, j;

	if (lb > 64 || la > 64)
		return cap + 1;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		unsigned diag = row[0], best;

		row[0] = i;
		best = row[0];
		for (j = 1; j <= lb; j++) {
			unsigned up = row[j];
			unsigned v = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < v)
				v = up + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			diag = up;
			row[j] = v;
			if (v < best)
				best = v;
		}
		if (best > cap)
			return cap + 1;
	}
	return row[lb] > cap ? cap + 1 : row[lb];
}
