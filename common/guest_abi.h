/* SPDX-License-Identifier: MIT */
/*
 * The contract between the KVM VMM (vmm/kvm/) and the tiny guests
 * (guests/): guest-physical layout, the boot-info page, the per-vCPU area
 * and the paravirtual I/O ports. Freestanding (stdint only): both sides
 * include it. Every structure here lives in guest RAM, so it migrates with
 * the RAM; its layout is fixed (little-endian x86-64, offsets asserted).
 *
 * Guest-physical layout (block "sys" at 0, block "ram" at 4 GiB):
 *
 *   0x0000_1000  boot info (struct gw_boot_info), written by the VMM before
 *                the first run, read-only afterwards
 *   0x0000_2000  GDT: null, code64 0x08, data 0x10, TSS 0x18 (16 bytes)
 *   0x0000_3000  TSS (64-bit, 104 bytes used)
 *   0x0000_4000  vCPU areas, GW_VCPU_AREA_BYTES each (struct gw_vcpu_area)
 *   0x0010_0000  guest image (ELF PT_LOAD segments, .bss included), < 2 MiB
 *   0x0020_0000  stacks, GW_GUEST_STACK_BYTES per vCPU, vCPU i's top at
 *                GW_GUEST_STACK_GPA + (i + 1) * GW_GUEST_STACK_BYTES
 *   0x0030_0000  free
 *   0x0040_0000  NIC driver areas (l2fwd, echo): GW_GUEST_NET_AREA_BYTES per
 *                NIC, NIC i's at GW_GUEST_NET_GPA + i * GW_GUEST_NET_AREA_BYTES
 *                (common/vnet_drv.h: driver state, rings, buffers), written
 *                by the guest and the device only (the device's writes are
 *                reported dirty), zero at boot; in block "sys", so that they
 *                migrate with it
 *   0x0080_0000  page tables (PML4, PDPTs, PDs): identity map of both blocks
 *                and of the device windows, with 2 MiB pages
 *   0xd000_0000  device register pages (no RAM: accesses exit), NIC i's
 *                4 KiB page at GW_GUEST_DEV_GPA + i * GW_GUEST_DEV_STRIDE_BYTES,
 *                its line on IOAPIC pin GW_GUEST_DEV_GSI_BASE + i
 *   0xfec0_0000  the in-kernel IOAPIC (the LAPIC runs in x2APIC mode: MSRs)
 *   4 GiB        workload RAM (block "ram"): what --memory sizes, what the
 *                dirty and verify workloads write, what --fill fills
 *
 * The page tables map both device windows (2 MiB each) so that the guest
 * can reach them; they are outside every memslot.
 *
 * Entry: 64-bit mode, CPL 0, interrupts off, RIP = ELF entry, RDI = vCPU
 * index, RSI = boot-info GPA, RSP = top of the vCPU's stack (16-aligned).
 *
 * Paravirtual calls: the guest stores arguments in its vCPU area's args[]
 * and reads a 32-bit value from port GW_PV_PORT_BASE + command (`inl`).
 * One exit per call; the result is the value read. The VMM never writes
 * guest RAM while the guest runs (its writes would escape dirty tracking).
 */
#ifndef GW_GUEST_ABI_H
#define GW_GUEST_ABI_H

#ifndef __ASSEMBLER__
#include <stdint.h>
#define GW_U64(x) x##ull
#else
#define GW_U64(x) x		/* gas takes no suffix */
#endif

#define GW_GUEST_ABI_VERSION 1u
#define GW_BOOT_MAGIC GW_U64(0x746977646f67)	/* "godwit", little-endian */

#define GW_GUEST_PAGE_BYTES GW_U64(4096)
#define GW_GUEST_BOOT_GPA GW_U64(0x1000)
#define GW_GUEST_GDT_GPA GW_U64(0x2000)
#define GW_GUEST_TSS_GPA GW_U64(0x3000)
#define GW_GUEST_VCPU_AREA_GPA GW_U64(0x4000)
#define GW_VCPU_AREA_BYTES GW_U64(128)
#define GW_GUEST_IMAGE_GPA GW_U64(0x100000)
#define GW_GUEST_IMAGE_END GW_U64(0x200000)
#define GW_GUEST_STACK_GPA GW_U64(0x200000)
#define GW_GUEST_STACK_BYTES GW_U64(0x4000)
#define GW_GUEST_PT_GPA GW_U64(0x800000)
#define GW_GUEST_RAM_GPA GW_U64(0x100000000)
#define GW_GUEST_MAX_VCPUS 64u
#define GW_GUEST_DEV_GPA GW_U64(0xd0000000)
#define GW_GUEST_DEV_STRIDE_BYTES GW_U64(0x1000)
#define GW_GUEST_DEV_GSI_BASE 16u
#define GW_GUEST_IOAPIC_GPA GW_U64(0xfec00000)

