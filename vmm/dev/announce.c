/* SPDX-License-Identifier: MIT */
/*
 * The announcer (announce.h): QEMU's RARP rounds, on a thread of its own.
 *
 * One thread per announcer, created at the first start, alive until
 * destroy; it sleeps on a CLOCK_MONOTONIC condition variable between
 * rounds. A start bumps the generation: the thread drops the schedule in
 * hand (after the round it is sending, if any) and begins at round 0.
 * stop clears `running` and waits until `sending` is false, so no send
 * function is called once it returns.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <godwit/log.h>
#include "dev/announce.h"

#define NS_PER_MS 1000000ull

struct announce_nic {
	vmm_announce_send_fn send;
	void *opaque;
	uint8_t mac[6];
	bool has_ipv4;
	uint8_t ipv4[4];
};

struct vmm_announce {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* any change below (CLOCK_MONOTONIC waits) */

	/* lock: */
	struct vmm_announce_params p;	/* validated; changed only while not running */
	struct announce_nic nics[VMM_ANNOUNCE_NICS_MAX];
	unsigned nr_nics;		/* changed only while not running */
	char side[4];			/* the thread's log side */
	uint64_t gen;			/* bumped by every start and stop */
	bool running;			/* a schedule is under way */
	bool sending;			/* the thread is in a round's send functions */
	bool exit;
	struct vmm_announce_stats stats;

	/* the creator's / destroyer's */
	pthread_t thread;
	bool thread_started;
};

void vmm_announce_params_default(struct vmm_announce_params *p)
{
	memset(p, 0, sizeof(*p));
	p->initial_ms = VMM_ANNOUNCE_INITIAL_MS_DEFAULT;
	p->max_ms = VMM_ANNOUNCE_MAX_MS_DEFAULT;
	p->rounds = VMM_ANNOUNCE_ROUNDS_DEFAULT;
	p->step_ms = VMM_ANNOUNCE_STEP_MS_DEFAULT;
}

int vmm_announce_params_check(const struct vmm_announce_params *p, char *why, size_t why_len)
{
	static const char fmt[] = "Parameter '%s' expects a value between %d and %d";

	if (!p) {
		snprintf(why, why_len, "no parameters");
		return -EINVAL;
	}
	if (p->initial_ms < 0 || p->initial_ms > VMM_ANNOUNCE_DELAY_MS_MAX) {
		snprintf(why, why_len, fmt, "announce-initial", 0, VMM_ANNOUNCE_DELAY_MS_MAX);
		return -EINVAL;
	}
	if (p->max_ms < 0 || p->max_ms > VMM_ANNOUNCE_DELAY_MS_MAX) {
		snprintf(why, why_len, fmt, "announce-max", 0, VMM_ANNOUNCE_DELAY_MS_MAX);
		return -EINVAL;
	}
	if (p->rounds < 0 || p->rounds > VMM_ANNOUNCE_ROUNDS_MAX) {
		snprintf(why, why_len, fmt, "announce-rounds", 0, VMM_ANNOUNCE_ROUNDS_MAX);
		return -EINVAL;
	}
	if (p->step_ms < VMM_ANNOUNCE_STEP_MS_MIN || p->step_ms > VMM_ANNOUNCE_STEP_MS_MAX) {
		snprintf(why, why_len, fmt, "announce-step", VMM_ANNOUNCE_STEP_MS_MIN,
			 VMM_ANNOUNCE_STEP_MS_MAX);
		return -EINVAL;
	}
	if (p->nr_interfaces > VMM_ANNOUNCE_INTERFACES_MAX) {
		snprintf(why, why_len, "at most %d interfaces", VMM_ANNOUNCE_INTERFACES_MAX);
		return -EINVAL;
	}
	for (unsigned i = 0; i < p->nr_interfaces; i++) {
		if (!memchr(p->interfaces[i], 0, VMM_ANNOUNCE_NAME_MAX) || !p->interfaces[i][0]) {
			snprintf(why, why_len, "an interface name is empty or longer than %d",
				 VMM_ANNOUNCE_NAME_MAX - 1);
			return -EINVAL;
		}
	}
	if (!memchr(p->id, 0, sizeof(p->id))) {
		snprintf(why, why_len, "id longer than %d", VMM_ANNOUNCE_NAME_MAX - 1);
		return -EINVAL;
	}
	return 0;
}

