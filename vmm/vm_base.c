/* SPDX-License-Identifier: MIT */
/*
 * The base of every VM (vm_base.h): creation and release, the RAM release,
 * the first start and the post-migration check thread, and the vmm_backend
 * entries every backend shares. The engine's callbacks are in vm_ops.c.
 *
 * Threads: every entry takes ctl for its whole run, except state, info,
 * progress, workload and post_migration_check, which read atomics, fields
 * fixed while the VM runs, or lock.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <godwit/log.h>
#include <godwit/session.h>
#include "dev/virtio_net.h"
#include "thread.h"
#include "vm_base.h"

static struct vmm_vm *base_of(struct vmm *v)
{
	return (struct vmm_vm *)v;
}

static const struct vmm_vm *base_of_const(const struct vmm *v)
{
	return (const struct vmm_vm *)v;
}

void vmm_vm_init(struct vmm_vm *vm, const struct vmm_vm_hooks *hooks)
{
	vm->hooks = hooks;
	pthread_mutex_init(&vm->ctl, NULL);
	pthread_mutex_init(&vm->lock, NULL);
	pthread_mutex_init(&vm->sess_lock, NULL);
	vmm_vm_announce_init(vm);
	vm->info.size = sizeof(vm->info);
	vm->info.blocks = vm->blocks;
	vm->info.kvm_vm_fd = -1;
	vm->info.kvm_dirty_ring_full_efd = -1;
	vmm_vm_set_state(vm, VMM_CREATED);
}

void vmm_vm_release(struct vmm_vm *vm)
{
	vmm_vm_devices_destroy(vm);	/* a creation that failed after them */
	pthread_mutex_destroy(&vm->announce_lock);
	pthread_mutex_destroy(&vm->sess_lock);
	pthread_mutex_destroy(&vm->ctl);
	pthread_mutex_destroy(&vm->lock);
}

struct gw_ram_block *vmm_vm_ram_block_add(struct vmm_vm *vm, const char *name, uint64_t gpa,
					  void *host, uint64_t size_bytes, int fd,
					  uint64_t fd_offset_bytes)
{
	struct gw_ram_block *b = &vm->info.blocks[vm->info.nr_blocks++];

	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->gpa = gpa;
	b->host = host;
	b->size_bytes = size_bytes;
	b->page_size_bytes = GW_PAGE_BYTES;
	b->fd = fd;
	b->fd_offset_bytes = fd_offset_bytes;
	return b;
}

void vmm_vm_ram_release(struct vmm_vm *vm)
{
	for (unsigned i = 0; i < vm->info.nr_blocks; i++) {
		struct gw_ram_block *b = &vm->info.blocks[i];

		if (b->host)
			munmap(b->host, b->size_bytes);
		if (b->fd >= 0)
			close(b->fd);
	}
	vm->info.nr_blocks = 0;
	vm->ram_pages = 0;
}

void vmm_vm_close_received(const struct gw_vm_info *want)
{
	for (unsigned i = 0; want && i < want->nr_blocks && i < GW_MAX_RAM_BLOCKS; i++)
		if (want->blocks[i].fd >= 0)
			close(want->blocks[i].fd);
}

void vmm_memory_mismatch(char *reason, size_t reason_len, uint64_t src_bytes, uint64_t here_bytes)
{
	char src[16], here[16];

	gw_size_str(src, sizeof(src), src_bytes);
	snprintf(reason, reason_len, "the source's guest RAM is %s, this destination's VM was made with "
		 "--memory %s: start it with --memory %s, or without --memory to take the source's size",
		 src, gw_size_str(here, sizeof(here), here_bytes), src);
}

void vmm_memory_refused(char *err, size_t err_len, uint64_t bytes, unsigned page_bytes, uint64_t max_bytes)
{
	char b[16], p[16], m[16];

	snprintf(err, err_len, "--memory %s: this VM takes a non-zero multiple of %s, at most %s",
		 gw_size_str(b, sizeof(b), bytes), gw_size_str(p, sizeof(p), page_bytes),
		 gw_size_str(m, sizeof(m), max_bytes));
}

