/* SPDX-License-Identifier: MIT */
/*
 * The soft VM's lifecycle: memfd (or file) RAM and worker threads running
 * a workload.
 *
 *   created --start/resume--> running <--pause/resume--> paused
 *   paused --set_postmigrate--> postmigrate (never runs again)
 *   incoming --setup_ram, load_state, resume--> running
 *   any --destroy--> shutdown
 *
 * The first resume after a migration runs a checkable workload's check of
 * every page (dirty, verify, balloon) before the vCPUs start, on a thread of its own: it is guest
 * work after resume, not part of the engine's downtime.
 *
 * Threads: see struct soft_vm (soft_internal.h).
 */
#include <errno.h>
#include <time.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/log.h>
#include "fill.h"
#include "lifecycle.h"
#include "soft/soft_internal.h"

#define FILL_THREADS 2

/* The configuration a VM can be made of; 0 or -EINVAL with a reason. */
static int config_check(const struct vmm_config *cfg, char *err, size_t err_len)
{
	if (cfg->nr_vcpus < 1 || cfg->nr_vcpus > SOFT_MAX_VCPUS) {
		snprintf(err, err_len, "vcpus must be 1..%d, not %u", SOFT_MAX_VCPUS, cfg->nr_vcpus);
		return -EINVAL;
	}
	if (cfg->memory_bytes % SOFT_PAGE_BYTES || cfg->memory_bytes > SOFT_MAX_RAM_BYTES ||
	    (!cfg->memory_bytes && !cfg->incoming)) {
		snprintf(err, err_len, "memory must be a non-zero multiple of %u bytes, at most %llu",
			 SOFT_PAGE_BYTES, SOFT_MAX_RAM_BYTES);
		return -EINVAL;
	}
	if ((unsigned)cfg->fill > VMM_FILL_TEXT) {
		snprintf(err, err_len, "unknown fill");
		return -EINVAL;
	}
	return 0;
}

/* A VM with no RAM yet, or NULL (ENOMEM). */
/* vCPU sleeps are timed waits on the VM's cond against gw_now_ns() (monotonic). */
static void cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

static struct soft_vm *vm_alloc(const struct vmm_config *cfg)
{
	struct soft_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	pthread_mutex_init(&vm->ctl, NULL);
	pthread_mutex_init(&vm->lock, NULL);
	pthread_mutex_init(&vm->hint_lock, NULL);
	cond_init_monotonic(&vm->cond);
	vm->info.size = sizeof(vm->info);
	vm->info.blocks = vm->blocks;
	vm->info.kvm_vm_fd = -1;
	vm->fill = cfg->incoming ? VMM_FILL_NONE : cfg->fill;
	vm->seed = cfg->seed;
	vm->nr_vcpus = cfg->nr_vcpus;
	for (unsigned i = 0; i < SOFT_MAX_VCPUS; i++) {
		vm->vcpus[i].vm = vm;
		vm->vcpus[i].index = i;
	}
	vm->prealloc = cfg->prealloc;
	return vm;
}

static void vm_release(struct soft_vm *vm)
{
	soft_ram_free(vm);
	free(vm->memory_file);
	pthread_mutex_destroy(&vm->ctl);
	pthread_mutex_destroy(&vm->lock);
	pthread_mutex_destroy(&vm->hint_lock);
	pthread_cond_destroy(&vm->cond);
	free(vm);
}

/* The first RAM block, filled. 0 or -errno with a reason. */
static int vm_ram_create(struct soft_vm *vm, uint64_t memory_bytes, char *reason,
			 size_t reason_len)
{
	uint64_t t0, ns;
	bool fresh;
	int ret;

	ret = soft_ram_add(vm, "ram0", 0, memory_bytes, -1, 0, &fresh, reason, reason_len);
	if (ret < 0)
		return ret;
	t0 = gw_now_ns();
	ret = vmm_fill_ram(&vm->info, vm->fill, vm->seed, fresh, FILL_THREADS);
	if (ret < 0) {
		snprintf(reason, reason_len, "fill: %s", strerror(-ret));
		return ret;
	}
	vm->init_fill = vm->fill;
	vm->init_seed = vm->seed;
	vm->init_known = fresh || vm->fill != VMM_FILL_NONE;
	if (vm->fill == VMM_FILL_NONE)
		return 0;
	ns = gw_now_ns() - t0;
	gw_log(GW_LOG_INFO, "soft", "ram_filled", "fill=%s bytes=%" PRIu64 " ms=%.1f rate_bps=%.0f",
	       vmm_fill_name(vm->fill), memory_bytes, ns / 1e6,
	       ns ? memory_bytes * 1e9 / ns : 0.0);
	return 0;
}

