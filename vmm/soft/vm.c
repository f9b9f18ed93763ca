/* SPDX-License-Identifier: MIT */
/*
 * The soft VM's creation and release: memfd (or file) RAM, filled, and
 * the workload laid out over it; its lifecycle and post-migration check are
 * the base's (vm_base.h) over the hooks in hooks.c.
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
#include "soft/soft_internal.h"

#define FILL_THREADS 2

int soft_config_check(const struct vmm_config *cfg, char *err, size_t err_len)
{
	struct vmm_workload wl;

	if (cfg->nr_vcpus < 1 || cfg->nr_vcpus > SOFT_MAX_VCPUS) {
		snprintf(err, err_len, "vcpus must be 1..%d, not %u", SOFT_MAX_VCPUS, cfg->nr_vcpus);
		return -EINVAL;
	}
	if (cfg->memory_bytes % SOFT_PAGE_BYTES || cfg->memory_bytes > SOFT_MAX_RAM_BYTES ||
	    (!cfg->memory_bytes && !cfg->incoming)) {
		vmm_memory_refused(err, err_len, cfg->memory_bytes, SOFT_PAGE_BYTES, SOFT_MAX_RAM_BYTES);
		return -EINVAL;
	}
	if ((unsigned)cfg->fill > VMM_FILL_TEXT) {
		snprintf(err, err_len, "unknown fill");
		return -EINVAL;
	}
	return vmm_workload_parse(cfg->workload, &wl, err, err_len);
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
	vmm_vm_init(&vm->base, &soft_hooks);
	pthread_mutex_init(&vm->hint_lock, NULL);
	cond_init_monotonic(&vm->cond);
	if (vmm_irq_lines_init(&vm->irq)) {
		pthread_mutex_destroy(&vm->hint_lock);
		pthread_cond_destroy(&vm->cond);
		vmm_vm_release(&vm->base);
		free(vm);
		return NULL;
	}
	vm->base.dev_base_gpa = SOFT_DEV_BASE_GPA;
	vm->base.dev_gsi_base = SOFT_DEV_GSI_BASE;
	vm->base.dev_irq = &vmm_irq_lines_ops;
	vm->base.dev_irq_opaque = &vm->irq;
	vm->fill = cfg->incoming ? VMM_FILL_NONE : cfg->fill;
	vm->seed = cfg->seed;
	vm->base.nr_vcpus = cfg->nr_vcpus;
	for (unsigned i = 0; i < SOFT_MAX_VCPUS; i++) {
		vm->vcpus[i].vm = vm;
		vm->vcpus[i].index = i;
	}
	vm->prealloc = cfg->prealloc;
	return vm;
}

void soft_vm_free(struct soft_vm *vm)
{
	vmm_vm_devices_destroy(&vm->base);	/* before their RAM and lines */
	vmm_vm_ram_release(&vm->base);
	vmm_irq_lines_destroy(&vm->irq);
	free(vm->memory_file);
	pthread_mutex_destroy(&vm->hint_lock);
	pthread_cond_destroy(&vm->cond);
	vmm_vm_release(&vm->base);
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
	ret = vmm_fill_ram(&vm->base.info, vm->fill, vm->seed, fresh, FILL_THREADS);
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
	ret = soft_config_check(cfg, err, err_len);
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
		ret = vmm_workload_parse(cfg->workload, &vm->base.wl, reason, sizeof(reason));
	if (ret == 0 && cfg->memory_bytes)
		ret = vm_ram_create(vm, cfg->memory_bytes, reason, sizeof(reason));
	if (ret == 0)
		ret = vmm_vm_devices_create(&vm->base, cfg, reason, sizeof(reason));
	if (ret == 0)
		ret = vmm_workload_check_nics(&vm->base.wl, vm->base.nr_nics, reason, sizeof(reason));
	if (ret == 0 && !cfg->incoming)
		ret = soft_net_check(vm, reason, sizeof(reason));
	if (ret < 0) {
		snprintf(err, err_len, "%s", reason[0] ? reason : strerror(-ret));
		soft_vm_free(vm);
		errno = -ret;
		return NULL;
	}
	soft_run_layout(vm);
	vmm_vm_set_state(&vm->base, cfg->incoming ? VMM_INCOMING : VMM_CREATED);
	gw_log(GW_LOG_INFO, "soft", "vm_created",
	       "memory_bytes=%" PRIu64 " vcpus=%u fill=%s workload=%s incoming=%d nics=%u",
	       cfg->memory_bytes, vm->base.nr_vcpus, vmm_fill_name(vm->fill), vm->base.spec,
	       cfg->incoming, vm->base.nr_nics);
	return vm;
}

uint64_t soft_vm_progress(const struct soft_vm *vm)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < vm->base.nr_vcpus; i++)
		sum += atomic_load_explicit(&vm->vcpus[i].progress, memory_order_relaxed);
	return sum;
}