/* GDT selectors. */
#define GW_GUEST_SEL_CODE 0x08u
#define GW_GUEST_SEL_DATA 0x10u
#define GW_GUEST_SEL_TSS 0x18u

/* Interrupt vectors the guests use (x2APIC mode, in-kernel LAPIC). */
#define GW_GUEST_VEC_TIMER 0x20u
#define GW_GUEST_VEC_SPURIOUS 0xffu
#define GW_GUEST_VEC_NIC 0x30u		/* every NIC's line (echo): guests/nic.h */

/* Offsets used by the assembly stubs (checked below). */
#define GW_VCPU_AREA_TICKS_OFF 24

#ifndef __ASSEMBLER__
/* What the guest runs (boot info `workload`). */
enum gw_guest_workload {
	GW_GUEST_WL_IDLE = 0,		/* hlt loop woken by the LAPIC timer */
	GW_GUEST_WL_DIRTY = 1,		/* rewrite the working set */
	GW_GUEST_WL_VERIFY = 2,		/* verify pages, vmm_verify_page() */
	GW_GUEST_WL_COMPUTE = 3,	/* a deterministic computation (tests) */
	GW_GUEST_WL_L2FWD = 4,		/* poll the NICs and forward (common/vnet_drv.h) */
	GW_GUEST_WL_ECHO = 5,		/* halt until a NIC's interrupt, send each frame back */
};

/*
 * NICs for l2fwd and echo, at GW_GUEST_NET_INFO_GPA in the boot-info page,
 * written by the VMM before the first run like the boot info. dst_mac and
 * dst_set have struct vnet_fwd_cfg's layout (common/vnet_drv.h).
 */
#define GW_GUEST_NET_INFO_GPA (GW_GUEST_BOOT_GPA + 0x800)
#define GW_GUEST_NET_GPA GW_U64(0x400000)
#define GW_GUEST_NET_AREA_BYTES GW_U64(0x100000)	/* >= VNET_DRV_AREA_BYTES */
#define GW_GUEST_NET_MAX_NICS 4u
#define GW_GUEST_NET_END (GW_GUEST_NET_GPA + GW_GUEST_NET_MAX_NICS * GW_GUEST_NET_AREA_BYTES)

struct gw_boot_net {
	uint32_t nr_nics;		/* 1..GW_GUEST_NET_MAX_NICS */
	uint32_t budget;		/* l2fwd: frames per NIC per pass (>= 1) */
	uint64_t mmio_gpa[GW_GUEST_NET_MAX_NICS];	/* NIC i's register page */
	uint32_t gsi[GW_GUEST_NET_MAX_NICS];	/* NIC i's line: IOAPIC pin */
	uint8_t dst_mac[GW_GUEST_NET_MAX_NICS][6];	/* l2fwd: for frames leaving NIC i */
	uint8_t dst_set[GW_GUEST_NET_MAX_NICS];	/* 0: back to the frame's source */
	uint32_t reserved;
};

/* Boot info `flags`. */
#define GW_BOOT_PATTERN_PAGE (1u << 0)	/* dirty: whole pages, else one word per page */
#define GW_BOOT_PACED (1u << 1)		/* call GW_PV_PACE every pace_batch_pages pages */
#define GW_BOOT_RECHECK (1u << 2)	/* verify: re-check the slice after a migration */

struct gw_boot_info {
	uint64_t magic;			/* GW_BOOT_MAGIC */
	uint32_t abi_version;		/* GW_GUEST_ABI_VERSION */
	uint32_t nr_vcpus;
	uint32_t workload;		/* enum gw_guest_workload */
	uint32_t flags;			/* GW_BOOT_* */
	uint64_t ram_gpa;		/* workload RAM base */
	uint64_t ram_pages;
	uint64_t ws_pages;		/* working set, pages from ram_gpa */
	uint64_t pace_batch_pages;	/* pages per GW_PV_PACE call (>= 1) */
	uint64_t seed;
	uint64_t tick_apic_count;	/* idle: LAPIC timer period in bus cycles (1 ns in KVM) */
	uint64_t compute_iters;		/* compute: iterations to run */
	uint64_t reserved;
};