int64_t vmm_announce_delay_ms(const struct vmm_announce_params *p, unsigned n)
{
	int64_t d;

	if (n == 0)
		return 0;
	/* QEMU's qemu_announce_timer_step: initial + (rounds done - 1) * step, at most max. */
	d = p->initial_ms + (int64_t)(n - 1) * p->step_ms;
	return d < 0 || d > p->max_ms ? p->max_ms : d;
}

bool vmm_announce_params_wants(const struct vmm_announce_params *p, const char *name)
{
	if (!p->nr_interfaces)
		return true;
	for (unsigned i = 0; i < p->nr_interfaces && i < VMM_ANNOUNCE_INTERFACES_MAX; i++)
		if (name && !strncmp(p->interfaces[i], name, VMM_ANNOUNCE_NAME_MAX))
			return true;
	return false;
}

static void put_be16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}

/* The Ethernet header and the ARP header's fixed part (RFC 826): both frames share them. */
static void arp_head(uint8_t *f, const uint8_t mac[6], uint16_t ethertype, uint16_t op)
{
	memset(f, 0, VMM_ANNOUNCE_FRAME_BYTES);
	memset(f, 0xff, 6);		/* broadcast */
	memcpy(f + 6, mac, 6);
	put_be16(f + 12, ethertype);
	put_be16(f + 14, 1);		/* hardware: Ethernet */
	put_be16(f + 16, 0x0800);	/* protocol: IPv4 */
	f[18] = 6;
	f[19] = 4;
	put_be16(f + 20, op);
	memcpy(f + 22, mac, 6);		/* sender hardware address */
}

size_t vmm_announce_rarp(uint8_t frame[VMM_ANNOUNCE_FRAME_BYTES], const uint8_t mac[6])
{
	arp_head(frame, mac, VMM_ETH_P_RARP, VMM_ARP_OP_REQUEST_REV);
	/* sender protocol 0 (28..31), target hardware = mac, target protocol 0 (38..41) */
	memcpy(frame + 32, mac, 6);
	return VMM_ANNOUNCE_FRAME_BYTES;
}

size_t vmm_announce_garp(uint8_t frame[VMM_ANNOUNCE_FRAME_BYTES], const uint8_t mac[6],
			 const uint8_t ipv4[4])
{
	arp_head(frame, mac, VMM_ETH_P_ARP, VMM_ARP_OP_REQUEST);
	memcpy(frame + 28, ipv4, 4);	/* sender protocol address */
	/* target hardware 0 (32..37) */
	memcpy(frame + 38, ipv4, 4);	/* target protocol address = sender's */
	return VMM_ANNOUNCE_FRAME_BYTES;
}

/* ---- the thread ---- */

struct round_result {
	unsigned sent, eagain, failed;
};

static void count(struct round_result *r, int ret)
{
	if (ret == 0)
		r->sent++;
	else if (ret == -EAGAIN)
		r->eagain++;
	else
		r->failed++;
}

/* One round over @nics (a copy: the table may not change while running anyway). */
static void send_round(const struct announce_nic *nics, unsigned nr, struct round_result *r)
{
	uint8_t f[VMM_ANNOUNCE_FRAME_BYTES];

	for (unsigned i = 0; i < nr; i++) {
		count(r, nics[i].send(nics[i].opaque, f, vmm_announce_rarp(f, nics[i].mac)));
		if (nics[i].has_ipv4)
			count(r, nics[i].send(nics[i].opaque, f,
					       vmm_announce_garp(f, nics[i].mac, nics[i].ipv4)));
	}
}

