/* SPDX-License-Identifier: MIT */
/*
 * /dev/kvm, the capabilities this backend needs or uses, the VM fd
 * (irqchip, PIT, dirty ring) and guest RAM: one memfd (or file) per block,
 * mapped MAP_SHARED and registered as a KVM memslot (slot = block index).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <godwit/log.h>
#include "kvm/kvm_internal.h"
#include "prealloc.h"

#define KVM_TSS_GPA 0xfffbd000ull	/* where kvmtool and QEMU put it: below the BIOS */

void kvm_why(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !why_len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
}

int kvm_open_dev(char *why, size_t why_len)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC), ver, e;

	if (fd < 0) {
		e = errno;
		kvm_why(why, why_len, "/dev/kvm: %s%s", strerror(e),
			e == EACCES || e == EPERM ? ": add this user to the kvm group (and log in again), or use "
			"--accel soft" : e == ENOENT || e == ENXIO || e == ENODEV ? ": load kvm_intel or kvm_amd "
			"(modprobe), with virtualisation on in the firmware, or use --accel soft" : "");
		return -e;
	}
	ver = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (ver != KVM_API_VERSION) {
		kvm_why(why, why_len, "/dev/kvm: API version %d, need %d", ver, KVM_API_VERSION);
		close(fd);
		return -EOPNOTSUPP;
	}
	return fd;
}

/* Without these the backend cannot run or migrate a guest at all. */
static const struct { int cap; const char *name; } required_caps[] = {
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP" },
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY" },
	{ KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT" },
	{ KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID" },
	{ KVM_CAP_MP_STATE, "KVM_CAP_MP_STATE" },
	{ KVM_CAP_VCPU_EVENTS, "KVM_CAP_VCPU_EVENTS" },
	{ KVM_CAP_XSAVE, "KVM_CAP_XSAVE" },
	{ KVM_CAP_ADJUST_CLOCK, "KVM_CAP_ADJUST_CLOCK" },
	{ KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR" },
};

/* Used when present; each maps to a KVM_COMPAT_* bit of the state. */
static const struct { int cap; uint32_t bit; } optional_caps[] = {
	{ KVM_CAP_SREGS2, KVM_COMPAT_SREGS2 },
	{ KVM_CAP_XSAVE2, KVM_COMPAT_XSAVE2 },
	{ KVM_CAP_XCRS, KVM_COMPAT_XCRS },
	{ KVM_CAP_DEBUGREGS, KVM_COMPAT_DEBUGREGS },
	{ KVM_CAP_VCPU_EVENTS, KVM_COMPAT_VCPU_EVENTS },
	{ KVM_CAP_MP_STATE, KVM_COMPAT_MP_STATE },
	{ KVM_CAP_ADJUST_CLOCK, KVM_COMPAT_ADJUST_CLOCK },
	{ KVM_CAP_PIT2, KVM_COMPAT_PIT2 },
	{ KVM_CAP_IRQCHIP, KVM_COMPAT_IRQCHIP },
};

int kvm_probe_caps(int kvm_fd, int vm_fd, struct kvm_caps *c, char *why, size_t why_len)
{
	int fd = vm_fd >= 0 ? vm_fd : kvm_fd, v;

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < sizeof(required_caps) / sizeof(required_caps[0]); i++) {
		if (ioctl(fd, KVM_CHECK_EXTENSION, required_caps[i].cap) <= 0) {
			kvm_why(why, why_len, "KVM lacks %s", required_caps[i].name);
			return -EOPNOTSUPP;
		}
	}
	for (size_t i = 0; i < sizeof(optional_caps) / sizeof(optional_caps[0]); i++)
		if (ioctl(fd, KVM_CHECK_EXTENSION, optional_caps[i].cap) > 0)
			c->compat |= optional_caps[i].bit;
	v = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
	c->xsave_bytes = v > 4096 ? (uint32_t)v : 4096;
	v = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
	c->max_vcpus = v > 0 ? (uint32_t)v : 1;
	v = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_DIRTY_LOG_RING_ACQ_REL);
	c->ring_acq_rel = v > 0;
	if (v <= 0)
		v = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_DIRTY_LOG_RING);
	c->ring_max_bytes = v > 0 ? (uint32_t)v : 0;
	v = ioctl(fd, KVM_CHECK_EXTENSION, KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2);
	c->manual_protect = v > 0 ? (uint32_t)v : 0;
	v = ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (v < (int)sizeof(struct kvm_run)) {
		kvm_why(why, why_len, "KVM_GET_VCPU_MMAP_SIZE: %d", v);
		return -EOPNOTSUPP;
	}
	c->vcpu_mmap_bytes = (unsigned)v;
	return 0;
}

