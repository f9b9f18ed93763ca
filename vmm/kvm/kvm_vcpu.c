/* SPDX-License-Identifier: MIT */
/*
 * vCPU threads: the KVM_RUN loop and its exits (serial port, paravirtual
 * port, dirty ring full, failures), and the kick that interrupts KVM_RUN.
 *
 * Kick: the signal KVM_KICK_SIGNAL, handled by every vCPU thread; the
 * handler sets its thread's kvm_run->immediate_exit, so a kick that lands
 * just before KVM_RUN is not lost (KVM_RUN then returns -EINTR at once)
 * and one that lands during KVM_RUN interrupts it. The pause protocol is
 * in kvm_pause.h.
 *
 * Pacing (a workload rate): the dirty and verify guests call GW_PV_PACE
 * after each batch with the pages they wrote; the vCPU thread sleeps until
 * the vCPU's share of the rate allows them (interruptible by a pause; a
 * pause is not owed back). The guest cannot read wall time cheaply; the VMM
 * can. The same call applies the engine's brakes, as the soft VM does:
 * throttle (auto-converge: after (100 - pct)% of a 10 ms slice the vCPU
 * sleeps to the slice's end) and dirty limit (a token bucket of bytes per
 * vCPU, 10 ms of the rate deep, a page's worth per page written). They act
 * at batch boundaries only: a guest that writes without calling (idle,
 * compute) is not held.
 *
 * Dirty ring full: write the VM's eventfd (the kvm-ring tracker reaps on
 * it) and retry KVM_RUN after at most 1 ms, until the ring has been reset.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <godwit/log.h>
#include "thread.h"
#include "kvm/kvm_internal.h"
#include "kvm/kvm_mmio_dev.h"

#define KVM_KICK_SIGNAL (SIGRTMIN + 5)
#define RING_FULL_RETRY_NS 1000000ull
#define PACE_MAX_DEBT_NS 1000000000ull	/* rate accounting restarts after 1 s behind */
#define WARN_PORTS_MAX 4
#define THROTTLE_SLICE_NS 10000000ull

static __thread struct kvm_run *kick_run;
static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

static void kick_handler(int sig)
{
	(void)sig;
	if (kick_run)
		kick_run->immediate_exit = 1;
}

static void kick_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = kick_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(KVM_KICK_SIGNAL, &sa, NULL);
}

/* Called by kvm_pause (under its lock) for every vCPU index. */
void kvm_kick(void *opaque, unsigned idx)
{
	struct kvm_vm *vm = opaque;
	struct kvm_vcpu *v = &vm->vcpus[idx];

	if (v->started && atomic_load(&v->alive))
		pthread_kill(v->thread, KVM_KICK_SIGNAL);
}

static void record_panic(struct kvm_vm *vm)
{
	pthread_mutex_lock(&vm->base.lock);
	vm->report.panics++;
	pthread_mutex_unlock(&vm->base.lock);
}

/* ---- serial port: a line at a time into the log ---- */

static void serial_flush(struct kvm_vcpu *v)
{
	if (!v->serial_len)
		return;
	v->serial[v->serial_len] = '\0';
	gw_log(GW_LOG_INFO, "kvm", "serial", "vcpu=%u line=\"%s\"", v->index, v->serial);
	v->serial_len = 0;
}

static void serial_io(struct kvm_vcpu *v, struct kvm_run *run, uint8_t *data)
{
	uint16_t reg = run->io.port - GW_SERIAL_PORT;

	if (run->io.direction == KVM_EXIT_IO_IN) {
		/* LSR: transmitter empty and idle; everything else reads 0. */
		memset(data, 0, (size_t)run->io.size * run->io.count);
		if (reg == 5)
			data[0] = 0x60;
		return;
	}
	if (reg != 0)
		return;
	for (uint32_t i = 0; i < run->io.count; i++) {
		char c = (char)data[i * run->io.size];

		if (c == '\n' || v->serial_len == KVM_SERIAL_LINE_MAX - 1) {
			serial_flush(v);
			if (c == '\n')
				continue;
		}
		if (c >= 0x20 && c < 0x7f && c != '"')
			v->serial[v->serial_len++] = c;
	}
}

/* ---- paravirtual port ---- */

