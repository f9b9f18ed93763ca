/* SPDX-License-Identifier: MIT */
/*
 * Helpers the engine's threads call on a session: the statistics snapshot
 * (gw_session_stats, and the tables' rows: gw_session_round/channel/vcpu)
 * and the pipeline log line, CPU time, this kernel's boot
 * id, deadlines and the verify wait, and real-time priority for the threads
 * on the critical path. Nothing here changes the migration's course.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "net/admit.h"
#include "core/session_int.h"
#include "util/abi.h"

void gw_boot_id(uint8_t out[GW_WIRE_ID_BYTES])
{
	char txt[64] = "";
	unsigned n = 0;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	memset(out, 0, GW_WIRE_ID_BYTES);
	if (!f)
		return;
	if (!fgets(txt, sizeof(txt), f))
		txt[0] = 0;
	fclose(f);
	/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": 32 hex digits. */
	for (const char *p = txt; *p && n < 2 * GW_WIRE_ID_BYTES; p++) {
		int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (v < 0)
			continue;
		out[n / 2] |= (uint8_t)(n % 2 ? v : v << 4);
		n++;
	}
}

void gw_log_pipeline(struct gw_session *s)
{
	uint64_t pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED) +
			 __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED) +
			 __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
	unsigned from = s->role == GW_ROLE_SOURCE ? GW_STAGE_READ : GW_STAGE_RECV;
	unsigned to = s->role == GW_ROLE_SOURCE ? GW_STAGE_SETTLE : GW_STAGE_APPLY;
	char buf[512];
	size_t n = 0;

	for (unsigned i = from; i <= to && n < sizeof(buf); i++) {
		uint64_t ns = __atomic_load_n(&s->ctr_stage_ns[i], __ATOMIC_RELAXED);

		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s_us=%llu %s_ns_per_page=%.1f",
				      gw_stage_name((enum gw_stage)i), (unsigned long long)(ns / 1000),
				      gw_stage_name((enum gw_stage)i), pages ? (double)ns / (double)pages : 0.0);
	}
	gw_log(GW_LOG_INFO, "mig", "pipeline", "pages=%llu live_pages=%llu void_pages=%llu direct_pages=%llu "
	       "zerocopy_sends=%llu zerocopy_copied=%llu%s", (unsigned long long)pages,
	       (unsigned long long)__atomic_load_n(&s->ctr_live_pages, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_void_pages, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_direct_pages, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_zc_sends, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&s->ctr_zc_copied, __ATOMIC_RELAXED), buf);
}

uint64_t gw_verify_wait_ms(const struct gw_session *s)
{
	uint64_t ram_bytes = 0;

	for (unsigned i = 0; i < s->vm.nr_blocks; i++)
		ram_bytes += s->vm.blocks[i].size_bytes;
	return (uint64_t)gw_param(s, GW_PARAM_IO_TIMEOUT_MS) + ram_bytes / ((256u << 20) / 1000);
}

struct timespec gw_deadline_ms(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);	/* s->cond uses the monotonic clock */
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

_Static_assert(sizeof(struct gw_stats) >= GW_STATS_SIZE_VER0 &&
	       sizeof(struct gw_round_stats) >= GW_ROUND_STATS_SIZE_VER0 &&
	       sizeof(struct gw_channel_stats) >= GW_CHANNEL_STATS_SIZE_VER0 &&
	       sizeof(struct gw_vcpu_stats) >= GW_VCPU_STATS_SIZE_VER0,
	       "a public statistics struct shrank below its first version");
_Static_assert(GW_STAGE__COUNT <= GW_STATS_STAGES && GW_CODEC__COUNT <= GW_STATS_CODECS,
	       "the statistics' room for stages or codecs is full: add a field, do not grow the array");

/*
 * Every figure into the library's own struct, then out to the caller's
 * size (util/abi.h): the caller's struct may be older and smaller.
 */
