/* SPDX-License-Identifier: MIT */
/*
 * l2fwd and echo on the soft VM (vmm/workload.h): vCPU 0 runs the guest's
 * virtio-net driver, common/vnet_drv.c, the very source the KVM guests
 * run. Its register accesses are calls into the VM's MMIO bus (what a KVM
 * exit reaches), its rings and buffers are guest RAM at the tail of the
 * last block (soft_net_area_gpa), written through the VM's mapping like
 * any vCPU write, so the dirty tracker sees them and they migrate.
 *
 *   l2fwd  polls: vnet_fwd_pass over every NIC, budget frames each, and a
 *          checkpoint between passes; after POLL_SPINS empty passes in a
 *          row it naps POLL_NAP_NS (a host thread should not spin a core
 *          of a shared machine while no frame comes; the nap is the
 *          polling period, no interrupt is ever asked for).
 *   echo   halts on NIC 0's line (vmm_irq_lines_wait) and only looks at
 *          the ring when the line was up, or when its last pass left
 *          frames behind: a lost interrupt leaves frames unanswered, which
 *          is what the tests look for. A pause request wakes it without an
 *          acknowledgement, so an interrupt raised then stays pending in
 *          the device's state and the destination takes it.
 * On a destination (base.loaded: a state was applied) the driver binds to the areas that came
 * with the RAM and carries on: no reset, no renegotiation.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <godwit/buf.h>
#include <godwit/log.h>
#include "soft/soft_internal.h"
#include "vnet_drv.h"

#define POLL_SPINS 64u
#define POLL_NAP_NS 100000ull		/* 0.1 ms */
#define ECHO_WAIT_NS 10000000ull	/* a bound: a pause wakes the wait anyway */
#define ECHO_BUDGET 64u

_Static_assert(VMM_WL_NET_MAX_NICS == VNET_DRV_MAX_NICS && VMM_MAX_NICS == VNET_DRV_MAX_NICS,
	       "one NIC bound");
_Static_assert(VMM_WL_FWD_BUDGET_MAX == VNET_DRV_QUEUE_NUM, "a pass takes at most a ring");

/* The register page of one NIC on the VM's bus: the driver's vnet_io context. */
struct net_io {
	const struct vmm_mmio_bus *bus;
	uint64_t base_gpa;
};

static uint32_t io_rd32(void *ctx, uint32_t off)
{
	struct net_io *io = ctx;
	uint8_t b[4];

	vmm_mmio_access(io->bus, io->base_gpa + off, b, 4, false);
	return gw_le32_get(b);
}

static void io_wr32(void *ctx, uint32_t off, uint32_t v)
{
	struct net_io *io = ctx;
	uint8_t b[4];

	gw_le32_put(b, v);
	vmm_mmio_access(io->bus, io->base_gpa + off, b, 4, true);
}

static const struct gw_ram_block *last_block(const struct soft_vm *vm)
{
	return &vm->base.info.blocks[vm->base.info.nr_blocks - 1];
}

uint64_t soft_net_area_gpa(const struct soft_vm *vm, unsigned i)
{
	const struct gw_ram_block *b = last_block(vm);

	return b->gpa + b->size_bytes - (uint64_t)(vm->base.nr_nics - i) * VNET_DRV_AREA_BYTES;
}

int soft_net_check(const struct soft_vm *vm, char *reason, size_t reason_len)
{
	uint64_t need = (uint64_t)vm->base.nr_nics * VNET_DRV_AREA_BYTES;

	if (!vmm_workload_needs_nic(&vm->base.wl) || !vm->base.info.nr_blocks ||
	    last_block(vm)->size_bytes >= need)
		return 0;
	snprintf(reason, reason_len, "workload %s needs %" PRIu64 " bytes of RAM for its NICs' "
		 "rings and buffers", vm->base.spec, need);
	return -EINVAL;
}

/* Bind (or set up) every NIC's driver; false when one failed (logged). */
static bool nics_bind(struct soft_vm *vm, struct vnet_drv *d, struct net_io *io,
		      struct vnet_io *vio, uint32_t flags)
{
	const struct gw_ram_block *b = last_block(vm);