static void deadline_after(struct timespec *ts, int64_t ms)
{
	uint64_t ns;

	clock_gettime(CLOCK_MONOTONIC, ts);
	ns = (uint64_t)ts->tv_nsec + (uint64_t)ms * NS_PER_MS;
	ts->tv_sec += (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

static void *announce_main(void *arg)
{
	struct vmm_announce *a = arg;
	struct announce_nic nics[VMM_ANNOUNCE_NICS_MAX];
	uint64_t gen = 0;
	unsigned n = 0, nr = 0;
	uint64_t sent_total = 0, eagain_total = 0;

	pthread_mutex_lock(&a->lock);
	gw_log_set_side(a->side);
	while (!a->exit) {
		struct round_result r = { 0 };
		struct timespec until;
		int64_t delay;
		int ret = 0;

		if (!a->running) {
			pthread_cond_wait(&a->cond, &a->lock);
			continue;
		}
		if (a->gen != gen) {	/* a (re)start: round 0 */
			gen = a->gen;
			n = 0;
			sent_total = eagain_total = 0;
			nr = a->nr_nics;
			memcpy(nics, a->nics, sizeof(nics));
			gw_log_set_side(a->side);
		}
		a->sending = true;
		pthread_mutex_unlock(&a->lock);
		send_round(nics, nr, &r);
		pthread_mutex_lock(&a->lock);
		a->sending = false;
		pthread_cond_broadcast(&a->cond);
		a->stats.rounds++;
		a->stats.frames_sent += r.sent;
		a->stats.frames_eagain += r.eagain;
		a->stats.frames_failed += r.failed;
		sent_total += r.sent;
		eagain_total += r.eagain;
		n++;
		delay = n < a->p.rounds ? vmm_announce_delay_ms(&a->p, n) : 0;
		gw_log(GW_LOG_INFO, "announce", "announce_round", "n=%u nics=%u sent=%u eagain=%u "
		       "failed=%u next_ms=%" PRId64, n, nr, r.sent, r.eagain, r.failed, delay);
		if (a->gen != gen)
			continue;	/* restarted or stopped during the round */
		if (n >= a->p.rounds) {
			a->running = false;
			pthread_cond_broadcast(&a->cond);
			gw_log(GW_LOG_INFO, "announce", "announce_done", "rounds=%u nics=%u sent=%" PRIu64
			       " eagain=%" PRIu64, n, nr, sent_total, eagain_total);
			continue;
		}
		deadline_after(&until, delay);
		while (ret == 0 && a->gen == gen && !a->exit)
			ret = pthread_cond_timedwait(&a->cond, &a->lock, &until);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* ---- the API ---- */

struct vmm_announce *vmm_announce_new(const struct vmm_announce_params *p)
{
	struct vmm_announce_params def;
	struct vmm_announce *a;
	pthread_condattr_t ca;
	char why[128];
	int ret;

	if (!p) {
		vmm_announce_params_default(&def);
		p = &def;
	}
	if (vmm_announce_params_check(p, why, sizeof(why))) {
		gw_log(GW_LOG_ERROR, "announce", "announce_params_refused", "why=\"%s\"", why);
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		errno = ENOMEM;
		return NULL;
	}
	a->p = *p;
	snprintf(a->side, sizeof(a->side), "---");
	ret = pthread_mutex_init(&a->lock, NULL);
	if (ret)
		goto fail_a;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	ret = pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (ret)
		goto fail_lock;
	return a;

fail_lock:
	pthread_mutex_destroy(&a->lock);
fail_a:
	free(a);
	errno = ret;
	return NULL;
}

int vmm_announce_add_nic(struct vmm_announce *a, vmm_announce_send_fn send, void *opaque,
			 const uint8_t mac[6])
{
	int ret;

	if (!send || !mac || (mac[0] & 1))
		return -EINVAL;
	pthread_mutex_lock(&a->lock);
	if (a->running) {
		ret = -EBUSY;
	} else if (a->nr_nics == VMM_ANNOUNCE_NICS_MAX) {
		ret = -ENOSPC;
	} else {
		ret = (int)a->nr_nics++;
		a->nics[ret] = (struct announce_nic){ .send = send, .opaque = opaque };
		memcpy(a->nics[ret].mac, mac, 6);
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

int vmm_announce_set_ipv4(struct vmm_announce *a, int nic, const uint8_t ipv4[4])
{
	int ret = 0;

	if (!ipv4)
		return -EINVAL;
	pthread_mutex_lock(&a->lock);
	if (nic < 0 || (unsigned)nic >= a->nr_nics) {
		ret = -EINVAL;
	} else if (a->running) {
		ret = -EBUSY;
	} else {
		a->nics[nic].has_ipv4 = true;
		memcpy(a->nics[nic].ipv4, ipv4, 4);
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

int vmm_announce_set_params(struct vmm_announce *a, const struct vmm_announce_params *p)
{
	char why[128];
	int ret;

	ret = vmm_announce_params_check(p, why, sizeof(why));
	if (ret)
		return ret;
	pthread_mutex_lock(&a->lock);
	if (a->running)
		ret = -EBUSY;
	else
		a->p = *p;
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void vmm_announce_set_log_side(struct vmm_announce *a, const char *side)
{
	pthread_mutex_lock(&a->lock);
	snprintf(a->side, sizeof(a->side), "%s", side ? side : "---");
	pthread_mutex_unlock(&a->lock);
}

/* a->lock held: the announcer's thread, idle until a start. 0 or -errno. */
static int thread_up_locked(struct vmm_announce *a)
{
	pthread_attr_t attr;
	int ret;

	if (a->thread_started)
		return 0;
	/* SCHED_OTHER even when started from the engine's SCHED_FIFO resume (thread.h). */
	pthread_attr_init(&attr);
	pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
	ret = pthread_create(&a->thread, &attr, announce_main, a);
	pthread_attr_destroy(&attr);
	if (ret) {
		gw_log(GW_LOG_ERROR, "announce", "announce_thread_failed", "err=%d", ret);
		return -ret;
	}
	a->thread_started = true;
	pthread_setname_np(a->thread, "announce");
	return 0;
}

int vmm_announce_prepare(struct vmm_announce *a)
{
	int ret;

	pthread_mutex_lock(&a->lock);
	ret = thread_up_locked(a);
	pthread_mutex_unlock(&a->lock);
	return ret;
}

int vmm_announce_start(struct vmm_announce *a)
{
	bool restart;
	int ret;

	pthread_mutex_lock(&a->lock);
	ret = thread_up_locked(a);
	if (ret) {
		pthread_mutex_unlock(&a->lock);
		return ret;
	}
	restart = a->running;
	a->gen++;
	a->stats.starts++;
	gw_log(GW_LOG_INFO, "announce", "announce_start", "nics=%u rounds=%" PRId64 " initial_ms=%"
	       PRId64 " max_ms=%" PRId64 " step_ms=%" PRId64 " id=%s restart=%d", a->nr_nics,
	       a->p.rounds, a->p.initial_ms, a->p.max_ms, a->p.step_ms, a->p.id[0] ? a->p.id : "-",
	       restart);
	if (a->p.rounds == 0) {
		a->running = false;
		gw_log(GW_LOG_INFO, "announce", "announce_done", "rounds=0 nics=%u sent=0 eagain=0",
		       a->nr_nics);
	} else {
		a->running = true;
	}
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	return 0;
}

void vmm_announce_stop(struct vmm_announce *a)
{
	bool was;

	pthread_mutex_lock(&a->lock);
	was = a->running;
	a->running = false;
	a->gen++;
	pthread_cond_broadcast(&a->cond);
	while (a->sending)
		pthread_cond_wait(&a->cond, &a->lock);
	if (was)
		gw_log(GW_LOG_INFO, "announce", "announce_stopped", "rounds_done=%" PRIu64,
		       a->stats.rounds);
	pthread_mutex_unlock(&a->lock);
}

int vmm_announce_wait(struct vmm_announce *a, uint64_t timeout_ns)
{
	struct timespec until;
	int ret = 0;

	deadline_after(&until, 0);
	until.tv_sec += (time_t)(timeout_ns / 1000000000u);
	until.tv_nsec += (long)(timeout_ns % 1000000000u);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&a->lock);
	while ((a->running || a->sending) && ret == 0)
		ret = pthread_cond_timedwait(&a->cond, &a->lock, &until);
	ret = a->running || a->sending ? -ETIMEDOUT : 0;
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void vmm_announce_get_stats(struct vmm_announce *a, struct vmm_announce_stats *out)
{
	pthread_mutex_lock(&a->lock);
	*out = a->stats;
	out->running = a->running;
	pthread_mutex_unlock(&a->lock);
}

void vmm_announce_destroy(struct vmm_announce *a)
{
	if (!a)
		return;
	vmm_announce_stop(a);
	if (a->thread_started) {
		pthread_mutex_lock(&a->lock);
		a->exit = true;
		pthread_cond_broadcast(&a->cond);
		pthread_mutex_unlock(&a->lock);
		pthread_join(a->thread, NULL);
	}
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* The VM's hooks: replaced by the VM that has NICs (announce.h). */
__attribute__((weak)) int vmm_vm_announce(struct vmm *v, const struct vmm_announce_params *p)
{
	(void)v;
	(void)p;
	return -EOPNOTSUPP;
}

__attribute__((weak)) int vmm_vm_announce_params_get(struct vmm *v, struct vmm_announce_params *out)
{
	(void)v;
	(void)out;
	return -EOPNOTSUPP;
}

__attribute__((weak)) int vmm_vm_announce_params_set(struct vmm *v,
						     const struct vmm_announce_params *p)
{
	(void)v;
	(void)p;
	return -EOPNOTSUPP;
}
