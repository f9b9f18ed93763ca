/* SPDX-License-Identifier: MIT */
/*
 * struct vmm_backend vmm_kvm: the probe and the lifecycle of the KVM VM
 * (kvm_vm.h); creation is in kvm_create.c, the engine's callbacks
 * (kvm_engine_ops) in kvm_engine.c. Lifecycle as vmm.h describes:
 *   created --start--> running <--pause/resume (engine)--> paused
 *   paused --set_postmigrate--> postmigrate
 *   incoming --setup_ram, load_state, resume--> running
 * A destination runs its verify check after its first resume in a thread
 * (not in the downtime), then starts the vCPUs, as the soft VM does; under
 * postcopy the vCPUs start at once and the check runs once every page is
 * there (postcopy_ram(true)).
 *
 * Threads: every operation takes vm->ctl, except progress, state,
 * workload, post_migration_check and the report, which read atomics or
 * vm->lock.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <godwit/log.h>
#include "lifecycle.h"
#include "kvm/kvm_boot.h"
#include "kvm/kvm_internal.h"

static struct kvm_vm *to_kvm(const struct vmm *v)
{
	return (struct kvm_vm *)v;
}

static int kvm_probe(char *why, size_t why_len)
{
#if !defined(__x86_64__)
	kvm_why(why, why_len, "the KVM backend runs x86-64 guests only");
	return -EOPNOTSUPP;
#else
	struct kvm_caps caps;
	int fd = kvm_open_dev(why, why_len), vm_fd, ret;

	if (fd < 0)
		return fd;
	ret = kvm_probe_caps(fd, -1, &caps, why, why_len);
	if (!ret) {
		vm_fd = ioctl(fd, KVM_CREATE_VM, 0);
		if (vm_fd < 0) {
			ret = -errno;
			kvm_why(why, why_len, "KVM_CREATE_VM: %s", strerror(errno));
		} else {
			close(vm_fd);
		}
	}
	close(fd);
	if (!ret)	/* the reason --accel auto logs for its choice */
		kvm_why(why, why_len, "/dev/kvm works (KVM_CREATE_VM succeeded)");
	return ret;
#endif
}

static struct vmm *kvm_create(const struct vmm_config *cfg, char *err, size_t err_len)
{
	return vmm_kvm_create_opts(cfg, NULL, err, err_len);
}

/* ---- lifecycle ---- */

int kvm_post_check_run(struct kvm_vm *vm)
{
	char msg[KVM_MSG_MAX] = "";
	int ret = kvm_check_verify(vm, msg, sizeof(msg));

	gw_log(ret ? GW_LOG_ERROR : GW_LOG_INFO, "kvm", "post_migration_check", "ok=%d %s",
	       ret == 0, msg);
	pthread_mutex_lock(&vm->lock);
	vm->post_check = ret == 0 ? 1 : -1;
	snprintf(vm->post_msg, sizeof(vm->post_msg), "%s", msg);
	pthread_mutex_unlock(&vm->lock);
	return ret;
}

/* Checks every page after the first resume, then starts the vCPUs. Never takes ctl. */
static void *post_check_main(void *arg)
{
	struct kvm_vm *vm = arg;
	int ret;

	gw_log_set_side("dst");
	kvm_post_check_run(vm);
	ret = kvm_vcpus_start(vm, false);
	if (ret)
		gw_log(GW_LOG_ERROR, "kvm", "vcpus_start_failed", "err=%d", ret);
	return NULL;
}

/* ctl held: wait for a pending post-migration check and vCPU start. */
void kvm_join_post_check(struct kvm_vm *vm)
{
	if (vm->post_thread_started) {
		pthread_join(vm->post_thread, NULL);
		vm->post_thread_started = false;
	}
}

/* ctl held, state created or incoming: the first start of the vCPUs. */
int kvm_start_first_locked(struct kvm_vm *vm)
{
	int ret;

	if (kvm_vmm_state(vm) == VMM_INCOMING) {
		if (!vm->loaded)
			return -EINVAL;
		/* Under postcopy the check waits for every page (postcopy_ram(true)). */
		if (kvm_workload_checkable(vm) && !atomic_load(&vm->postcopy_incomplete)) {
			kvm_set_vmm_state(vm, VMM_RUNNING);
			if (vmm_thread_start(&vm->post_thread, post_check_main, vm) == 0) {
				vm->post_thread_started = true;
				return 0;
			}
			kvm_post_check_run(vm);
		}
	}
	if (!vm->nr_vcpus)
		return -EINVAL;
	ret = kvm_vcpus_start(vm, false);
	if (ret == 0)
		kvm_set_vmm_state(vm, VMM_RUNNING);
	return ret;
}

