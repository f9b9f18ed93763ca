/* SPDX-License-Identifier: MIT */
/*
 * Invariant of the pause/kick/acknowledge protocol (vmm/kvm/kvm_pause.h),
 * driven by stand-in vCPU threads shaped like the KVM vCPU loop: when
 * kvm_pause_all() returns, no vCPU thread is running "guest code" and none
 * makes progress until kvm_pause_resume_all(); every pause returns (no
 * lost kick), whether a thread was busy, halted (waiting with the kick
 * signal unblocked only inside the wait, as KVM_RUN does), handling an exit
 * or sleeping in pacing (some halts last a minute: only a kick ends them,
 * so a lost kick trips the time bound); threads that end (leave) never
 * block a pause; stop ends every thread; after a resume every thread runs
 * again, also when the next pause comes before a parked thread woke up.
 * The threads start under kvm_pause_hold, as a destination's vCPUs made
 * ahead do: each parks before its first run and none enters its guest
 * until the first resume. A job run while every thread is parked
 * (kvm_pause_run_parked) runs each item exactly once, on parked threads or
 * the controller, before it returns, and wakes no thread into its guest.
 * 2000 cycles with random timing.
 * No KVM needed.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "kvm/kvm_pause.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define NR 5
#define CYCLES 2000
#define KICK_SIGNAL (SIGRTMIN + 5)

struct fake_vcpu {
	unsigned idx;
	pthread_t thr;
	atomic_bool alive;
	volatile sig_atomic_t imm;	/* immediate_exit: the handler and the thread set it */
	atomic_uint_fast64_t work;	/* "guest" progress */
	atomic_uint_fast64_t entries;	/* fake_run calls that entered the "guest" */
	atomic_bool in_guest;		/* inside the busy part of fake_run */
	uint64_t leave_at;		/* leaves once work reaches it (0: never) */
	uint64_t seed;
};

static struct kvm_pause pause_ctl;
static struct fake_vcpu vcpus[NR];
static __thread struct fake_vcpu *self;

#define JOB_ITEMS 16
static atomic_uint job_runs[JOB_ITEMS];
static atomic_uint job_by_vcpus;	/* items a parked thread ran */

static void job_item(void *opaque, unsigned item)
{
	(void)opaque;
	atomic_fetch_add(&job_runs[item], 1);
	if (self)
		atomic_fetch_add(&job_by_vcpus, 1);
	if (item % 4 == 0)	/* some items take a while, so parked threads wake and share */
		nanosleep(&(struct timespec){ 0, 50000 }, NULL);
}

/* A job while every thread is parked: each item once, all done on return. */
static void check_job(unsigned cycle)
{
	for (unsigned i = 0; i < JOB_ITEMS; i++)
		atomic_store(&job_runs[i], 0);
	kvm_pause_run_parked(&pause_ctl, job_item, NULL, JOB_ITEMS);
	for (unsigned i = 0; i < JOB_ITEMS; i++)
		TEST_CHECK(atomic_load(&job_runs[i]) == 1, "cycle %u: job item %u ran %u times", cycle, i,
			   atomic_load(&job_runs[i]));
}

static void on_kick(int sig)
{
	(void)sig;
	if (self)
		self->imm = 1;
}

static void kick(void *opaque, unsigned idx)
{
	(void)opaque;
	if (atomic_load(&vcpus[idx].alive))
		pthread_kill(vcpus[idx].thr, KICK_SIGNAL);
}

static uint64_t rnd(struct fake_vcpu *v)
{
	v->seed ^= v->seed << 13;
	v->seed ^= v->seed >> 7;
	v->seed ^= v->seed << 17;
	return v->seed;
}

/* KVM_RUN: -EINTR when kicked (or asked to exit at once), else 0 (an exit). */
static int fake_run(struct fake_vcpu *v)
{
	sigset_t block, none;
	struct timespec ts = { 0, (long)(rnd(v) % 300000) };
	int r;

	sigemptyset(&block);
	sigaddset(&block, KICK_SIGNAL);
	sigemptyset(&none);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	if (v->imm) {
		pthread_sigmask(SIG_UNBLOCK, &block, NULL);
		return -EINTR;
	}
	atomic_fetch_add(&v->entries, 1);
	if (rnd(v) % 3 == 0) {
		/*
		 * Halted in the kernel: the signal is unblocked only inside the
		 * wait. One halt in 8 lasts a minute: only a kick ends it.
		 */
		if (rnd(v) % 8 == 0)
			ts.tv_sec = 60;
		r = ppoll(NULL, 0, &ts, &none);
		pthread_sigmask(SIG_UNBLOCK, &block, NULL);
		return r < 0 ? -EINTR : 0;
	}
	pthread_sigmask(SIG_UNBLOCK, &block, NULL);
	atomic_store(&v->in_guest, true);
	for (unsigned i = 0, n = (unsigned)(rnd(v) % 20000); i < n; i++) {
		if (v->imm) {
			atomic_store(&v->in_guest, false);
			return -EINTR;
		}
		atomic_fetch_add(&v->work, 1);
	}
	atomic_store(&v->in_guest, false);
	return 0;
}