struct soft_vm *soft_vm_create(const struct vmm_config *cfg, char *err, size_t err_len)
{
	struct soft_vm *vm;
	char reason[SOFT_MSG_MAX] = "";
	int ret;

	if (!cfg) {
		errno = EINVAL;
		return NULL;
	}
	ret = config_check(cfg, err, err_len);
	vm = ret ? NULL : vm_alloc(cfg);
	if (!vm) {
		errno = ret ? -ret : ENOMEM;
		return NULL;
	}
	if (cfg->memory_file) {
		vm->memory_file = strdup(cfg->memory_file);
		ret = vm->memory_file ? 0 : -ENOMEM;
	}
	if (ret == 0)
		ret = vmm_workload_parse(cfg->workload, &vm->wl, reason, sizeof(reason));
	if (ret == 0 && cfg->memory_bytes)
		ret = vm_ram_create(vm, cfg->memory_bytes, reason, sizeof(reason));
	if (ret < 0) {
		snprintf(err, err_len, "%s", reason[0] ? reason : strerror(-ret));
		vm_release(vm);
		errno = -ret;
		return NULL;
	}
	soft_run_layout(vm);
	atomic_store(&vm->state, cfg->incoming ? VMM_INCOMING : VMM_CREATED);
	gw_log(GW_LOG_INFO, "soft", "vm_created",
	       "memory_bytes=%" PRIu64 " vcpus=%u fill=%s workload=%s incoming=%d",
	       cfg->memory_bytes, vm->nr_vcpus, vmm_fill_name(vm->fill), vm->spec,
	       cfg->incoming);
	return vm;
}

void soft_vm_destroy(struct soft_vm *vm)
{
	if (!vm)
		return;
	pthread_mutex_lock(&vm->ctl);
	soft_vm_join_post_check(vm);
	soft_vcpus_stop(vm);
	atomic_store(&vm->state, VMM_SHUTDOWN);
	soft_ram_free(vm);
	pthread_mutex_unlock(&vm->ctl);
	vm_release(vm);
}

enum vmm_state soft_vm_state(const struct soft_vm *vm)
{
	return (enum vmm_state)atomic_load(&vm->state);
}

void soft_vm_workload(const struct soft_vm *vm, char *buf, size_t len)
{
	struct soft_vm *m = (struct soft_vm *)vm;	/* lock only */

	pthread_mutex_lock(&m->lock);
	snprintf(buf, len, "%s", vm->spec);
	pthread_mutex_unlock(&m->lock);
}

uint64_t soft_vm_progress(const struct soft_vm *vm)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		sum += atomic_load_explicit(&vm->vcpus[i].progress, memory_order_relaxed);
	return sum;
}

/* ---- the first start ---- */

/* A checkable workload's first act after a migration: check every page. */
static void post_migration_check(struct soft_vm *vm)
{
	char msg[SOFT_MSG_MAX] = "";
	uint64_t t0 = gw_now_ns();
	int ret = soft_check_verify(vm, msg, sizeof(msg));

	if (ret < 0 && ret != -EIO)
		snprintf(msg, sizeof(msg), "check could not run: %s", strerror(-ret));
	gw_log(ret == 0 ? GW_LOG_INFO : GW_LOG_ERROR, "soft", "post_migration_check",
	       "result=%s ms=%.1f msg=\"%s\"", ret == 0 ? "ok" : "failed",
	       (gw_now_ns() - t0) / 1e6, msg);
	pthread_mutex_lock(&vm->lock);
	vm->post_check = ret == 0 ? 1 : -1;
	snprintf(vm->post_msg, sizeof(vm->post_msg), "%s", msg);
	pthread_mutex_unlock(&vm->lock);
}

/*
 * Started by the first resume after a migration: the check is guest work
 * done after resume (like a real guest re-reading its memory), so it runs
 * here and not inside the engine's resume callback, i.e. not in downtime.
 * The vCPUs start when it is done. Holders of ctl join this thread before
 * touching the vCPUs; it never takes ctl itself.
 */
static void *post_check_main(void *arg)
{
	struct soft_vm *vm = arg;
	int ret;

	gw_log_set_side("dst");
	post_migration_check(vm);
	ret = soft_vcpus_start(vm, soft_run_vcpu);
	if (ret)
		gw_log(GW_LOG_ERROR, "soft", "vcpus_start_failed", "err=%d", ret);
	return NULL;
}

void soft_vm_join_post_check(struct soft_vm *vm)
{
	if (vm->post_thread_started) {
		pthread_join(vm->post_thread, NULL);
		vm->post_thread_started = false;
	}
}

