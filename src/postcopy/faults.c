/* SPDX-License-Identifier: MIT */
/* The destination's account of postcopy faults (see postcopy/faults.h). */
#include <string.h>
#include "postcopy/faults.h"
#include "util/pi_mutex.h"

unsigned gw_pc_hist_bucket(uint64_t us)
{
	unsigned e;

	if (us < GW_PC_HIST_LINEAR)
		return (unsigned)us;
	e = 63u - (unsigned)__builtin_clzll(us);	/* >= 10 */
	if (e >= 10 + 40)
		return GW_PC_HIST_BUCKETS - 1;
	/* 64 steps between 2^e and 2^(e+1). */
	return GW_PC_HIST_LINEAR + (e - 10) * GW_PC_HIST_SUB +
	       (unsigned)((us - (1ull << e)) >> (e - 6));
}

uint64_t gw_pc_hist_value(unsigned bucket)
{
	unsigned e, sub;

	if (bucket < GW_PC_HIST_LINEAR)
		return bucket;
	e = 10 + (bucket - GW_PC_HIST_LINEAR) / GW_PC_HIST_SUB;
	sub = (bucket - GW_PC_HIST_LINEAR) % GW_PC_HIST_SUB;
	return (1ull << e) + ((uint64_t)sub << (e - 6));
}

void gw_pc_faults_init(struct gw_pc_faults *f, unsigned nr_vcpus)
{
	memset(f, 0, sizeof(*f));
	gw_mutex_init_pi(&f->lock);	/* the fault handler and the (background) receivers */
	f->nr_vcpus = nr_vcpus < GW_PC_MAX_VCPUS ? nr_vcpus : GW_PC_MAX_VCPUS;
}

void gw_pc_faults_set_vcpus(struct gw_pc_faults *f, unsigned nr_vcpus)
{
	pthread_mutex_lock(&f->lock);
	f->nr_vcpus = nr_vcpus < GW_PC_MAX_VCPUS ? nr_vcpus : GW_PC_MAX_VCPUS;
	pthread_mutex_unlock(&f->lock);
}

void gw_pc_faults_destroy(struct gw_pc_faults *f)
{
	pthread_mutex_destroy(&f->lock);
}

/* lock held: vCPU @v starts waiting at @t. */
static void vcpu_block(struct gw_pc_faults *f, int v, uint64_t t)
{
	if (v < 0 || (unsigned)v >= f->nr_vcpus || f->vcpu_since_ns[v])
		return;
	f->vcpu_since_ns[v] = t ? t : 1;
	if (++f->vcpus_blocked == f->nr_vcpus)
		f->all_since_ns = t;
}

/* lock held: vCPU @v runs again at @t. */
static void vcpu_unblock(struct gw_pc_faults *f, int v, uint64_t t)
{
	if (v < 0 || (unsigned)v >= f->nr_vcpus || !f->vcpu_since_ns[v])
		return;
	if (f->vcpus_blocked == f->nr_vcpus && t > f->all_since_ns)
		f->all_blocked_ns += t - f->all_since_ns;
	if (t > f->vcpu_since_ns[v])
		f->vcpu_blocktime_ns[v] += t - f->vcpu_since_ns[v];
	f->vcpu_since_ns[v] = 0;
	f->vcpus_blocked--;
}

void gw_pc_faults_local(struct gw_pc_faults *f, int vcpu, uint64_t t0_ns, uint64_t t1_ns)
{
	pthread_mutex_lock(&f->lock);
	f->faults++;
	f->local_faults++;
	vcpu_block(f, vcpu, t0_ns);
	vcpu_unblock(f, vcpu, t1_ns);
	pthread_mutex_unlock(&f->lock);
}

bool gw_pc_faults_wait(struct gw_pc_faults *f, int vcpu, unsigned block, uint64_t page, uint64_t t_ns)
{
	bool ok = false;

	pthread_mutex_lock(&f->lock);
	f->faults++;
	for (unsigned i = 0; i < GW_PC_MAX_WAITERS; i++) {
		struct gw_pc_waiter *w = &f->w[i];

		if (w->used)
			continue;
		*w = (struct gw_pc_waiter){ true, vcpu, block, page, t_ns };
		__atomic_store_n(&f->nr_waiting, f->nr_waiting + 1, __ATOMIC_RELAXED);	/* read unlocked as a hint */
		if (!f->oldest_hint_ns || t_ns < f->oldest_hint_ns)
			f->oldest_hint_ns = t_ns;
		vcpu_block(f, vcpu, t_ns);
		ok = true;
		break;
	}
	pthread_mutex_unlock(&f->lock);
	return ok;
}

