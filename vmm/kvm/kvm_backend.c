/* SPDX-License-Identifier: MIT */
/*
 * struct vmm_backend vmm_kvm: creation, lifecycle and the engine callbacks
 * of the KVM VM (kvm_vm.h). Lifecycle as vmm.h describes:
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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <godwit/log.h>
#include "fill.h"
#include "lifecycle.h"
#include "kvm/kvm_boot.h"
#include "kvm/kvm_guests.h"
#include "kvm/kvm_internal.h"

#define FILL_THREADS 2

static struct kvm_vm *to_kvm(const struct vmm *v)
{
	return (struct kvm_vm *)v;
}

static enum vmm_state vm_state(const struct kvm_vm *vm)
{
	return (enum vmm_state)atomic_load(&((struct kvm_vm *)vm)->state);
}

static void set_state(struct kvm_vm *vm, enum vmm_state st)
{
	atomic_store(&vm->state, (int)st);
}

const struct kvm_guest_image *kvm_guest_image_find(const char *name)
{
	for (const struct kvm_guest_image *g = kvm_guest_images; g->name; g++)
		if (!strcmp(g->name, name))
			return g;
	return NULL;
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

/* ---- creation ---- */

static int check_config(const struct vmm_config *cfg, char *err, size_t err_len)
{
	if (cfg->nr_vcpus < 1 || cfg->nr_vcpus > KVM_MAX_VCPUS) {
		kvm_why(err, err_len, "vcpus must be 1..%u, not %u", KVM_MAX_VCPUS, cfg->nr_vcpus);
		return -EINVAL;
	}
	if (cfg->memory_bytes % GW_PAGE_BYTES || cfg->memory_bytes > KVM_MAX_RAM_BYTES ||
	    (!cfg->memory_bytes && !cfg->incoming)) {
		kvm_why(err, err_len, "memory must be a non-zero multiple of %u bytes, at most %llu",
			GW_PAGE_BYTES, (unsigned long long)KVM_MAX_RAM_BYTES);
		return -EINVAL;
	}
	if ((unsigned)cfg->fill > VMM_FILL_TEXT) {
		kvm_why(err, err_len, "unknown fill");
		return -EINVAL;
	}
	return 0;
}

/*
 * The dirty ring: decided now, since KVM wants it before any vCPU exists,
 * and a VM with a ring has no dirty bitmap. Only when asked (as QEMU's
 * dirty-ring-size): the bitmap (kvm-log) is the default because it holds
 * whatever the guest does, while rings overflow on hosts that run guests
 * through KVM's instruction emulator (src/mem/dirty_kvm_ring.c).
 */
static uint32_t ring_entries_for(const struct kvm_vm *vm, const struct vmm_config *cfg)
{
	enum kvm_dirty_mode m = vm->opts.dirty;

	if (m == KVM_DIRTY_MODE_AUTO && cfg->dirty_backend == GW_DIRTY_KVM_RING)
		m = KVM_DIRTY_MODE_RING;
	if (m != KVM_DIRTY_MODE_RING)
		return 0;
	return vm->opts.ring_entries ? vm->opts.ring_entries : KVM_DEFAULT_RING_ENTRIES;
}

static struct kvm_vm *vm_alloc(const struct vmm_config *cfg, const struct kvm_vm_opts *opts)
{
	struct kvm_vm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	if (opts)
		vm->opts = *opts;
	else
		vm->opts.guest_recheck = -1;
	vm->kvm_fd = vm->vm_fd = vm->ring_full_efd = -1;
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++) {
		vm->vcpus[i].fd = -1;
		vm->vcpus[i].vm = vm;
		vm->vcpus[i].index = i;
	}
	pthread_mutex_init(&vm->ctl, NULL);
	pthread_mutex_init(&vm->lock, NULL);
	kvm_pause_init(&vm->pause, kvm_kick, vm);
	vm->memory_file = cfg->memory_file ? strdup(cfg->memory_file) : NULL;
	vm->prealloc = cfg->prealloc;
	vm->fill = cfg->incoming ? VMM_FILL_NONE : cfg->fill;
	vm->seed = cfg->seed;
	vm->has_pit = !vm->opts.no_pit;
	vm->info.kvm_vm_fd = -1;
	vm->info.kvm_dirty_ring_full_efd = -1;
	return vm;
}