/* ---- devices ---- */

/*
 * virtq_mem's hook: a device wrote guest RAM. The devices' I/O threads (or
 * a notifying vCPU) call it under their transport's lock; sess_lock is
 * taken only here and by set_session, never around a transport lock.
 */
static void dev_mark_dirty(void *opaque, uint64_t gpa, uint64_t len_bytes)
{
	struct vmm_vm *vm = opaque;

	pthread_mutex_lock(&vm->sess_lock);
	if (vm->sess)
		gw_session_mark_dirty(vm->sess, gpa, len_bytes);
	pthread_mutex_unlock(&vm->sess_lock);
}

int vmm_vm_dev_mem_refresh(struct vmm_vm *vm)
{
	int ret;

	memset(vm->dev_mem.ranges, 0, sizeof(vm->dev_mem.ranges));
	vm->dev_mem.nr = 0;
	vm->dev_mem.mark_dirty = dev_mark_dirty;
	vm->dev_mem.dirty_opaque = vm;
	for (unsigned i = 0; i < vm->info.nr_blocks; i++) {
		const struct gw_ram_block *b = &vm->info.blocks[i];

		ret = virtq_mem_add(&vm->dev_mem, b->gpa, b->host, b->size_bytes);
		if (ret)
			return ret;
	}
	return 0;
}

int vmm_vm_devices_create(struct vmm_vm *vm, const struct vmm_config *cfg, char *err,
			  size_t err_len)
{
	int ret;

	if (!cfg->nr_nics)
		return 0;
	if (cfg->nr_nics > VMM_MAX_NICS) {
		snprintf(err, err_len, "at most %u NICs, not %u", VMM_MAX_NICS, cfg->nr_nics);
		return -EINVAL;
	}
	ret = vmm_vm_dev_mem_refresh(vm);
	if (ret) {
		snprintf(err, err_len, "guest RAM for devices: %s", strerror(-ret));
		return ret;
	}
	for (unsigned i = 0; i < cfg->nr_nics; i++) {
		const struct virtio_net_nic *nic = &cfg->nics[i];
		char name[32];
		struct virtio_net_config nc = {
			.name = name, .backend = &net_backend_tap, .backend_arg = nic->ifname,
			.backend_fd = -1, .mac_set = nic->mac_set,
			.base_gpa = vm->dev_base_gpa + (uint64_t)i * VMM_DEV_WINDOW_BYTES,
			.gsi = vm->dev_gsi_base + i, .mem = &vm->dev_mem,
			.irq = vm->dev_irq, .irq_opaque = vm->dev_irq_opaque,
		};
		struct virtio_net *n;

		snprintf(name, sizeof(name), "virtio-net%u", i);
		memcpy(nc.mac, nic->mac, sizeof(nc.mac));
		if (cfg->nic_fds) {
			nc.backend = &net_backend_fd;
			nc.backend_fd = cfg->nic_fds[i];
		}
		n = virtio_net_new(&nc);
		if (!n) {
			ret = -errno;
			snprintf(err, err_len, "--nic tap=%s: %s", nic->ifname, strerror(errno));
			goto fail;
		}
		ret = virtio_net_register(n, &vm->mmio);
		if (ret) {
			virtio_net_destroy(n);
			snprintf(err, err_len, "--nic tap=%s: MMIO window: %s", nic->ifname,
				 strerror(-ret));
			goto fail;
		}
		vm->nics[vm->nr_nics++] = n;
		gw_log(GW_LOG_INFO, vm->hooks->subsys, "nic", "dev=%s tap=%s gpa=%#llx gsi=%u",
		       name, nic->ifname, (unsigned long long)nc.base_gpa, nc.gsi);
	}
	vmm_vm_announce_prepare(vm);	/* its thread made now, not in a resume */
	return 0;
fail:
	vmm_vm_devices_destroy(vm);
	return ret;
}

