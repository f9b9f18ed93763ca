/* SPDX-License-Identifier: MIT */
/*
 * The soft backend as the others see it: the engine callbacks
 * (struct gw_vm_ops, opaque = the VM) and vmm_soft, its entry in the
 * backend table of vmm.h. A struct vmm * of this backend is a
 * struct soft_vm *: the conversions happen here and nowhere else.
 *
 * Threads: every callback takes the VM's ctl (except throttle and
 * dirty_limit, one atomic store each, and the hint callbacks, which take
 * hint_lock and lock: hints_start waits for the vCPUs, which must not wait
 * for ctl), so the engine, the command line and the post-check thread
 * never step on each other.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <godwit/log.h>
#include "lifecycle.h"
#include "soft/soft_internal.h"

/* ---- engine callbacks ---- */

/* The lifecycle's hooks (lifecycle.h): ctl held. */
static enum vmm_state life_state(const void *vm)
{
	return soft_vm_state(vm);
}

static void life_set_state(void *opaque, enum vmm_state st)
{
	atomic_store(&((struct soft_vm *)opaque)->state, st);
}

static void life_join_post_check(void *vm)
{
	soft_vm_join_post_check(vm);
}

static void life_pause_vcpus(void *vm)
{
	soft_vcpus_pause(vm);
}

static void life_resume_vcpus(void *vm)
{
	soft_vcpus_resume(vm);
}

static int life_start_first(void *vm)
{
	return soft_vm_start_first(vm);
}

static int life_save_state(void *vm, struct gw_state *st)
{
	return soft_state_save(vm, st);
}

static int life_load_state(void *vm, struct gw_state *st)
{
	return soft_state_load(vm, st);
}

static const struct vmm_life_ops soft_life_ops = {
	.name = "soft",
	.state = life_state,
	.set_state = life_set_state,
	.join_post_check = life_join_post_check,
	.pause_vcpus = life_pause_vcpus,
	.resume_vcpus = life_resume_vcpus,
	.start_first = life_start_first,
	.save_state = life_save_state,
	.load_state = life_load_state,
};

static struct vmm_life life_of(struct soft_vm *vm)
{
	return (struct vmm_life){ .ops = &soft_life_ops, .vm = vm, .ctl = &vm->ctl };
}

static int ops_pause(void *opaque)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_pause(&l);
}

static int ops_resume(void *opaque)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_resume(&l);
}

static int ops_save_state(void *opaque, struct gw_state *st)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_save_state(&l, st);
}

static int ops_load_state(void *opaque, struct gw_state *st)
{
	struct vmm_life l = life_of(opaque);

	return vmm_life_load_state(&l, st);
}

static int ops_setup_ram(void *opaque, const struct gw_vm_info *want, struct gw_vm_info *out,
			 char *reason, size_t reason_len)
{
	struct soft_vm *vm = opaque;
	int ret;

	pthread_mutex_lock(&vm->ctl);
	if (soft_vm_state(vm) != VMM_INCOMING) {
		snprintf(reason, reason_len, "soft VM is %s, not waiting for a migration",
			 vmm_state_name(soft_vm_state(vm)));
		soft_ram_close_received(want);
		ret = -EBUSY;
		goto out;
	}
	ret = soft_ram_setup(vm, want, reason, reason_len);
	if (ret)
		goto out;
	soft_run_layout(vm);
	*out = vm->info;
	gw_log(GW_LOG_INFO, "soft", "ram_setup", "blocks=%u bytes=%" PRIu64 " local=%d",
	       vm->info.nr_blocks, vm->ram_pages * SOFT_PAGE_BYTES, want->blocks[0].fd >= 0);
out:
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

static int ops_throttle(void *opaque, unsigned pct)
{
	return soft_vcpus_throttle(opaque, pct);
}

static int ops_dirty_limit(void *opaque, uint64_t bytes_per_sec)
{
	return soft_vcpus_dirty_limit(opaque, bytes_per_sec);
}

static void ops_hints_start(void *opaque, struct gw_session *s)
{
	soft_run_hints_start(opaque, s);
}

static void ops_hints_stop(void *opaque)
{
	soft_run_hints_stop(opaque);
}

static int ops_vcpu_of_thread(void *opaque, pid_t tid)
{
	return soft_vm_vcpu_of_thread(opaque, tid);
}

static int ops_postcopy_ram(void *opaque, bool complete)
{
	return soft_vm_postcopy_ram(opaque, complete);
}

static const struct gw_vm_ops soft_engine_ops = {
	.size = sizeof(struct gw_vm_ops),
	.pause = ops_pause,
	.resume = ops_resume,
	.save_state = ops_save_state,
	.load_state = ops_load_state,
	.setup_ram = ops_setup_ram,
	.throttle = ops_throttle,
	.dirty_limit = ops_dirty_limit,
	.hints_start = ops_hints_start,
	.hints_stop = ops_hints_stop,
	.vcpu_of_thread = ops_vcpu_of_thread,
	.postcopy_ram = ops_postcopy_ram,
};

/* ---- the backend ---- */

static struct soft_vm *soft(struct vmm *v)
{
	return (struct soft_vm *)v;
}

static const struct soft_vm *soft_const(const struct vmm *v)
{
	return (const struct soft_vm *)v;
}

static struct vmm *be_create(const struct vmm_config *cfg, char *err, size_t err_len)
{
	return (struct vmm *)soft_vm_create(cfg, err, err_len);
}

static void be_destroy(struct vmm *v)
{
	soft_vm_destroy(soft(v));
}

static int be_start(struct vmm *v)
{
	return soft_vm_start(soft(v));
}

static const struct gw_vm_info *be_info(const struct vmm *v)
{
	return &soft_const(v)->info;
}

static enum vmm_state be_state(const struct vmm *v)
{
	return soft_vm_state(soft_const(v));
}

static void be_set_postmigrate(struct vmm *v)
{
	soft_vm_set_postmigrate(soft(v));
}

static uint64_t be_progress(const struct vmm *v)
{
	return soft_vm_progress(soft_const(v));
}

static void be_workload(const struct vmm *v, char *buf, size_t len)
{
	soft_vm_workload(soft_const(v), buf, len);
}

static int be_check(struct vmm *v, char *msg, size_t msg_len)
{
	return soft_vm_check(soft(v), msg, msg_len);
}

static int be_post_migration_check(const struct vmm *v, char *msg, size_t msg_len)
{
	return soft_vm_post_migration_check(soft_const(v), msg, msg_len);
}

const struct vmm_backend vmm_soft = {
	.name = "soft",
	.probe = soft_probe,
	.create = be_create,
	.destroy = be_destroy,
	.start = be_start,
	.info = be_info,
	.engine_ops = &soft_engine_ops,
	.state = be_state,
	.set_postmigrate = be_set_postmigrate,
	.progress = be_progress,
	.workload = be_workload,
	.check = be_check,
	.post_migration_check = be_post_migration_check,
};