/* Per-vCPU area: slice set by the VMM at boot, the rest written by the guest only. */
struct gw_vcpu_area {
	uint64_t first_page;		/* VMM: slice of the working set, page index from ram_gpa */
	uint64_t nr_pages;		/* VMM: slice length (may be 0) */
	uint64_t written;		/* guest: pages written since boot (dirty, verify),
					 * frames sent (l2fwd, echo) */
	uint64_t ticks;			/* guest: timer ticks (idle), iterations (compute),
					 * NIC interrupts taken (echo) */
	uint64_t seen_migrations;	/* guest: GW_PV_MIGRATIONS count it has reacted to */
	uint64_t state;			/* guest: enum gw_vcpu_run_state */
	uint64_t result;		/* guest: compute result, once done */
	uint64_t nic_isr_seen;		/* guest: OR of the InterruptStatus its NIC handler acked (echo) */
	uint64_t args[4];		/* guest: arguments of the next PV call */
	uint64_t pad[4];
};

enum gw_vcpu_run_state {
	GW_VCPU_BOOTING = 0,
	GW_VCPU_RUNNING = 1,
	GW_VCPU_DONE = 2,		/* compute finished */
	GW_VCPU_FAILED = 3,		/* exception or failed re-check */
};

/*
 * Verify workload, in guest memory: with n = nr_pages and t = written,
 * generation gen = t / n + 1 and cursor = t % n. Pages [0, cursor) of the
 * slice hold vmm_verify_page(page, gen); the page at cursor is being
 * written: each of its words holds its gen or its gen - 1 value (a vCPU can
 * be stopped in the middle of a page); pages (cursor, n) hold gen - 1, where
 * generation 0 is the page's --fill content. `written` is one 64-bit store
 * made after the whole page is written, so (cursor, gen) change together.
 */

/* Paravirtual I/O ports: inl from GW_PV_PORT_BASE + command. */
#define GW_PV_PORT_BASE 0x0510u
#define GW_PV_PORT_COUNT 16u
enum gw_pv_command {
	GW_PV_HELLO = 0,		/* returns GW_GUEST_ABI_VERSION */
	GW_PV_PACE = 1,			/* args[0] pages written since the last call; may block */
	GW_PV_VERIFY_RESULT = 2,	/* args[0] 0 ok / 1 bad, [1] first bad page, [2] pages checked */
	GW_PV_DONE = 3,			/* args[0] result of the computation */
	GW_PV_PANIC = 4,		/* args[0] vector, [1] rip, [2] error code */
	GW_PV_FREE_PAGE_HINT = 5,	/* reserved: args[0] first page, [1] count; returns GW_PV_ENOSYS */
	GW_PV_MIGRATIONS = 6,		/* returns how many times this VM was migrated in (low 32 bits) */
};
#define GW_PV_ENOSYS 0xffffffffu

#define GW_SERIAL_PORT 0x3f8u		/* COM1: THR at +0, LSR at +5 */

_Static_assert(__builtin_offsetof(struct gw_vcpu_area, ticks) == GW_VCPU_AREA_TICKS_OFF,
	       "ticks offset used by the timer stub");
_Static_assert(sizeof(struct gw_boot_info) == 88, "boot info layout");
_Static_assert(sizeof(struct gw_vcpu_area) == GW_VCPU_AREA_BYTES, "vCPU area layout");
_Static_assert(sizeof(struct gw_boot_net) == 88, "NIC boot info layout");
_Static_assert(GW_GUEST_NET_GPA >= GW_GUEST_STACK_GPA + GW_GUEST_MAX_VCPUS * GW_GUEST_STACK_BYTES &&
	       GW_GUEST_NET_END <= GW_GUEST_PT_GPA,
	       "NIC areas between the stacks and the page tables (whose size depends on the RAM)");
_Static_assert(GW_GUEST_NET_INFO_GPA - GW_GUEST_BOOT_GPA >= sizeof(struct gw_boot_info) &&
	       GW_GUEST_NET_INFO_GPA + sizeof(struct gw_boot_net) <= GW_GUEST_GDT_GPA,
	       "NIC boot info in the boot-info page, after the boot info");
_Static_assert(GW_GUEST_VCPU_AREA_GPA + GW_GUEST_MAX_VCPUS * GW_VCPU_AREA_BYTES <= 0x100000ull,
	       "vCPU areas below the image");
_Static_assert(GW_GUEST_STACK_GPA + GW_GUEST_MAX_VCPUS * GW_GUEST_STACK_BYTES <= GW_GUEST_PT_GPA,
	       "stacks below the page tables");
#endif /* __ASSEMBLER__ */

#endif