unsigned gw_pc_faults_placed(struct gw_pc_faults *f, unsigned block, uint64_t page, uint64_t nr,
			     uint64_t t_ns)
{
	unsigned done = 0;

	if (!__atomic_load_n(&f->nr_waiting, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < GW_PC_MAX_WAITERS && f->nr_waiting; i++) {
		struct gw_pc_waiter *w = &f->w[i];
		uint64_t us;

		if (!w->used || w->block != block || w->page < page || w->page - page >= nr)
			continue;
		us = t_ns > w->t_ns ? (t_ns - w->t_ns) / 1000 : 0;
		f->hist[gw_pc_hist_bucket(us)]++;
		f->samples++;
		if (t_ns > w->t_ns && t_ns - w->t_ns > f->lat_max_ns)
			f->lat_max_ns = t_ns - w->t_ns;
		vcpu_unblock(f, w->vcpu, t_ns);
		w->used = false;
		__atomic_store_n(&f->nr_waiting, f->nr_waiting - 1, __ATOMIC_RELAXED);
		done++;
	}
	if (!f->nr_waiting)
		f->oldest_hint_ns = 0;
	pthread_mutex_unlock(&f->lock);
	return done;
}

bool gw_pc_faults_waiting(struct gw_pc_faults *f, unsigned block, uint64_t page)
{
	bool found = false;

	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < GW_PC_MAX_WAITERS && !found; i++)
		found = f->w[i].used && f->w[i].block == block && f->w[i].page == page;
	pthread_mutex_unlock(&f->lock);
	return found;
}

uint64_t gw_pc_faults_oldest_ns(struct gw_pc_faults *f, uint64_t now_ns)
{
	uint64_t oldest = 0;

	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < GW_PC_MAX_WAITERS; i++)
		if (f->w[i].used && (!oldest || f->w[i].t_ns < oldest))
			oldest = f->w[i].t_ns;
	f->oldest_hint_ns = oldest;
	pthread_mutex_unlock(&f->lock);
	return oldest && now_ns > oldest ? now_ns - oldest : 0;
}

/* lock held: the latency at quantile @q (0..1) in ns, 0 without samples. */
static uint64_t quantile_ns(const struct gw_pc_faults *f, double q)
{
	uint64_t want = (uint64_t)((double)f->samples * q), seen = 0;

	if (!f->samples)
		return 0;
	if (want >= f->samples)
		want = f->samples - 1;
	for (unsigned b = 0; b < GW_PC_HIST_BUCKETS; b++) {
		seen += f->hist[b];
		if (seen > want)
			return gw_pc_hist_value(b) * 1000;
	}
	return f->lat_max_ns;
}

void gw_pc_faults_figures(struct gw_pc_faults *f, uint64_t now_ns, struct gw_msg_pc_stats *out)
{
	pthread_mutex_lock(&f->lock);
	out->nr_vcpus = f->nr_vcpus;
	out->faults = f->faults;
	out->local_faults = f->local_faults;
	out->blocktime_ns = f->all_blocked_ns +
		(f->nr_vcpus && f->vcpus_blocked == f->nr_vcpus && now_ns > f->all_since_ns ?
		 now_ns - f->all_since_ns : 0);
	out->vcpu_blocktime_total_ns = 0;
	for (unsigned v = 0; v < f->nr_vcpus; v++) {
		uint64_t t = f->vcpu_blocktime_ns[v];

		if (f->vcpu_since_ns[v] && now_ns > f->vcpu_since_ns[v])
			t += now_ns - f->vcpu_since_ns[v];
		out->vcpu_blocktime_ns[v] = t;
		out->vcpu_blocktime_total_ns += t;
	}
	out->latency_p50_ns = quantile_ns(f, 0.50);
	out->latency_p99_ns = quantile_ns(f, 0.99);
	out->latency_max_ns = f->lat_max_ns;
	out->latency_samples = f->samples;
	pthread_mutex_unlock(&f->lock);
}
