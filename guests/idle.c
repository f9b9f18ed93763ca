/* SPDX-License-Identifier: MIT */
/*
 * idle: a hlt loop. The x2APIC timer fires every tick_apic_count bus cycles
 * (1 ms by default) and the interrupt handler counts ticks in the vCPU area:
 * progress, and a live LAPIC timer whose state must survive migration.
 */
#include "guest.h"

void guest_main(uint64_t idx, struct gw_boot_info *bi)
{
	guest_init(idx, "idle");
	x2apic_timer_start(bi->tick_apic_count ? bi->tick_apic_count : 1000000);
	for (;;)
		__asm__ __volatile__("sti; hlt; cli" ::: "memory");
}