void vmm_vm_devices_destroy(struct vmm_vm *vm)
{
	vmm_vm_announce_release(vm);	/* its rounds send through the NICs */
	for (unsigned i = 0; i < vm->nr_nics; i++)
		virtio_net_destroy(vm->nics[i]);
	vm->nr_nics = 0;
	vm->mmio.nr = 0;
	vm->dev_started = false;
}

int vmm_vm_devices_start(struct vmm_vm *vm)
{
	int ret;

	if (vm->dev_started)
		return 0;
	for (unsigned i = 0; i < vm->nr_nics; i++) {
		ret = virtio_net_start(vm->nics[i]);
		if (ret && ret != -EALREADY) {
			gw_log(GW_LOG_ERROR, vm->hooks->subsys, "nic_start_failed", "nic=%u err=%d",
			       i, ret);
			return ret;
		}
	}
	vm->dev_started = true;
	return 0;
}

int vmm_vm_devices_stop(struct vmm_vm *vm)
{
	int ret;

	vmm_vm_announce_stop(vm);
	for (unsigned i = 0; i < vm->nr_nics; i++) {
		ret = virtio_net_stop(vm->nics[i]);
		if (ret) {
			gw_log(GW_LOG_ERROR, vm->hooks->subsys, "nic_stop_failed", "nic=%u err=%d",
			       i, ret);
			for (unsigned j = 0; j <= i; j++)
				virtio_net_resume(vm->nics[j]);
			return ret;
		}
	}
	return 0;
}

void vmm_vm_devices_resume(struct vmm_vm *vm)
{
	for (unsigned i = 0; i < vm->nr_nics; i++) {
		int ret = virtio_net_resume(vm->nics[i]);

		if (ret)
			gw_log(GW_LOG_ERROR, vm->hooks->subsys, "nic_resume_failed", "nic=%u err=%d",
			       i, ret);
	}
}

void vmm_vm_set_session(struct vmm *v, struct gw_session *s)
{
	struct vmm_vm *vm = base_of(v);

	pthread_mutex_lock(&vm->sess_lock);
	vm->sess = s;
	pthread_mutex_unlock(&vm->sess_lock);
}

const struct vmm_mmio_bus *vmm_vm_mmio_bus(const struct vmm *v)
{
	return &base_of_const(v)->mmio;
}

struct virtio_net *vmm_vm_nic(struct vmm *v, unsigned i)
{
	struct vmm_vm *vm = base_of(v);

	return i < vm->nr_nics ? vm->nics[i] : NULL;
}

/* ---- the post-migration check ---- */

bool vmm_vm_checkable(const struct vmm_vm *vm)
{
	return vm->hooks->checkable ? vm->hooks->checkable(vm) : vmm_workload_checkable(&vm->wl);
}

/*
 * The check parks the guest until it is done: 0.1-0.2 s of the dirty
 * workload's RAM after the resume the downtime figure measured. Outside a
 * local migration the RAM digest verifies that RAM, so the dirty workload
 * runs at once; verify and balloon keep their check (their guests' own).
 */
bool vmm_vm_check_at_resume(const struct vmm_vm *vm)
{
	return vmm_vm_checkable(vm) && (vm->wl.kind != VMM_WL_DIRTY || vm->ram_shared);
}

int vmm_vm_post_check_run(struct vmm_vm *vm)
{
	char msg[VMM_MSG_MAX] = "";
	uint64_t t0 = gw_now_ns();
	int ret = vm->hooks->check(vm, msg, sizeof(msg));

	if (ret < 0 && ret != -EIO && !msg[0])
		snprintf(msg, sizeof(msg), "check could not run: %s", strerror(-ret));
	gw_log(ret == 0 ? GW_LOG_INFO : GW_LOG_ERROR, vm->hooks->subsys, "post_migration_check",
	       "result=%s ms=%.1f msg=\"%s\"", ret == 0 ? "ok" : "failed",
	       (gw_now_ns() - t0) / 1e6, msg);
	pthread_mutex_lock(&vm->lock);
	vm->post_check = ret == 0 ? 1 : -1;
	snprintf(vm->post_msg, sizeof(vm->post_msg), "%s", msg);
	pthread_mutex_unlock(&vm->lock);
	return ret;
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
	struct vmm_vm *vm = arg;
	int ret;

	gw_log_set_side("dst");
	vmm_vm_post_check_run(vm);
	ret = vm->hooks->start_vcpus(vm);
	if (ret)
		gw_log(GW_LOG_ERROR, vm->hooks->subsys, "vcpus_start_failed", "err=%d", ret);
	return NULL;
}

