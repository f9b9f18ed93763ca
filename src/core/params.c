/* SPDX-License-Identifier: MIT */
/* The one table of parameters: names, bounds, defaults, live or setup-only. */
#include <errno.h>
#include <string.h>
#include "core/session_int.h"

static const struct gw_param_info param_table[GW_PARAM__COUNT] = {
	[GW_PARAM_DOWNTIME_LIMIT_US] = { "downtime-limit-us", 1000, 600000000, 300000, true,
		"switch over when the expected downtime fits this limit (us)" },
	[GW_PARAM_MAX_BANDWIDTH_BPS] = { "max-bandwidth-bps", 0, INT64_MAX, 0, true,
		"cap on wire bytes per second over all channels, 0 = none" },
	[GW_PARAM_CHANNELS] = { "channels", 1, GW_WIRE_MAX_CHANNELS, 1, false,
		"data connections beside the control connection" },
	[GW_PARAM_COMPRESS] = { "compress", 0, GW_CODEC__COUNT - 1, GW_CODEC_NONE, false,
		"page compression: none, zstd, lz4, zlib, isal, auto (decided per batch)" },
	[GW_PARAM_COMPRESS_LEVEL] = { "compress-level", -5, 19, 0, false,
		"codec level, 0 = the codec's default" },
	[GW_PARAM_XBZRLE_CACHE_BYTES] = { "xbzrle-cache-bytes", 0, 64ll << 30, 0, false,
		"XBZRLE cache size over all channels, 0 = off" },
	[GW_PARAM_LOCAL] = { "local", 0, 1, 0, false,
		"pass RAM file descriptors instead of copying pages (unix: only)" },
	[GW_PARAM_VERIFY] = { "verify", 0, 1, 1, false,
		"compare the RAM digests of both sides after resume (no downtime cost)" },
	[GW_PARAM_IO_TIMEOUT_MS] = { "io-timeout-ms", 100, 3600000, 10000, false,
		"a peer silent this long counts as dead" },
	[GW_PARAM_CONVERGE_TIMEOUT_MS] = { "converge-timeout-ms", 0, INT64_MAX, 0, true,
		"precopy time after which converge-policy applies, 0 = never" },
	[GW_PARAM_CONVERGE_POLICY] = { "converge-policy", 0, 2, GW_CONVERGE_CANCEL, true,
		"at the converge timeout: keep-going, cancel, force (switch over)" },
	[GW_PARAM_BATCH_PAGES] = { "batch-pages", 16, GW_WIRE_MAX_BATCH_PAGES, 128, false,
		"pages per batch; also the region size that maps pages to channels" },
	[GW_PARAM_DIRTY_BACKEND] = { "dirty-backend", 0, 3, GW_DIRTY_AUTO, false,
		"how dirty pages are tracked: auto, uffd-wp, kvm-log, kvm-ring" },
	[GW_PARAM_AUTO_CONVERGE] = { "auto-converge", 0, 1, 0, true,
		"throttle the vCPUs while the guest dirties faster than the link moves" },
	[GW_PARAM_CPU_THROTTLE_INITIAL] = { "cpu-throttle-initial", 1, 99, 20, true,
		"auto-converge: first throttle, percent" },
	[GW_PARAM_CPU_THROTTLE_INCREMENT] = { "cpu-throttle-increment", 1, 99, 10, true,
		"auto-converge: percent added at each further step" },
	[GW_PARAM_CPU_THROTTLE_TAILSLOW] = { "cpu-throttle-tailslow", 0, 1, 0, true,
		"auto-converge: steps no bigger than what the rates say is needed" },
	[GW_PARAM_MAX_CPU_THROTTLE] = { "max-cpu-throttle", 1, 99, 99, true,
		"auto-converge: the highest throttle, percent" },
	[GW_PARAM_THROTTLE_TRIGGER_THRESHOLD] = { "throttle-trigger-threshold", 1, 100, 50, true,
		"a round whose dirtied bytes exceed this percent of its sent bytes is too fast" },
	[GW_PARAM_DIRTY_LIMIT_BPS] = { "dirty-limit-bps", 0, INT64_MAX, 0, true,
		"cap on each vCPU's dirty rate, bytes/s, 0 = off" },
	[GW_PARAM_DIRTY_LIMIT_START] = { "dirty-limit-start", 0, 1, GW_DIRTY_LIMIT_ON_NO_CONVERGE, true,
		"no-converge (when precopy does not converge), start (from the start)" },
	[GW_PARAM_ROUND_MAX_MS] = { "round-max-ms", 0, 600000, 50, true,
		"harvest again after this long even mid-pass (at least 4x the harvest time), 0 = whole passes" },
	[GW_PARAM_FREE_PAGE_HINTS] = { "free-page-hints", 0, 1, 1, false,
		"skip the pages the VMM reports free (when it can: the soft balloon workload)" },
	[GW_PARAM_POSTCOPY] = { "postcopy", 0, 1, 0, false,
		"allow switching to postcopy (resume on the destination first, fetch pages on demand)" },
	[GW_PARAM_POSTCOPY_AFTER_ROUNDS] = { "postcopy-after-rounds", 0, 100000, 0, true,
		"postcopy: switch after this many precopy rounds, 0 = not by rounds" },
	[GW_PARAM_POSTCOPY_AFTER_MS] = { "postcopy-after-ms", 0, INT64_MAX, 0, true,
		"postcopy: switch after this long in precopy (ms), 0 = not by time" },
	[GW_PARAM_POSTCOPY_AUTO_ROUNDS] = { "postcopy-auto-rounds", 0, 1000, 0, true,
		"postcopy: switch when the expected downtime has not fallen by a tenth for this many rounds, 0 = off" },
	[GW_PARAM_RT_PRIORITY] = { "rt-priority", 0, 99, 0, false,
		"SCHED_FIFO priority of the threads on the critical path (switchover, control, postcopy page "
		"requests), 0 = normal scheduling: on a loaded host their wake-ups otherwise wait for a CPU" },
	[GW_PARAM_SEND_PATH] = { "send-path", 0, 4, GW_SEND_AUTO, false,
		"source: auto (= copy, measured best), copy, zerocopy (live + MSG_ZEROCOPY), live, pread (no mapping)" },
	[GW_PARAM_RECV_PATH] = { "recv-path", 0, 1, GW_RECV_AUTO, false,
		"destination: auto (into the mapping when all mapped), file (pwrite into the file)" },
	[GW_PARAM_MAX_MEMORY_BYTES] = { "max-memory-bytes", 0, INT64_MAX, 0, false,
		"destination: refuse a source with more RAM than this, 0 = no limit but the VMM's" },
	[GW_PARAM_POSTCOPY_BACKGROUND_NICE] = { "postcopy-background-nice", 0, 19, 0, false,
		"postcopy: nice of the threads that stream the pages nobody asked for (source pushers, "
		"destination data receivers), so the guest's vCPUs keep their CPUs; requests are not affected" },
	[GW_PARAM_PRECOPY_LIMIT_MS] = { "precopy-limit-ms", 0, 2592000000ll, 0, false,
		"destination: the precopy (HELLO accepted to COMPLETE) must end within this, else the migration "
		"fails; 0 = 60 s plus 1 s per 64 MiB of the RAM the source announced" },
	[GW_PARAM_PAUSE_BEFORE_SWITCHOVER] = { "pause-before-switchover", 0, 1, 0, false,
		"source: pause the VM and wait for a continue (gw_session_continue, QMP migrate-continue) "
		"before the final round; the downtime counts from that pause, a cancel resumes the VM" },
	[GW_PARAM_ESCALATE] = { "escalate", 0, 1, 0, true,
		"1 = when the expected downtime stops falling, take the next step: raise the downtime limit, "
		"auto-converge, postcopy (if allowed), then converge-policy's action" },
	[GW_PARAM_ESCALATE_DOWNTIME_MAX_US] = { "escalate-downtime-max-us", 1000, 600000000, 2000000, true,
		"escalate: the highest downtime limit its first steps raise downtime-limit-us to" },
	[GW_PARAM_ESCALATE_DOWNTIME_STEPS] = { "escalate-downtime-steps", 1, 100, 4, true,
		"escalate: equal steps from downtime-limit-us to escalate-downtime-max-us" },
	[GW_PARAM_ESCALATE_WINDOW_ROUNDS] = { "escalate-window-rounds", 1, 1000, 5, true,
		"escalate: rounds in a row whose expected downtime did not fall below 95% of the best "
		"that take the next step" },
};

