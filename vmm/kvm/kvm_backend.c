/* SPDX-License-Identifier: MIT */
/*
 * struct vmm_backend vmm_kvm (kvm_vm.h): the probe, creation (kvm_create.c)
 * and the guests' reports are KVM's; the lifecycle, the engine's callbacks
 * and the post-migration check are the base's (vm_base.h) over the KVM
 * hooks (kvm_hooks.c).
 *
 * Threads: the report reads base.lock; the rest as vm_base.h says.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <godwit/log.h>
#include "kvm/kvm_boot.h"
#include "kvm/kvm_internal.h"

static struct kvm_vm *to_kvm(const struct vmm *v)
{
	return (struct kvm_vm *)v;	/* its base first, the base a struct vmm's address */
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

void vmm_kvm_guest_report(const struct vmm *v, struct kvm_guest_report *out)
{
	struct kvm_vm *vm = to_kvm(v);

	pthread_mutex_lock(&vm->base.lock);
	*out = vm->report;
	pthread_mutex_unlock(&vm->base.lock);
}

void *vmm_kvm_gpa_to_host(const struct vmm *v, uint64_t gpa, uint64_t len)
{
	return kvm_gpa_host(to_kvm(v), gpa, len);
}

const struct vmm_backend vmm_kvm = {
	.name = "kvm",
	.probe = kvm_probe,
	.check_config = kvm_check_config,
	.create = kvm_create,
	.engine_ops = &vmm_vm_engine_ops,	/* no free-page hints: no guest frees pages */
	VMM_VM_BACKEND_ENTRIES,
};