static int enable_ring(struct kvm_vm *vm, char *why, size_t why_len)
{
	struct kvm_enable_cap cap = {
		.cap = vm->caps.ring_acq_rel ? KVM_CAP_DIRTY_LOG_RING_ACQ_REL : KVM_CAP_DIRTY_LOG_RING,
	};
	uint64_t bytes = (uint64_t)vm->ring_entries * sizeof(struct kvm_dirty_gfn);

	if (vm->ring_entries & (vm->ring_entries - 1) || bytes > vm->caps.ring_max_bytes ||
	    bytes < 4096) {
		kvm_why(why, why_len, "dirty ring of %u entries: need a power of two, 4 KiB..%u bytes",
			vm->ring_entries, vm->caps.ring_max_bytes);
		return -EINVAL;
	}
	cap.args[0] = bytes;
	if (ioctl(vm->vm_fd, KVM_ENABLE_CAP, &cap) < 0) {
		int e = errno;

		kvm_why(why, why_len, "enabling the dirty ring (%" PRIu64 " bytes): %s", bytes, strerror(e));
		return -e;
	}
	vm->ring_full_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vm->ring_full_efd < 0) {
		int e = errno;

		kvm_why(why, why_len, "eventfd: %s", strerror(e));
		return -e;
	}
	return 0;
}

/* The VM fd with its devices; vm->ring_entries decides the dirty ring. */
int kvm_vm_fd_setup(struct kvm_vm *vm, char *why, size_t why_len)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	int ret;

	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0) {
		ret = -errno;
		kvm_why(why, why_len, "KVM_CREATE_VM: %s", strerror(-ret));
		return ret;
	}
	ret = kvm_probe_caps(vm->kvm_fd, vm->vm_fd, &vm->caps, why, why_len);
	if (ret)
		return ret;
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_GPA) < 0 ||
	    ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		ret = -errno;
		kvm_why(why, why_len, "KVM_SET_TSS_ADDR / KVM_CREATE_IRQCHIP: %s", strerror(-ret));
		return ret;
	}
	if (vm->has_pit && ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0) {
		ret = -errno;
		kvm_why(why, why_len, "KVM_CREATE_PIT2: %s", strerror(-ret));
		return ret;
	}
	if (vm->ring_entries)
		return enable_ring(vm, why, why_len);
	return 0;
}

static int set_slot(struct kvm_vm *vm, unsigned bi, uint64_t bytes)
{
	const struct gw_ram_block *b = &vm->base.info.blocks[bi];
	struct kvm_userspace_memory_region r = {
		.slot = b->kvm_slot, .flags = 0, .guest_phys_addr = b->gpa,
		.memory_size = bytes, .userspace_addr = (uintptr_t)b->host,
	};

	return ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0 ? -errno : 0;
}