/* Throttle: past (100 - pct)% of the current 10 ms slice, sleep to its end. */
static void throttle(struct kvm_vcpu *v)
{
	unsigned pct = atomic_load_explicit(&v->vm->base.throttle_pct, memory_order_relaxed);
	uint64_t now = kvm_pause_now_ns(), run_ns;

	if (!pct) {
		v->slice_start_ns = 0;
		return;
	}
	run_ns = THROTTLE_SLICE_NS * (100 - pct) / 100;
	if (!v->slice_start_ns || now - v->slice_start_ns >= THROTTLE_SLICE_NS) {
		v->slice_start_ns = now;
		return;
	}
	if (now - v->slice_start_ns < run_ns)
		return;
	kvm_pause_sleep_until(&v->vm->pause, v->slice_start_ns + THROTTLE_SLICE_NS);
	v->slice_start_ns = kvm_pause_now_ns();
}

/* Dirty limit: take @pages' worth of tokens, sleep while the bucket is short. */
static void dirty_limit(struct kvm_vcpu *v, uint64_t pages)
{
	uint64_t bps = atomic_load_explicit(&v->vm->base.dirty_limit_bps, memory_order_relaxed);
	uint64_t now = kvm_pause_now_ns(), wait_ns;

	if (vmm_dirty_bucket_take(&v->bucket, bps, now, pages * GW_GUEST_PAGE_BYTES,
				  GW_GUEST_PAGE_BYTES, &wait_ns)) {
		kvm_pause_sleep_until(&v->vm->pause, now + wait_ns);
		vmm_dirty_bucket_slept(&v->bucket, kvm_pause_now_ns());
	}
}

static void pace(struct kvm_vcpu *v, uint64_t pages)
{
	struct kvm_vm *vm = v->vm;
	uint64_t now = kvm_pause_now_ns(), due;

	throttle(v);
	dirty_limit(v, pages);
	if (!vm->pace_rate_pps)
		return;
	now = kvm_pause_now_ns();
	if (!v->pace_base_ns || now > v->pace_base_ns + PACE_MAX_DEBT_NS +
	    v->pace_pages * 1000000000ull / vm->pace_rate_pps) {
		v->pace_base_ns = now;	/* first call, or far behind: start over */
		v->pace_pages = 0;
	}
	v->pace_pages += pages;
	due = v->pace_base_ns + v->pace_pages * 1000000000ull / vm->pace_rate_pps;
	if (due > now)
		kvm_pause_sleep_until(&vm->pause, due);
}

static uint32_t pv_call(struct kvm_vcpu *v, unsigned cmd)
{
	struct kvm_vm *vm = v->vm;
	const struct gw_vcpu_area *a = kvm_vcpu_area(vm, v->index);
	uint64_t arg[4];

	memcpy(arg, (const void *)a->args, sizeof(arg));	/* the guest wrote them before the call */
	switch (cmd) {
	case GW_PV_HELLO:
		if (!v->hello_seen)
			gw_log(GW_LOG_INFO, "kvm", "guest_started", "vcpu=%u guest=%s", v->index, vm->guest);
		v->hello_seen = true;
		return GW_GUEST_ABI_VERSION;
	case GW_PV_PACE:
		pace(v, arg[0]);
		return 0;
	case GW_PV_VERIFY_RESULT:
		gw_log(arg[0] ? GW_LOG_ERROR : GW_LOG_INFO, "kvm", "guest_check",
		       "vcpu=%u ok=%d pages_checked=%" PRIu64 " first_bad_page=%" PRIu64,
		       v->index, !arg[0], arg[2], arg[0] ? arg[1] : 0);
		pthread_mutex_lock(&vm->base.lock);
		if (arg[0])
			vm->report.guest_checks_bad++;
		else
			vm->report.guest_checks_ok++;
		pthread_mutex_unlock(&vm->base.lock);
		return 0;
	case GW_PV_DONE:
		gw_log(GW_LOG_INFO, "kvm", "guest_done", "vcpu=%u result=%#" PRIx64, v->index, arg[0]);
		pthread_mutex_lock(&vm->base.lock);
		vm->report.done = true;
		vm->report.result = arg[0];
		pthread_mutex_unlock(&vm->base.lock);
		return 0;
	case GW_PV_MIGRATIONS:
		return (uint32_t)vm->migrations;	/* set before the vCPUs start */
	case GW_PV_PANIC:
		gw_log(GW_LOG_ERROR, "kvm", "guest_exception", "vcpu=%u vector=%" PRIu64
		       " rip=%#" PRIx64 " error=%#" PRIx64, v->index, arg[0], arg[1], arg[2]);
		record_panic(vm);
		return 0;
	default:
		return GW_PV_ENOSYS;	/* free-page hints and later calls */
	}
}