static const char *const str_param_names[GW_SPARAM__COUNT] = {
	[GW_SPARAM_TLS_CREDS] = "tls-creds", [GW_SPARAM_TLS_PSK] = "tls-psk",
	[GW_SPARAM_TLS_HOSTNAME] = "tls-hostname", [GW_SPARAM_TLS_AUTHZ] = "tls-authz",
};

const char *gw_str_param_name(enum gw_str_param p)
{
	return (unsigned)p < GW_SPARAM__COUNT ? str_param_names[p] : NULL;
}

int gw_str_param_by_name(const char *name, enum gw_str_param *p)
{
	for (unsigned i = 0; name && i < GW_SPARAM__COUNT; i++) {
		if (!strcmp(str_param_names[i], name)) {
			*p = (enum gw_str_param)i;
			return 0;
		}
	}
	return -ENOENT;
}

int gw_session_set_str(struct gw_session *s, enum gw_str_param p, const char *value)
{
	int ret = 0;

	if (!s || (unsigned)p >= GW_SPARAM__COUNT || !value || strlen(value) >= GW_SPARAM_MAX_BYTES)
		return -EINVAL;
	for (const char *c = value; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return -EINVAL;	/* paths and names travel in API words: no blanks */
	pthread_mutex_lock(&s->lock);
	if (s->running)
		ret = -EBUSY;
	else
		snprintf(s->sparams[p], sizeof(s->sparams[p]), "%s", value);
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int gw_session_get_str(struct gw_session *s, enum gw_str_param p, char *buf, size_t len)
{
	if (!s || (unsigned)p >= GW_SPARAM__COUNT || !buf || !len)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	snprintf(buf, len, "%s", s->sparams[p]);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

const struct gw_param_info *gw_param_info(enum gw_param p)
{
	if ((unsigned)p >= GW_PARAM__COUNT)
		return NULL;
	return &param_table[p];
}

int gw_param_by_name(const char *name, enum gw_param *p)
{
	for (unsigned i = 0; name && i < GW_PARAM__COUNT; i++) {
		if (!strcmp(param_table[i].name, name)) {
			*p = (enum gw_param)i;
			return 0;
		}
	}
	return -ENOENT;
}

void gw_params_defaults(int64_t *values)
{
	for (unsigned i = 0; i < GW_PARAM__COUNT; i++)
		values[i] = param_table[i].def;
}

int gw_session_set(struct gw_session *s, enum gw_param p, int64_t value)
{
	const struct gw_param_info *info = gw_param_info(p);
	int ret = 0;

	if (!s || !info || value < info->min || value > info->max)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	if (s->running && !info->live)
		ret = -EBUSY;
	else
		__atomic_store_n(&s->params[p], value, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->lock);
	if (!ret && s->running)
		gw_log(GW_LOG_INFO, "param", "param_set", "name=%s value=%lld",
		       info->name, (long long)value);
	return ret;
}

int gw_session_get(const struct gw_session *s, enum gw_param p, int64_t *value)
{
	if (!s || (unsigned)p >= GW_PARAM__COUNT || !value)
		return -EINVAL;
	*value = __atomic_load_n(&s->params[p], __ATOMIC_RELAXED);
	return 0;
}

static const char *const codec_names[GW_CODEC__COUNT] = {
	[GW_CODEC_NONE] = "none", [GW_CODEC_ZSTD] = "zstd", [GW_CODEC_LZ4] = "lz4",
	[GW_CODEC_ZLIB] = "zlib", [GW_CODEC_ISAL] = "isal", [GW_CODEC_AUTO] = "auto",
};

const char *gw_codec_name(enum gw_codec_id id)
{
	return (unsigned)id < GW_CODEC__COUNT ? codec_names[id] : NULL;
}

int gw_codec_by_name(const char *name)
{
	for (unsigned i = 0; name && i < GW_CODEC__COUNT; i++)
		if (!strcmp(codec_names[i], name))
			return (int)i;
	return -ENOENT;
}