/* A memfd or the memory file (block "ram" only) of @bytes; *@fresh: reads as zeros. */
static int ram_fd(struct kvm_vm *vm, const char *name, uint64_t bytes, bool *fresh,
		  char *why, size_t why_len)
{
	struct stat stb;
	int fd, e;

	if (vm->memory_file && !strcmp(name, "ram")) {
		fd = open(vm->memory_file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || fstat(fd, &stb) < 0)
			goto fail;
		*fresh = stb.st_size == 0;
		if ((uint64_t)stb.st_size < bytes && ftruncate(fd, (off_t)bytes) < 0)
			goto fail;
		return fd;
	}
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
		goto fail;
	*fresh = true;
	return fd;
fail:
	e = errno;
	kvm_why(why, why_len, "RAM block %s (%" PRIu64 " bytes): %s", name, bytes, strerror(e));
	if (fd >= 0)
		close(fd);
	return -e;
}

int kvm_ram_add(struct kvm_vm *vm, const char *name, uint64_t gpa, uint64_t bytes,
		int fd, uint64_t fd_offset, bool *fresh, char *why, size_t why_len)
{
	unsigned bi = vm->base.info.nr_blocks;
	struct gw_ram_block *b;
	bool own = fd < 0;
	void *host;
	int ret;

	*fresh = own;
	if (own) {
		fd = ram_fd(vm, name, bytes, fresh, why, why_len);
		if (fd < 0)
			return fd;
		fd_offset = 0;
	}
	host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)fd_offset);
	if (host == MAP_FAILED) {
		ret = -errno;
		kvm_why(why, why_len, "mmap of block %s: %s", name, strerror(-ret));
		close(fd);
		return ret;
	}
	if (own && vm->prealloc) {
		uint64_t t0 = gw_now_ns();

		ret = vmm_prealloc_ram(host, bytes);
		if (ret) {
			kvm_why(why, why_len, "preallocating block %s (%" PRIu64 " bytes): %s", name, bytes,
				strerror(-ret));
			munmap(host, bytes);
			close(fd);
			return ret;
		}
		gw_log(GW_LOG_INFO, "kvm", "ram_prealloc", "block=%s bytes=%" PRIu64 " ms=%.1f fresh=%d", name,
		       bytes, (gw_now_ns() - t0) / 1e6, *fresh);
	}
	b = vmm_vm_ram_block_add(&vm->base, name, gpa, host, bytes, fd, fd_offset);
	b->kvm_slot = bi;		/* the memslot is the block's index */
	ret = set_slot(vm, bi, bytes);
	if (ret) {
		kvm_why(why, why_len, "KVM memslot for block %s at %#" PRIx64 ": %s", name, gpa,
			strerror(-ret));
		return ret;
	}
	if (bi == KVM_BLOCK_RAM)
		vm->base.ram_pages = bytes / GW_PAGE_BYTES;
	return 0;
}

int kvm_ram_replace(struct kvm_vm *vm, unsigned bi, int fd, uint64_t fd_offset,
		    char *why, size_t why_len)
{
	struct gw_ram_block *b = &vm->base.info.blocks[bi];
	void *host = mmap(NULL, b->size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			  (off_t)fd_offset);
	int ret;

	if (host == MAP_FAILED) {
		ret = -errno;
		kvm_why(why, why_len, "mmap of the received fd for %s: %s", b->name, strerror(-ret));
		close(fd);
		return ret;
	}
	/* Delete the slot (size 0), then register it over the new mapping. */
	ret = set_slot(vm, bi, 0);
	munmap(b->host, b->size_bytes);
	close(b->fd);
	b->host = host;
	b->fd = fd;
	b->fd_offset_bytes = fd_offset;
	if (!ret)
		ret = set_slot(vm, bi, b->size_bytes);
	if (ret)
		kvm_why(why, why_len, "KVM memslot for received block %s: %s", b->name, strerror(-ret));
	return ret;
}

void *kvm_gpa_host(const struct kvm_vm *vm, uint64_t gpa, uint64_t len)
{
	for (unsigned i = 0; i < vm->base.info.nr_blocks; i++) {
		const struct gw_ram_block *b = &vm->base.info.blocks[i];

		if (gpa >= b->gpa && gpa - b->gpa <= b->size_bytes && len <= b->size_bytes - (gpa - b->gpa))
			return (uint8_t *)b->host + (gpa - b->gpa);
	}
	return NULL;
}