static void io_exit(struct kvm_vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	uint16_t port = run->io.port;

	if (port >= GW_SERIAL_PORT && port < GW_SERIAL_PORT + 8) {
		serial_io(v, run, data);
	} else if (port >= GW_PV_PORT_BASE && port < GW_PV_PORT_BASE + GW_PV_PORT_COUNT &&
		   run->io.direction == KVM_EXIT_IO_IN && run->io.size == 4 && run->io.count == 1) {
		uint32_t r = pv_call(v, port - GW_PV_PORT_BASE);

		memcpy(data, &r, 4);
	} else {
		if (run->io.direction == KVM_EXIT_IO_IN)
			memset(data, 0xff, (size_t)run->io.size * run->io.count);
		if (v->warned_ports++ < WARN_PORTS_MAX)
			gw_log(GW_LOG_WARN, "kvm", "unhandled_io", "vcpu=%u port=%#x dir=%s size=%u",
			       v->index, port, run->io.direction == KVM_EXIT_IO_IN ? "in" : "out",
			       run->io.size);
	}
}

static void log_regs(struct kvm_vcpu *v, const char *event, const char *what)
{
	struct kvm_regs regs;

	memset(&regs, 0, sizeof(regs));
	ioctl(v->fd, KVM_GET_REGS, &regs);
	gw_log(GW_LOG_ERROR, "kvm", event, "vcpu=%u what=\"%s\" rip=%#llx rsp=%#llx", v->index,
	       what, (unsigned long long)regs.rip, (unsigned long long)regs.rsp);
	record_panic(v->vm);
}