static void *vcpu_main(void *arg)
{
	struct fake_vcpu *v = arg;
	sigset_t set;

	self = v;
	sigemptyset(&set);
	sigaddset(&set, KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	{
		bool parked = false;	/* as vcpu_main: started under a hold, parked before any run */

		if (kvm_pause_requested(&pause_ctl) && kvm_pause_point(&pause_ctl, &parked))
			goto out;
		if (parked)
			v->imm = 0;
	}
	for (;;) {
		bool parked;

		if (kvm_pause_requested(&pause_ctl))
			v->imm = 1;
		if (fake_run(v) == -EINTR) {
			if (kvm_pause_point(&pause_ctl, &parked))
				break;
			if (parked)
				v->imm = 0;
			continue;
		}
		if (v->leave_at && atomic_load(&v->work) >= v->leave_at)
			break;
		if (rnd(v) % 4 == 0)	/* pacing: sleep between batches */
			kvm_pause_sleep_until(&pause_ctl, kvm_pause_now_ns() + rnd(v) % 500000);
	}
out:
	atomic_store(&v->alive, false);
	kvm_pause_leave(&pause_ctl);
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
	fprintf(stderr, "time bound: a pause or stop never returned\n");
	_exit(1);
}

int main(void)
{
	struct sigaction sa;
	uint64_t before[NR], entered[NR];
	unsigned leavers = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_kick;
	sigaction(KICK_SIGNAL, &sa, NULL);
	signal(SIGALRM, on_alarm);
	alarm(100);
	TEST_ASSERT(kvm_pause_init(&pause_ctl, kick, NULL) == 0, "init");
	kvm_pause_all(&pause_ctl);		/* no member: returns at once */
	kvm_pause_resume_all(&pause_ctl);
	kvm_pause_set_vcpus(&pause_ctl, NR);
	kvm_pause_hold(&pause_ctl);	/* the threads park at their start */
	for (unsigned i = 0; i < NR; i++) {
		struct fake_vcpu *v = &vcpus[i];

		v->idx = i;
		v->seed = 0x9e3779b97f4a7c15ull * (i + 1);
		v->leave_at = i == NR - 1 ? 3000000 : 0;	/* one thread leaves midway */
		atomic_store(&v->alive, true);
		kvm_pause_join(&pause_ctl);
		TEST_ASSERT(pthread_create(&v->thr, NULL, vcpu_main, v) == 0, "thread");
	}
	for (;;) {		/* every one parks (bounded by the alarm) */
		unsigned parked;

		pthread_mutex_lock(&pause_ctl.lock);
		parked = pause_ctl.nr_parked;
		pthread_mutex_unlock(&pause_ctl.lock);
		if (parked == NR)
			break;
		sched_yield();
	}
	nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	check_job(0);		/* the destination's load, on threads made ahead */
	for (unsigned i = 0; i < NR; i++)
		TEST_CHECK(atomic_load(&vcpus[i].entries) == 0 && atomic_load(&vcpus[i].work) == 0,
			   "vCPU %u ran under the hold", i);
	kvm_pause_resume_all(&pause_ctl);
	for (unsigned c = 0; c < CYCLES; c++) {
		struct timespec ts = { 0, (long)(c % 7) * 100000 };

		if (c % 3 == 1)		/* otherwise pause again at once: a parked thread may not be awake yet */
			nanosleep(&ts, NULL);
		kvm_pause_all(&pause_ctl);
		for (unsigned i = 0; i < NR; i++) {
			TEST_CHECK(!atomic_load(&vcpus[i].in_guest), "cycle %u: vCPU %u in guest while paused", c, i);
			before[i] = atomic_load(&vcpus[i].work);
			entered[i] = atomic_load(&vcpus[i].entries);
		}
		if (c % 50 == 0) {
			ts.tv_nsec = 2000000;
			nanosleep(&ts, NULL);
		}
		if (c % 10 == 0)	/* the source's state save, on its paused threads */
			check_job(c);
		for (unsigned i = 0; i < NR; i++)
			TEST_CHECK(atomic_load(&vcpus[i].work) == before[i], "cycle %u: vCPU %u progressed while paused",
				   c, i);
		kvm_pause_resume_all(&pause_ctl);
		if (c % 2 == 0)		/* and every thread enters its guest again (bounded by the alarm) */
			for (unsigned i = 0; i < NR; i++)
				while (atomic_load(&vcpus[i].alive) && atomic_load(&vcpus[i].entries) == entered[i])
					sched_yield();
	}
	for (unsigned i = 0; i < NR; i++)
		leavers += !atomic_load(&vcpus[i].alive);
	kvm_pause_stop_all(&pause_ctl);
	for (unsigned i = 0; i < NR; i++)
		pthread_join(vcpus[i].thr, NULL);
	TEST_CHECK(pause_ctl.nr_members == 0 && pause_ctl.nr_parked == 0, "members %u parked %u after stop",
		   pause_ctl.nr_members, pause_ctl.nr_parked);
	printf("%u cycles, %u thread(s) left early, %llu pauses, %u job items run by parked threads\n",
	       CYCLES, leavers, (unsigned long long)pause_ctl.nr_pauses, atomic_load(&job_by_vcpus));
	kvm_pause_destroy(&pause_ctl);
	TEST_EXIT();
}