/*
 * ctl held, state incoming, state loaded: run (checkable workloads: check
 * first, in a thread; under postcopy the check waits for every page).
 */
static int first_resume_after_migration(struct soft_vm *vm)
{
	int ret;

	if (vmm_workload_checkable(&vm->wl) && !atomic_load(&vm->postcopy_incomplete)) {
		atomic_store(&vm->state, VMM_RUNNING);
		if (vmm_thread_start(&vm->post_thread, post_check_main, vm) == 0) {
			vm->post_thread_started = true;
			return 0;
		}
		post_migration_check(vm);	/* no thread: check inline */
	}
	ret = soft_vcpus_start(vm, soft_run_vcpu);
	atomic_store(&vm->state, ret == 0 ? VMM_RUNNING : VMM_INCOMING);
	return ret;
}

int soft_vm_start_first(struct soft_vm *vm)
{
	int ret;

	if (soft_vm_state(vm) == VMM_INCOMING)
		return vm->loaded ? first_resume_after_migration(vm) : -EINVAL;
	if (!vm->info.nr_blocks)
		return -EINVAL;
	ret = soft_vcpus_start(vm, soft_run_vcpu);
	if (ret == 0)
		atomic_store(&vm->state, VMM_RUNNING);
	return ret;
}

int soft_vm_start(struct soft_vm *vm)
{
	int ret = 0;

	pthread_mutex_lock(&vm->ctl);
	switch (soft_vm_state(vm)) {
	case VMM_CREATED:
	case VMM_INCOMING:
		ret = soft_vm_start_first(vm);
		break;
	case VMM_RUNNING:
		break;
	default:
		ret = -EINVAL;
		break;
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/* ---- after a migration ---- */

void soft_vm_set_postmigrate(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->ctl);
	soft_vm_join_post_check(vm);
	if (soft_vm_state(vm) == VMM_RUNNING)
		soft_vcpus_pause(vm);
	atomic_store(&vm->state, VMM_POSTMIGRATE);
	pthread_mutex_unlock(&vm->ctl);
}

int soft_vm_check(struct soft_vm *vm, char *msg, size_t msg_len)
{
	bool was_running;
	int ret;

	if (msg && msg_len)
		msg[0] = '\0';
	pthread_mutex_lock(&vm->ctl);
	soft_vm_join_post_check(vm);
	if (!vmm_workload_checkable(&vm->wl)) {
		snprintf(msg, msg_len, "the %s workload has no exact check", vm->spec);
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (!vm->info.nr_blocks || (soft_vm_state(vm) == VMM_INCOMING && !vm->loaded)) {
		snprintf(msg, msg_len, "no RAM or workload state yet");
		ret = -EINVAL;
		goto out;
	}
	if (atomic_load(&vm->postcopy_incomplete)) {
		snprintf(msg, msg_len, "RAM still arriving (postcopy): check once the migration completed");
		ret = -EBUSY;
		goto out;
	}
	was_running = soft_vm_state(vm) == VMM_RUNNING;
	if (was_running)
		soft_vcpus_pause(vm);
	ret = soft_check_verify(vm, msg, msg_len);
	if (was_running)
		soft_vcpus_resume(vm);
out:
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

int soft_vm_post_migration_check(const struct soft_vm *vm, char *msg, size_t msg_len)
{
	struct soft_vm *m = (struct soft_vm *)vm;	/* lock only */
	int r;

	pthread_mutex_lock(&m->lock);
	r = m->post_check;
	snprintf(msg, msg_len, "%s", m->post_msg);
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* ---- postcopy ---- */

int soft_vm_vcpu_of_thread(const struct soft_vm *vm, pid_t tid)
{
	for (unsigned i = 0; tid && i < vm->nr_vcpus; i++)
		if (atomic_load(&((struct soft_vm *)vm)->vcpus[i].tid) == tid)
			return (int)i;
	return -1;
}

int soft_vm_postcopy_ram(struct soft_vm *vm, bool complete)
{
	int ret;

	gw_log(GW_LOG_INFO, "soft", "postcopy_ram", "complete=%d progress=%" PRIu64, complete,
	       soft_vm_progress(vm));
	if (!complete) {
		atomic_store(&vm->postcopy_incomplete, true);
		return (int)vm->nr_vcpus;
	}
	pthread_mutex_lock(&vm->ctl);
	atomic_store(&vm->postcopy_incomplete, false);
	if (vmm_workload_checkable(&vm->wl) && soft_vm_state(vm) == VMM_RUNNING) {
		/* Every page is here: the check the first resume deferred, the vCPUs parked. */
		soft_vcpus_pause(vm);
		post_migration_check(vm);
		soft_vcpus_resume(vm);
	}
	ret = 0;
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}