/* One exit. 0: run again; -1: this vCPU cannot go on. */
static int handle_exit(struct kvm_vcpu *v)
{
	struct kvm_run *run = v->run;
	struct kvm_vm *vm = v->vm;
	char what[96];

	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		io_exit(v);
		return 0;
	case KVM_EXIT_HLT:		/* not with the in-kernel LAPIC; harmless */
	case KVM_EXIT_IRQ_WINDOW_OPEN:
	case KVM_EXIT_INTR:
		return 0;
	case KVM_EXIT_MMIO:
		if (kvm_mmio_exit(vm, run))
			return 0;
		if (!run->mmio.is_write)
			memset(run->mmio.data, 0xff, sizeof(run->mmio.data));
		if (v->warned_ports++ < WARN_PORTS_MAX)
			gw_log(GW_LOG_WARN, "kvm", "unhandled_mmio", "vcpu=%u gpa=%#llx", v->index,
			       (unsigned long long)run->mmio.phys_addr);
		return 0;
	case KVM_EXIT_DIRTY_RING_FULL:
		pthread_mutex_lock(&vm->base.lock);
		vm->report.dirty_ring_full_exits++;
		pthread_mutex_unlock(&vm->base.lock);
		if (vm->ring_full_efd >= 0) {
			uint64_t one = 1;

			if (write(vm->ring_full_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
				gw_log(GW_LOG_WARN, "kvm", "ring_full_notify", "err=%d", errno);
		}
		kvm_pause_sleep_until(&vm->pause, kvm_pause_now_ns() + RING_FULL_RETRY_NS);
		return 0;
	case KVM_EXIT_SHUTDOWN:
		log_regs(v, "vcpu_shutdown", "triple fault");
		return -1;
	case KVM_EXIT_FAIL_ENTRY:
		snprintf(what, sizeof(what), "entry failed, reason %#llx",
			 (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		log_regs(v, "vcpu_failed", what);
		return -1;
	case KVM_EXIT_INTERNAL_ERROR:
		snprintf(what, sizeof(what), "internal error, suberror %u", run->internal.suberror);
		log_regs(v, "vcpu_failed", what);
		return -1;
	case KVM_EXIT_SYSTEM_EVENT:
		snprintf(what, sizeof(what), "system event %u", run->system_event.type);
		log_regs(v, "vcpu_stopped", what);
		return -1;
	default:
		snprintf(what, sizeof(what), "exit reason %u", run->exit_reason);
		log_regs(v, "vcpu_failed", what);
		return -1;
	}
}

static void *vcpu_main(void *arg)
{
	struct kvm_vcpu *v = arg;
	struct kvm_vm *vm = v->vm;
	sigset_t set;

	kick_run = v->run;
	atomic_store(&v->tid, (int)syscall(SYS_gettid));
	sigemptyset(&set);
	sigaddset(&set, KVM_KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	/* Made ahead (kvm_vcpus_start(vm, true)): parked, before any KVM_RUN, until the first resume. */
	{
		bool parked = false;

		if (kvm_pause_requested(&vm->pause) && kvm_pause_point(&vm->pause, &parked))
			goto out;
		if (parked)
			v->run->immediate_exit = 0;	/* a kick while parked; never 0 otherwise (kvm_pause.h) */
	}
	for (;;) {
		bool parked;

		/* Never store 0 here: that could erase a kick (kvm_pause.h). */
		if (kvm_pause_requested(&vm->pause))
			v->run->immediate_exit = 1;
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno != EINTR && errno != EAGAIN) {
				gw_log(GW_LOG_ERROR, "kvm", "vcpu_failed", "vcpu=%u KVM_RUN: %s", v->index,
				       strerror(errno));
				record_panic(vm);
				break;
			}
			if (kvm_pause_point(&vm->pause, &parked))
				break;
			if (parked) {
				v->run->immediate_exit = 0;
				v->pace_base_ns = 0;	/* a pause is not owed back */
				v->slice_start_ns = 0;
				v->bucket.tokens_ns = 0;
			}
			continue;
		}
		if (handle_exit(v) < 0)
			break;
	}
out:
	serial_flush(v);
	atomic_store(&v->tid, 0);
	atomic_store(&v->alive, false);
	kvm_pause_leave(&vm->pause);
	return NULL;
}

/*
 * Threads for every vCPU not started yet. @parked (a destination making its
 * vCPUs ahead): under kvm_pause_hold, so they park at once and the first
 * start only releases them: creating a thread costs ~60-100 us here, four
 * of them 0.2-0.4 ms of the downtime. Otherwise the threads made ahead
 * are released here.
 */
int kvm_vcpus_start(struct kvm_vm *vm, bool parked)
{
	unsigned nr = vm->base.nr_vcpus > vm->vcpus_ahead ? vm->base.nr_vcpus : vm->vcpus_ahead;
	pthread_attr_t attr;
	sigset_t block, old;
	int ret = 0;

	if (parked) {
		kvm_pause_hold(&vm->pause);
		vm->vcpus_parked = true;
	}

	pthread_once(&kick_once, kick_install);
	/* Threads start with the kick blocked; each unblocks it once kick_run is set. */
	sigemptyset(&block);
	sigaddset(&block, KVM_KICK_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	vmm_thread_attr_normal(&attr);	/* whatever the caller runs (the engine's rt-priority) */
	for (unsigned i = 0; i < nr && !ret; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		if (v->started)
			continue;
		atomic_store(&v->alive, true);
		kvm_pause_join(&vm->pause);	/* before the thread exists: a pause waits for it */
		ret = -pthread_create(&v->thread, &attr, vcpu_main, v);
		if (ret) {
			atomic_store(&v->alive, false);
			kvm_pause_leave(&vm->pause);
			break;
		}
		vmm_thread_name(v->thread, "vcpu%u", i);
		v->started = true;
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!parked && !ret && vm->vcpus_parked) {
		vm->vcpus_parked = false;
		kvm_pause_resume_all(&vm->pause);
	}
	return ret;
}

void kvm_vcpus_stop(struct kvm_vm *vm)
{
	unsigned nr = vm->base.nr_vcpus > vm->vcpus_ahead ? vm->base.nr_vcpus : vm->vcpus_ahead;

	kvm_pause_stop_all(&vm->pause);
	for (unsigned i = 0; i < nr; i++) {
		struct kvm_vcpu *v = &vm->vcpus[i];

		if (!v->started)
			continue;
		pthread_join(v->thread, NULL);
		v->started = false;
	}
}