void vmm_vm_join_post_check(struct vmm_vm *vm)
{
	if (vm->post_thread_started) {
		pthread_join(vm->post_thread, NULL);
		vm->post_thread_started = false;
	}
}

/*
 * ctl held, state created or incoming: the first start of the vCPUs. After
 * a migration (loaded), a workload vmm_vm_check_at_resume names checks
 * first, in a thread; under postcopy the check waits for every page
 * (postcopy_ram(true)).
 */
static int start_first(struct vmm_vm *vm)
{
	enum vmm_state was = vmm_vm_state(vm);
	int ret;

	if ((was == VMM_INCOMING && !vm->loaded) || !vm->nr_vcpus || !vm->info.nr_blocks)
		return -EINVAL;
	if (was == VMM_INCOMING && vmm_vm_check_at_resume(vm) &&
	    !atomic_load(&vm->postcopy_incomplete)) {
		vmm_vm_set_state(vm, VMM_RUNNING);
		if (vmm_thread_start(&vm->post_thread, post_check_main, vm) == 0) {
			vm->post_thread_started = true;
			return 0;
		}
		vmm_vm_post_check_run(vm);	/* no thread: check inline */
	}
	ret = vm->hooks->start_vcpus(vm);
	vmm_vm_set_state(vm, ret == 0 ? VMM_RUNNING : was);
	return ret;
}

/* ---- the lifecycle ---- */

/*
 * The vCPUs stop, then the devices: a device stopped first could see a
 * notify from a vCPU still running. A device that does not stop (-ETIMEDOUT)
 * fails the pause: the VM runs on, every device resumed.
 */