static void vm_free(struct kvm_vm *vm)
{
	kvm_vcpus_destroy(vm);
	kvm_ram_free(vm);
	if (vm->ring_full_efd >= 0)
		close(vm->ring_full_efd);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	kvm_pause_destroy(&vm->pause);
	free(vm->host_compat);
	free((char *)vm->memory_file);
	pthread_mutex_destroy(&vm->ctl);
	pthread_mutex_destroy(&vm->lock);
	free(vm);
}

/* Publish what the engine's trackers need (kvm-log, kvm-ring). */
static void publish_info(struct kvm_vm *vm)
{
	vm->info.kvm_vm_fd = vm->vm_fd;
	vm->info.nr_vcpus = vm->nr_vcpus;
	vm->info.kvm_dirty_ring_entries = vm->ring_entries;
	vm->info.kvm_dirty_rings = vm->ring_entries ? vm->rings : NULL;
	vm->info.kvm_dirty_ring_fetch = vm->ring_entries ? vm->ring_fetch : NULL;
	vm->info.kvm_dirty_ring_full_efd = vm->ring_full_efd;
}

/* Blocks "sys" and "ram" for @ram_bytes of workload RAM. */
static int ram_create(struct kvm_vm *vm, uint64_t ram_bytes, bool *ram_fresh,
		      char *why, size_t why_len)
{
	bool fresh;
	int ret;

	ret = kvm_ram_add(vm, "sys", 0, kvm_boot_sys_bytes(ram_bytes), -1, 0, &fresh, why, why_len);
	if (!ret)
		ret = kvm_ram_add(vm, "ram", GW_GUEST_RAM_GPA, ram_bytes, -1, 0, ram_fresh, why, why_len);
	return ret;
}

/* Initial content of block "ram" (page indices from its start). */
static int fill_ram(struct kvm_vm *vm, bool fresh, char *why, size_t why_len)
{
	struct gw_vm_info ram_only = { .nr_blocks = 1, .kvm_vm_fd = -1 };
	uint64_t t0 = gw_now_ns();
	int ret;

	ram_only.blocks[0] = vm->info.blocks[KVM_BLOCK_RAM];
	ret = vmm_fill_ram(&ram_only, vm->fill, vm->seed, fresh, FILL_THREADS);
	if (ret) {
		kvm_why(why, why_len, "fill: %s", strerror(-ret));
		return ret;
	}
	vm->init_fill = vm->fill;
	vm->init_seed = vm->seed;
	vm->init_known = fresh || vm->fill != VMM_FILL_NONE;
	if (vm->fill != VMM_FILL_NONE)
		gw_log(GW_LOG_INFO, "kvm", "ram_filled", "fill=%s bytes=%" PRIu64 " ms=%.1f",
		       vmm_fill_name(vm->fill), vm->ram_pages * GW_PAGE_BYTES, (gw_now_ns() - t0) / 1e6);
	return 0;
}