static int kvm_start(struct vmm *v)
{
	struct kvm_vm *vm = to_kvm(v);
	int ret = 0;

	pthread_mutex_lock(&vm->ctl);
	switch (kvm_vmm_state(vm)) {
	case VMM_CREATED:
	case VMM_INCOMING:
		ret = kvm_start_first_locked(vm);
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

static void kvm_destroy(struct vmm *v)
{
	struct kvm_vm *vm = to_kvm(v);

	if (!vm)
		return;
	pthread_mutex_lock(&vm->ctl);
	kvm_join_post_check(vm);
	kvm_vcpus_stop(vm);
	kvm_set_vmm_state(vm, VMM_SHUTDOWN);
	pthread_mutex_unlock(&vm->ctl);
	kvm_vm_free(vm);
}

static const struct gw_vm_info *kvm_info(const struct vmm *v)
{
	return &to_kvm(v)->info;
}

static enum vmm_state kvm_state(const struct vmm *v)
{
	return kvm_vmm_state(to_kvm(v));
}

static void kvm_set_postmigrate(struct vmm *v)
{
	struct kvm_vm *vm = to_kvm(v);

	pthread_mutex_lock(&vm->ctl);
	kvm_join_post_check(vm);
	if (kvm_vmm_state(vm) == VMM_RUNNING)
		kvm_pause_all(&vm->pause);
	kvm_set_vmm_state(vm, VMM_POSTMIGRATE);
	pthread_mutex_unlock(&vm->ctl);
}

static uint64_t kvm_progress_op(const struct vmm *v)
{
	return kvm_progress(to_kvm(v));
}

static void kvm_workload(const struct vmm *v, char *buf, size_t len)
{
	struct kvm_vm *vm = to_kvm(v);

	/* A load or setup_ram replaces it on another thread (kvm_layout_workload). */
	pthread_mutex_lock(&vm->lock);
	snprintf(buf, len, "%s", vm->spec);
	pthread_mutex_unlock(&vm->lock);
}

static int kvm_check(struct vmm *v, char *msg, size_t msg_len)
{
	struct kvm_vm *vm = to_kvm(v);
	bool was_running;
	int ret;

	pthread_mutex_lock(&vm->ctl);
	kvm_join_post_check(vm);
	if (!kvm_workload_checkable(vm)) {
		kvm_why(msg, msg_len, "the %s workload has no exact check", vm->spec);
		ret = -EOPNOTSUPP;
	} else if (!vm->nr_vcpus || vm->info.nr_blocks < 2) {
		kvm_why(msg, msg_len, "no RAM or vCPU state yet");
		ret = -EINVAL;
	} else if (atomic_load(&vm->postcopy_incomplete)) {
		kvm_why(msg, msg_len, "RAM still arriving (postcopy): check once the migration completed");
		ret = -EBUSY;
	} else {
		was_running = kvm_vmm_state(vm) == VMM_RUNNING;
		if (was_running)
			kvm_pause_all(&vm->pause);
		ret = kvm_check_verify(vm, msg, msg_len);
		if (was_running)
			kvm_pause_resume_all(&vm->pause);
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

static int kvm_post_migration_check(const struct vmm *v, char *msg, size_t msg_len)
{
	struct kvm_vm *vm = to_kvm(v);
	int r;

	pthread_mutex_lock(&vm->lock);
	r = vm->post_check;
	kvm_why(msg, msg_len, "%s", vm->post_msg);
	pthread_mutex_unlock(&vm->lock);
	return r;
}

void vmm_kvm_guest_report(const struct vmm *v, struct kvm_guest_report *out)
{
	struct kvm_vm *vm = to_kvm(v);

	pthread_mutex_lock(&vm->lock);
	*out = vm->report;
	pthread_mutex_unlock(&vm->lock);
}

void *vmm_kvm_gpa_to_host(const struct vmm *v, uint64_t gpa, uint64_t len)
{
	return kvm_gpa_host(to_kvm(v), gpa, len);
}

const struct vmm_backend vmm_kvm = {
	.name = "kvm",
	.probe = kvm_probe,
	.create = kvm_create,
	.destroy = kvm_destroy,
	.start = kvm_start,
	.info = kvm_info,
	.engine_ops = &kvm_engine_ops,
	.state = kvm_state,
	.set_postmigrate = kvm_set_postmigrate,
	.progress = kvm_progress_op,
	.workload = kvm_workload,
	.check = kvm_check,
	.post_migration_check = kvm_post_migration_check,
};