int vmm_vm_pause(struct vmm_vm *vm)
{
	int ret = 0;

	pthread_mutex_lock(&vm->ctl);
	vmm_vm_join_post_check(vm);
	if (vmm_vm_state(vm) == VMM_RUNNING) {
		vm->hooks->pause_vcpus(vm);
		ret = vmm_vm_devices_stop(vm);
		if (ret)
			vm->hooks->resume_vcpus(vm);
		else
			vmm_vm_set_state(vm, VMM_PAUSED);
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/*
 * ctl held: run the VM. A first start from created or incoming, a resume
 * from paused (@resume; vmm_vm_start refuses it, like every other state
 * but running).
 */
static int run_locked(struct vmm_vm *vm, bool resume)
{
	switch (vmm_vm_state(vm)) {
	case VMM_CREATED:
	case VMM_INCOMING: {
		bool incoming = vmm_vm_state(vm) == VMM_INCOMING;
		int ret = start_first(vm);

		/* The destination's NICs start at its resume, after their load. */
		if (!ret)
			ret = vmm_vm_devices_start(vm);
		if (!ret && incoming)
			vmm_vm_announce_after_incoming(vm);	/* wakes its thread only */
		return ret;
	}
	case VMM_RUNNING:
		return 0;
	case VMM_PAUSED:
		if (!resume)
			return -EINVAL;
		vmm_vm_devices_resume(vm);	/* a failed migration: exactly where they stopped */
		vm->hooks->resume_vcpus(vm);
		vmm_vm_set_state(vm, VMM_RUNNING);
		return 0;
	case VMM_POSTMIGRATE:
		return resume ? -EPERM : -EINVAL;	/* the VM lives on the destination now */
	default:
		return resume ? -ESHUTDOWN : -EINVAL;
	}
}

int vmm_vm_resume(struct vmm_vm *vm)
{
	int ret;

	pthread_mutex_lock(&vm->ctl);
	ret = run_locked(vm, true);
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/* ---- the backend entries ---- */

void vmm_vm_destroy(struct vmm *v)
{
	struct vmm_vm *vm = base_of(v);

	if (!vm)
		return;
	pthread_mutex_lock(&vm->ctl);
	vmm_vm_join_post_check(vm);
	vm->hooks->stop_vcpus(vm);
	vmm_vm_devices_destroy(vm);	/* before the RAM goes (free) */
	vmm_vm_set_state(vm, VMM_SHUTDOWN);
	pthread_mutex_unlock(&vm->ctl);
	vm->hooks->free(vm);		/* releases the RAM (vmm_vm_ram_release) in its order */
}

int vmm_vm_start(struct vmm *v)
{
	struct vmm_vm *vm = base_of(v);
	int ret;

	pthread_mutex_lock(&vm->ctl);
	ret = run_locked(vm, false);
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

const struct gw_vm_info *vmm_vm_info(const struct vmm *v)
{
	return &base_of_const(v)->info;
}

enum vmm_state vmm_vm_backend_state(const struct vmm *v)
{
	return vmm_vm_state(base_of_const(v));
}

void vmm_vm_set_postmigrate(struct vmm *v)
{
	struct vmm_vm *vm = base_of(v);

	pthread_mutex_lock(&vm->ctl);
	vmm_vm_join_post_check(vm);
	if (vmm_vm_state(vm) == VMM_RUNNING) {
		vm->hooks->pause_vcpus(vm);
		vmm_vm_devices_stop(vm);	/* logged; the VM never runs again anyway */
	}
	vmm_vm_set_state(vm, VMM_POSTMIGRATE);
	pthread_mutex_unlock(&vm->ctl);
}

uint64_t vmm_vm_progress(const struct vmm *v)
{
	const struct vmm_vm *vm = base_of_const(v);

	return vm->hooks->progress(vm);
}

void vmm_vm_workload(const struct vmm *v, char *buf, size_t len)
{
	struct vmm_vm *vm = (struct vmm_vm *)base_of_const(v);	/* lock only */

	/* A load or setup_ram replaces it on another thread. */
	pthread_mutex_lock(&vm->lock);
	snprintf(buf, len, "%s", vm->spec);
	pthread_mutex_unlock(&vm->lock);
}

/* ctl held: why the check cannot run now (-errno, the reason in @msg), or 0. */
static int check_refused(struct vmm_vm *vm, char *msg, size_t msg_len)
{
	if (!vmm_vm_checkable(vm)) {
		snprintf(msg, msg_len, "the %s workload has no exact check", vm->spec);
		return -EOPNOTSUPP;
	}
	if (!vm->info.nr_blocks || !vm->nr_vcpus ||
	    (vmm_vm_state(vm) == VMM_INCOMING && !vm->loaded)) {
		snprintf(msg, msg_len, "no RAM or vCPU state yet");
		return -EINVAL;
	}
	if (atomic_load(&vm->postcopy_incomplete)) {
		snprintf(msg, msg_len, "RAM still arriving (postcopy): check once the migration completed");
		return -EBUSY;
	}
	return 0;
}

int vmm_vm_check(struct vmm *v, char *msg, size_t msg_len)
{
	struct vmm_vm *vm = base_of(v);
	bool was_running;
	int ret;

	if (msg && msg_len)
		msg[0] = '\0';
	pthread_mutex_lock(&vm->ctl);
	vmm_vm_join_post_check(vm);
	ret = check_refused(vm, msg, msg_len);
	if (!ret) {
		was_running = vmm_vm_state(vm) == VMM_RUNNING;
		if (was_running)
			vm->hooks->pause_vcpus(vm);
		ret = vm->hooks->check(vm, msg, msg_len);
		if (was_running)
			vm->hooks->resume_vcpus(vm);
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

int vmm_vm_post_migration_check(const struct vmm *v, char *msg, size_t msg_len)
{
	struct vmm_vm *vm = (struct vmm_vm *)base_of_const(v);	/* lock only */
	int r;

	pthread_mutex_lock(&vm->lock);
	r = vm->post_check;
	snprintf(msg, msg_len, "%s", vm->post_msg);
	pthread_mutex_unlock(&vm->lock);
	return r;
}