/* A source VM: RAM, content, boot structures, vCPUs at the guest's entry. */
static int build_source(struct kvm_vm *vm, const struct vmm_config *cfg, char *why, size_t why_len)
{
	struct kvm_cpuid_entry2 *cpuid;
	uint32_t nr_cpuid = 0;
	bool fresh;
	int ret;

	ret = ram_create(vm, cfg->memory_bytes, &fresh, why, why_len);
	if (!ret)
		ret = fill_ram(vm, fresh, why, why_len);
	if (ret)
		return ret;
	kvm_layout_workload(vm);
	ret = kvm_boot_write(vm, cfg->nr_vcpus, why, why_len);
	if (ret)
		return ret;
	cpuid = kvm_supported_cpuid(vm->kvm_fd, &nr_cpuid);
	if (!cpuid) {
		ret = -errno;
		kvm_why(why, why_len, "KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
		return ret;
	}
	ret = kvm_vcpus_create(vm, cfg->nr_vcpus, cpuid, nr_cpuid, true, why, why_len);
	free(cpuid);
	return ret;
}

struct vmm *vmm_kvm_create_opts(const struct vmm_config *cfg, const struct kvm_vm_opts *opts,
				char *err, size_t err_len)
{
	char why[KVM_MSG_MAX] = "";
	struct kvm_vm *vm;
	int ret;

	if (!cfg) {
		errno = EINVAL;
		return NULL;
	}
	ret = check_config(cfg, err, err_len);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	vm = vm_alloc(cfg, opts);
	if (!vm) {
		errno = ENOMEM;
		return NULL;
	}
	ret = vmm_workload_parse(cfg->workload, &vm->wl, why, sizeof(why));
	if (ret)
		goto fail;
	if (vm->wl.kind == VMM_WL_BALLOON) {	/* no guest frees pages: refused, not run as idle */
		snprintf(why, sizeof(why), "the balloon workload (free-page hints) runs on the soft VM only: "
			 "use --accel soft");
		ret = -EOPNOTSUPP;
		goto fail;
	}
	snprintf(vm->guest, sizeof(vm->guest), "%s", vm->opts.guest ? vm->opts.guest :
		 vm->wl.kind == VMM_WL_DIRTY ? "dirty" : vm->wl.kind == VMM_WL_VERIFY ? "verify" : "idle");
	ret = kvm_open_dev(why, sizeof(why));
	if (ret < 0)
		goto fail;
	vm->kvm_fd = ret;
	ret = kvm_probe_caps(vm->kvm_fd, -1, &vm->caps, why, sizeof(why));
	if (ret)
		goto fail;
	vm->ring_entries = ring_entries_for(vm, cfg);
	ret = kvm_vm_fd_setup(vm, why, sizeof(why));
	if (ret)
		goto fail;
	if (cfg->incoming && kvm_host_compat_probe(vm))
		gw_log(GW_LOG_WARN, "kvm", "host_probe_failed", "the load will probe instead");
	kvm_layout_workload(vm);	/* no RAM yet on a destination: ws 0 until setup/load */
	if (cfg->memory_bytes && cfg->incoming) {
		bool fresh;

		ret = ram_create(vm, cfg->memory_bytes, &fresh, why, sizeof(why));
		kvm_layout_workload(vm);
	} else if (cfg->memory_bytes) {
		ret = build_source(vm, cfg, why, sizeof(why));
	}
	if (ret)
		goto fail;
	publish_info(vm);
	set_state(vm, cfg->incoming ? VMM_INCOMING : VMM_CREATED);
	gw_log(GW_LOG_INFO, "kvm", "vm_created", "memory_bytes=%" PRIu64 " vcpus=%u fill=%s "
	       "workload=%s guest=%s dirty_ring_entries=%u pit=%d msrs=%u incoming=%d",
	       cfg->memory_bytes, cfg->incoming ? 0 : cfg->nr_vcpus, vmm_fill_name(vm->fill),
	       vm->spec, vm->guest, vm->ring_entries, vm->has_pit, vm->nr_msrs, cfg->incoming);
	return (struct vmm *)vm;
fail:
	kvm_why(err, err_len, "%s", why[0] ? why : strerror(-ret));
	vm_free(vm);
	errno = ret < 0 ? -ret : EINVAL;
	return NULL;
}

static struct vmm *kvm_create(const struct vmm_config *cfg, char *err, size_t err_len)
{
	return vmm_kvm_create_opts(cfg, NULL, err, err_len);
}

/* ---- lifecycle ---- */

static int post_check_run(struct kvm_vm *vm)
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
	post_check_run(vm);
	ret = kvm_vcpus_start(vm);
	if (ret)
		gw_log(GW_LOG_ERROR, "kvm", "vcpus_start_failed", "err=%d", ret);
	return NULL;
}

/* ctl held: wait for a pending post-migration check and vCPU start. */
static void join_post_check(struct kvm_vm *vm)
{
	if (vm->post_thread_started) {
		pthread_join(vm->post_thread, NULL);
		vm->post_thread_started = false;
	}
}