	for (unsigned i = 0; i < vm->base.nr_nics; i++) {
		uint64_t gpa = soft_net_area_gpa(vm, i);
		void *host = (uint8_t *)b->host + (gpa - b->gpa);
		int ret;

		io[i].bus = &vm->base.mmio;
		io[i].base_gpa = vm->base.dev_base_gpa + (uint64_t)i * 4096;
		vio[i] = (struct vnet_io){ .rd32 = io_rd32, .wr32 = io_wr32, .ctx = &io[i] };
		ret = vm->base.loaded ? vnet_drv_attach(&d[i], &vio[i], gpa, host) :
				       vnet_drv_setup(&d[i], &vio[i], gpa, host, flags);
		if (ret) {
			gw_log(GW_LOG_ERROR, "soft", "guest_nic_failed", "nic=%u step=%s err=%d", i,
			       vm->base.loaded ? "attach" : "setup", ret);
			return false;
		}
	}
	gw_log(GW_LOG_INFO, "soft", "guest_nics_ready", "nics=%u attached=%d workload=%s",
	       vm->base.nr_nics, vm->base.loaded, vm->base.spec);
	return true;
}

/* A driver that stopped (a hostile device): said once, then the vCPU idles. */
static void net_failed(struct soft_vcpu *v, int err)
{
	bool slept;

	gw_log(GW_LOG_ERROR, "soft", "guest_nic_stopped", "err=%d", err);
	while (!soft_vcpu_checkpoint(v, &slept))
		soft_vcpu_sleep(v, ECHO_WAIT_NS);
}

static void run_l2fwd(struct soft_vcpu *v, struct vnet_drv *d, unsigned nr)
{
	const struct vmm_workload *wl = &v->vm->base.wl;
	struct vnet_fwd_cfg cfg;
	unsigned empty = 0;
	bool slept;

	for (unsigned i = 0; i < VNET_DRV_MAX_NICS; i++) {
		for (unsigned k = 0; k < 6; k++)
			cfg.dst_mac[i][k] = wl->dst_mac[i][k];
		cfg.dst_set[i] = wl->dst_set[i];
	}
	while (!soft_vcpu_checkpoint(v, &slept)) {
		int n = vnet_fwd_pass(d, nr, &cfg, wl->budget_frames);

		if (n < 0) {
			net_failed(v, n);
			return;
		}
		atomic_fetch_add_explicit(&v->progress, (unsigned)n, memory_order_relaxed);
		empty = n ? 0 : empty + 1;
		if (empty >= POLL_SPINS)
			soft_vcpu_sleep(v, POLL_NAP_NS);
	}
}

static void run_echo(struct soft_vcpu *v, struct vnet_drv *d)
{
	struct soft_vm *vm = v->vm;
	uint32_t line = 1u << vm->base.dev_gsi_base;
	bool slept, behind = false;

	while (!soft_vcpu_checkpoint(v, &slept)) {
		uint32_t up = vmm_irq_lines_wait(&vm->irq, line, behind ? 0 : ECHO_WAIT_NS);
		int n;

		if (atomic_load_explicit(&vm->pause_req, memory_order_acquire))
			continue;	/* to the checkpoint, the interrupt left pending */
		if (!up && !behind)
			continue;	/* nothing was signalled: the ring is not looked at */
		if (up)
			vnet_drv_irq_ack(d);
		n = vnet_fwd_pass(d, 1, NULL, ECHO_BUDGET);
		if (n < 0) {
			net_failed(v, n);
			return;
		}
		atomic_fetch_add_explicit(&v->progress, (unsigned)n, memory_order_relaxed);
		behind = vnet_drv_rx_pending(d);
		if (behind && !n)
			soft_vcpu_sleep(v, POLL_NAP_NS);	/* the transmit ring is full */
	}
}

void soft_net_run(struct soft_vcpu *v)
{
	struct soft_vm *vm = v->vm;
	struct vnet_drv d[VNET_DRV_MAX_NICS];
	struct net_io io[VNET_DRV_MAX_NICS];
	struct vnet_io vio[VNET_DRV_MAX_NICS];
	bool echo = vm->base.wl.kind == VMM_WL_ECHO;

	if (!nics_bind(vm, d, io, vio, echo ? VNET_DRV_RX_IRQ : 0))
		net_failed(v, VNET_ENODEV);
	else if (echo)
		run_echo(v, d);
	else
		run_l2fwd(v, d, vm->base.nr_nics);
}