int gw_session_stats(struct gw_session *s, struct gw_stats *user)
{
	struct gw_stats full, *out = &full;
	uint64_t t_start_ns;

	if (!s || !user || user->size < GW_STATS_SIZE_VER0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	*out = s->stats;
	out->status = s->status;
	out->error_code = s->err.code;
	snprintf(out->error, sizeof(out->error), "%s", s->err.msg);
	snprintf(out->error_phase, sizeof(out->error_phase), "%s", gw_phase_name(s->err.phase));
	t_start_ns = s->t_start_ns;
	if (s->role_ops->stats_locked)
		s->role_ops->stats_locked(s, out);
	out->conns_refused = s->adm_refused + (s->adm ? gw_admit_refused(s->adm) : 0);
	pthread_mutex_unlock(&s->lock);
	/* Pipeline counters: atomics that only grow, final once the channels ended. */
	for (unsigned i = 0; i < GW_STAGE__COUNT; i++)
		out->stage_ns[i] = __atomic_load_n(&s->ctr_stage_ns[i], __ATOMIC_RELAXED);
	out->live_pages = __atomic_load_n(&s->ctr_live_pages, __ATOMIC_RELAXED);
	out->void_pages = __atomic_load_n(&s->ctr_void_pages, __ATOMIC_RELAXED);
	out->direct_pages = __atomic_load_n(&s->ctr_direct_pages, __ATOMIC_RELAXED);
	out->zerocopy_sends = __atomic_load_n(&s->ctr_zc_sends, __ATOMIC_RELAXED);
	out->zerocopy_copied = __atomic_load_n(&s->ctr_zc_copied, __ATOMIC_RELAXED);
	/* Live counters (atomics) between publications. */
	if (out->status != GW_STATUS_COMPLETED && out->status != GW_STATUS_FAILED &&
	    out->status != GW_STATUS_CANCELLED && out->status != GW_STATUS_UNKNOWN &&
	    out->status != GW_STATUS_NONE) {
		out->normal_pages = __atomic_load_n(&s->ctr_normal_pages, __ATOMIC_RELAXED);
		out->duplicate_pages = __atomic_load_n(&s->ctr_zero_pages, __ATOMIC_RELAXED);
		out->xbzrle_pages = __atomic_load_n(&s->ctr_xbzrle_pages, __ATOMIC_RELAXED);
		out->normal_bytes = out->normal_pages * GW_PAGE_BYTES;
		/* The clock runs until the handover ends (completed sets the final figure). */
		if (t_start_ns)
			out->total_time_ns = gw_now_ns() - t_start_ns;
	}
	gw_abi_copy_out(user, user->size, out, sizeof(*out));
	return 0;
}

int gw_session_round(struct gw_session *s, unsigned idx, struct gw_round_stats *out)
{
	struct gw_round_stats row;
	unsigned n;

	if (!s || !out || out->size < GW_ROUND_STATS_SIZE_VER0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	n = s->stats.nr_rounds_kept;
	if (idx < n && idx < GW_STATS_ROUNDS_KEPT)
		row = s->stats_round[idx];
	pthread_mutex_unlock(&s->lock);
	if (idx >= n || idx >= GW_STATS_ROUNDS_KEPT)
		return -ENOENT;
	gw_abi_copy_out(out, out->size, &row, sizeof(row));
	return 0;
}

int gw_session_channel(struct gw_session *s, unsigned idx, struct gw_channel_stats *out)
{
	struct gw_channel_stats row = { .size = sizeof(row), .channel = idx };
	unsigned n;

	if (!s || !out || out->size < GW_CHANNEL_STATS_SIZE_VER0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	/* The destination reads its live channels; the source's publish copies them. */
	if (s->role_ops->channels_locked)
		s->role_ops->channels_locked(s);
	n = s->role == GW_ROLE_DEST && s->chans ? s->nr_channels : s->stats.nr_channels;
	if (idx < n && idx < GW_WIRE_MAX_CHANNELS) {
		row.bytes = s->stats_chan_bytes[idx];
		for (unsigned c = 0; c < GW_CODEC__COUNT; c++)
			row.codec_bytes[c] = s->stats_chan_codec_bytes[idx][c];
	}
	pthread_mutex_unlock(&s->lock);
	if (idx >= n || idx >= GW_WIRE_MAX_CHANNELS)
		return -ENOENT;
	gw_abi_copy_out(out, out->size, &row, sizeof(row));
	return 0;
}

int gw_session_vcpu(struct gw_session *s, unsigned idx, struct gw_vcpu_stats *out)
{
	struct gw_vcpu_stats row = { .size = sizeof(row), .vcpu = idx };
	unsigned n;

	if (!s || !out || out->size < GW_VCPU_STATS_SIZE_VER0)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	n = s->stats.postcopy_nr_vcpus;
	if (idx < n && idx < GW_WIRE_MAX_VCPUS)
		row.postcopy_blocktime_ns = s->stats_vcpu_blocktime_ns[idx];
	pthread_mutex_unlock(&s->lock);
	if (idx >= n || idx >= GW_WIRE_MAX_VCPUS)
		return -ENOENT;
	gw_abi_copy_out(out, out->size, &row, sizeof(row));
	return 0;
}

void gw_thread_critical(struct gw_session *s, const char *what)
{
	struct sched_param sp = { .sched_priority = (int)gw_param(s, GW_PARAM_RT_PRIORITY) };
	int ret;

	if (!sp.sched_priority)
		return;
	ret = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (ret)
		gw_log(GW_LOG_WARN, "mig", "rt_priority_refused", "thread=%s priority=%d err=\"%s\"", what,
		       sp.sched_priority, strerror(ret));
}

void gw_thread_normal(struct gw_session *s)
{
	struct sched_param sp = { .sched_priority = 0 };

	if (gw_param(s, GW_PARAM_RT_PRIORITY))
		(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
}

void gw_thread_background(struct gw_session *s, const char *what)
{
	int nice_value = (int)gw_param(s, GW_PARAM_POSTCOPY_BACKGROUND_NICE);
	struct sched_param sp = { .sched_priority = 0 };

	if (!nice_value)
		return;
	/* Created by a thread that may hold rt-priority: nice means nothing under SCHED_FIFO. */
	(void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice_value))
		gw_log(GW_LOG_WARN, "mig", "background_nice_refused", "thread=%s nice=%d err=\"%s\"", what,
		       nice_value, strerror(errno));
}

/* CPU time of this process, for the statistics. */
void gw_cpu_times(uint64_t *user_ns, uint64_t *sys_ns)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000;
	*sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000ull + (uint64_t)ru.ru_stime.tv_usec * 1000;
}

/* @in, the VMM's, into s->vm with its own copy of the blocks. 0 or -EINVAL / -E2BIG. */
int gw_session_take_vm_info(struct gw_session *s, const struct gw_vm_info *in)
{
	struct gw_vm_info vm;
	int ret = gw_vm_info_copy_in(&vm, in);

	if (ret)
		return ret;
	if (vm.nr_blocks)	/* may be s->vm_blocks itself (setup_ram filled them in place) */
		memmove(s->vm_blocks, vm.blocks, vm.nr_blocks * sizeof(vm.blocks[0]));
	vm.blocks = s->vm_blocks;
	s->vm = vm;
	return 0;
}