/* ctl held, state created or incoming: the first start of the vCPUs. */
static int start_first_locked(struct kvm_vm *vm)
{
	int ret;

	if (vm_state(vm) == VMM_INCOMING) {
		if (!vm->loaded)
			return -EINVAL;
		/* Under postcopy the check waits for every page (postcopy_ram(true)). */
		if (vm->wl.kind == VMM_WL_VERIFY && !atomic_load(&vm->postcopy_incomplete)) {
			set_state(vm, VMM_RUNNING);
			if (pthread_create(&vm->post_thread, NULL, post_check_main, vm) == 0) {
				vm->post_thread_started = true;
				return 0;
			}
			post_check_run(vm);
		}
	}
	if (!vm->nr_vcpus)
		return -EINVAL;
	ret = kvm_vcpus_start(vm);
	if (ret == 0)
		set_state(vm, VMM_RUNNING);
	return ret;
}

static int kvm_start(struct vmm *v)
{
	struct kvm_vm *vm = to_kvm(v);
	int ret = 0;

	pthread_mutex_lock(&vm->ctl);
	switch (vm_state(vm)) {
	case VMM_CREATED:
	case VMM_INCOMING:
		ret = start_first_locked(vm);
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
	join_post_check(vm);
	kvm_vcpus_stop(vm);
	set_state(vm, VMM_SHUTDOWN);
	pthread_mutex_unlock(&vm->ctl);
	vm_free(vm);
}

static const struct gw_vm_info *kvm_info(const struct vmm *v)
{
	return &to_kvm(v)->info;
}

static enum vmm_state kvm_state(const struct vmm *v)
{
	return vm_state(to_kvm(v));
}

static void kvm_set_postmigrate(struct vmm *v)
{
	struct kvm_vm *vm = to_kvm(v);

	pthread_mutex_lock(&vm->ctl);
	join_post_check(vm);
	if (vm_state(vm) == VMM_RUNNING)
		kvm_pause_all(&vm->pause);
	set_state(vm, VMM_POSTMIGRATE);
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
	join_post_check(vm);
	if (vm->wl.kind != VMM_WL_VERIFY) {
		kvm_why(msg, msg_len, "the %s workload has no exact check", vm->spec);
		ret = -EOPNOTSUPP;
	} else if (!vm->nr_vcpus || vm->info.nr_blocks < 2) {
		kvm_why(msg, msg_len, "no RAM or vCPU state yet");
		ret = -EINVAL;
	} else if (atomic_load(&vm->postcopy_incomplete)) {
		kvm_why(msg, msg_len, "RAM still arriving (postcopy): check once the migration completed");
		ret = -EBUSY;
	} else {
		was_running = vm_state(vm) == VMM_RUNNING;
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

/* ---- engine callbacks ---- */

/* The lifecycle's hooks (lifecycle.h): ctl held. */
static enum vmm_state life_state(const void *vm)
{
	return vm_state(vm);
}

static void life_set_state(void *vm, enum vmm_state st)
{
	set_state(vm, st);
}

static void life_join_post_check(void *vm)
{
	join_post_check(vm);
}

static void life_pause_vcpus(void *opaque)
{
	struct kvm_vm *vm = opaque;
	uint64_t t0 = gw_now_ns();

	kvm_pause_all(&vm->pause);
	gw_debug("kvm", "paused", "vcpus=%u us=%.1f", vm->nr_vcpus, (gw_now_ns() - t0) / 1e3);
}

static void life_resume_vcpus(void *opaque)
{
	kvm_pause_resume_all(&((struct kvm_vm *)opaque)->pause);
}

static int life_start_first(void *vm)
{
	return start_first_locked(vm);
}

static int life_save_state(void *opaque, struct gw_state *st)
{
	struct kvm_vm *vm = opaque;

	return vm->nr_vcpus ? kvm_state_save(vm, st) : -EINVAL;
}

/* Incoming but loaded already, or with vCPUs: not ready for a state. */
static const char *life_load_busy(const void *opaque)
{
	const struct kvm_vm *vm = opaque;

	return vm->loaded ? " (state loaded)" : vm->nr_vcpus ? "" : NULL;
}

static int life_load_state(void *opaque, struct gw_state *st)
{
	struct kvm_vm *vm = opaque;
	int ret;

	if (vm->info.nr_blocks != 2)
		return gw_state_reject(st, -EINVAL, "KVM VM has no RAM yet");
	ret = kvm_state_load(vm, st);
	if (!ret) {
		vm->loaded = true;
		publish_info(vm);
	}
	return ret;
}

static const struct vmm_life_ops kvm_life_ops = {
	.name = "KVM",
	.state = life_state,
	.set_state = life_set_state,
	.join_post_check = life_join_post_check,
	.pause_vcpus = life_pause_vcpus,
	.resume_vcpus = life_resume_vcpus,
	.start_first = life_start_first,
	.save_state = life_save_state,
	.load_busy = life_load_busy,
	.load_state = life_load_state,
};

static struct vmm_life life_of(struct kvm_vm *vm)
{
	return (struct vmm_life){ .ops = &kvm_life_ops, .vm = vm, .ctl = &vm->ctl };
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

/* The only layout a KVM destination accepts: "sys" at 0 sized for "ram" at 4 GiB. */
static int check_layout(const struct gw_vm_info *want, char *reason, size_t reason_len)
{
	const struct gw_ram_block *s, *r;

	if (!want || want->nr_blocks != 2) {
		kvm_why(reason, reason_len, "KVM VM needs 2 RAM blocks (sys, ram), source has %u",
			want ? want->nr_blocks : 0);
		return -EINVAL;
	}
	s = &want->blocks[KVM_BLOCK_SYS];
	r = &want->blocks[KVM_BLOCK_RAM];
	if (strncmp(s->name, "sys", sizeof(s->name)) || strncmp(r->name, "ram", sizeof(r->name)) ||
	    s->gpa != 0 || r->gpa != GW_GUEST_RAM_GPA) {
		kvm_why(reason, reason_len, "RAM layout is not a KVM guest's (want sys@0, ram@%#llx)",
			(unsigned long long)GW_GUEST_RAM_GPA);
		return -EINVAL;
	}
	if (s->page_size_bytes != GW_PAGE_BYTES || r->page_size_bytes != GW_PAGE_BYTES ||
	    !r->size_bytes || r->size_bytes % GW_PAGE_BYTES || r->size_bytes > KVM_MAX_RAM_BYTES ||
	    s->size_bytes != kvm_boot_sys_bytes(r->size_bytes)) {
		kvm_why(reason, reason_len, "RAM blocks of %llu and %llu bytes refused",
			(unsigned long long)s->size_bytes, (unsigned long long)r->size_bytes);
		return -EINVAL;
	}
	return 0;
}

/* ctl held, layout checked: create the blocks or take the received fds. */
static int setup_blocks(struct kvm_vm *vm, const struct gw_vm_info *want, bool *taken,
			char *reason, size_t reason_len)
{
	int ret = 0;

	if (vm->info.nr_blocks) {
		for (unsigned i = 0; i < 2 && !ret; i++) {
			if (vm->info.blocks[i].size_bytes != want->blocks[i].size_bytes) {
				kvm_why(reason, reason_len, "layout mismatch: source %s is %llu bytes, here %llu",
					want->blocks[i].name,
					(unsigned long long)want->blocks[i].size_bytes,
					(unsigned long long)vm->info.blocks[i].size_bytes);
				return -EINVAL;
			}
		}
		for (unsigned i = 0; i < 2 && !ret; i++) {
			if (want->blocks[i].fd < 0)
				continue;
			taken[i] = true;	/* kvm_ram_replace owns it, also on failure */
			ret = kvm_ram_replace(vm, i, want->blocks[i].fd, want->blocks[i].fd_offset_bytes,
					      reason, reason_len);
		}
		return ret;
	}
	for (unsigned i = 0; i < 2 && !ret; i++) {
		const struct gw_ram_block *b = &want->blocks[i];
		bool fresh;

		taken[i] = true;		/* kvm_ram_add owns it, also on failure */
		ret = kvm_ram_add(vm, b->name, b->gpa, b->size_bytes, b->fd, b->fd_offset_bytes,
				  &fresh, reason, reason_len);
	}
	return ret;
}

static int ops_setup_ram(void *opaque, const struct gw_vm_info *want, struct gw_vm_info *out,
			 char *reason, size_t reason_len)
{
	struct kvm_vm *vm = opaque;
	bool taken[2] = { false, false };
	int ret;

	pthread_mutex_lock(&vm->ctl);
	if (vm_state(vm) != VMM_INCOMING || vm->nr_vcpus) {
		kvm_why(reason, reason_len, "KVM VM is %s, not waiting for a migration",
			vmm_state_name(vm_state(vm)));
		ret = -EBUSY;
	} else {
		ret = check_layout(want, reason, reason_len);
		if (!ret)
			ret = setup_blocks(vm, want, taken, reason, reason_len);
	}
	if (!ret) {
		kvm_layout_workload(vm);
		publish_info(vm);
		*out = vm->info;
		gw_log(GW_LOG_INFO, "kvm", "ram_setup", "ram_bytes=%" PRIu64 " local=%d",
		       vm->ram_pages * GW_PAGE_BYTES, want->blocks[0].fd >= 0);
	}
	/* Received fds are ours: never leak them. */
	for (unsigned i = 0; want && i < want->nr_blocks && i < GW_MAX_RAM_BLOCKS; i++)
		if (want->blocks[i].fd >= 0 && (i >= 2 || !taken[i]))
			close(want->blocks[i].fd);
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/* Auto-converge and dirty limit: one atomic store each, applied at the vCPUs' pace calls. */
static int ops_throttle(void *opaque, unsigned pct)
{
	struct kvm_vm *vm = opaque;

	if (pct > 99)
		return -EINVAL;
	atomic_store(&vm->throttle_pct, pct);
	return 0;
}

static int ops_dirty_limit(void *opaque, uint64_t bytes_per_sec)
{
	struct kvm_vm *vm = opaque;

	atomic_store(&vm->dirty_limit_bps, bytes_per_sec);
	return 0;
}

/*
 * Postcopy (destination). KVM reaches guest RAM through the memslots' host
 * addresses, the very mappings the engine put under userfaultfd: a vCPU
 * touching a page not there yet makes KVM_RUN fault on it in the kernel
 * and wait until the engine's fault handler places it. The VMM's own
 * accesses go through the mappings too (PV calls on vCPU threads), except
 * progress (the fds: stale, never blocking) and the verify check (pread:
 * deferred to the end).
 */
static int ops_vcpu_of_thread(void *opaque, pid_t tid)
{
	struct kvm_vm *vm = opaque;

	/* Lock-free: nr_vcpus is fixed before the resume that starts the threads. */
	for (unsigned i = 0; tid && i < vm->nr_vcpus; i++)
		if (atomic_load(&vm->vcpus[i].tid) == tid)
			return (int)i;
	return -1;
}

static int ops_postcopy_ram(void *opaque, bool complete)
{
	struct kvm_vm *vm = opaque;

	gw_log(GW_LOG_INFO, "kvm", "postcopy_ram", "complete=%d", complete);
	if (!complete) {
		atomic_store(&vm->postcopy_incomplete, true);	/* before the resume (engine) */
		return (int)vm->nr_vcpus;
	}
	pthread_mutex_lock(&vm->ctl);
	atomic_store(&vm->postcopy_incomplete, false);
	if (vm->wl.kind == VMM_WL_VERIFY && vm_state(vm) == VMM_RUNNING) {
		/* Every page is here: the check the first resume deferred, the vCPUs parked. */
		kvm_pause_all(&vm->pause);
		post_check_run(vm);
		kvm_pause_resume_all(&vm->pause);
	}
	pthread_mutex_unlock(&vm->ctl);
	return 0;
}

static const struct gw_vm_ops kvm_engine_ops = {
	.pause = ops_pause,
	.resume = ops_resume,
	.save_state = ops_save_state,
	.load_state = ops_load_state,
	.setup_ram = ops_setup_ram,
	.throttle = ops_throttle,
	.dirty_limit = ops_dirty_limit,
	.vcpu_of_thread = ops_vcpu_of_thread,
	.postcopy_ram = ops_postcopy_ram,
};

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
