/* SPDX-License-Identifier: MIT */
/*
 * Long mode without boot code, the way the KVM selftests start vCPUs: the
 * VMM writes identity page tables (2 MiB pages), a GDT (null, 64-bit code,
 * data, 64-bit TSS) and a TSS into guest memory, and sets the segment
 * registers, CR0/CR3/CR4 and EFER itself. Pure functions over buffers: the
 * unit tests check them with a software page walk and a descriptor decode.
 * The guest-physical layout is in guest_abi.h.
 */
#ifndef GW_KVM_BOOT_H
#define GW_KVM_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/kvm.h>

#define KVM_BOOT_HUGE_BYTES (2ull << 20)	/* one PD entry maps 2 MiB */

/* A guest-physical range to identity-map (rounded out to 2 MiB). */
struct kvm_boot_range {
	uint64_t gpa;
	uint64_t bytes;
};

/* Page-table pages (4 KiB each) needed for @r[0..n): PML4 + PDPTs + PDs. */
uint64_t kvm_boot_pt_pages(const struct kvm_boot_range *r, unsigned n);

/*
 * Write the page tables into @area, which the guest sees at @area_gpa
 * (4 KiB aligned, @area_bytes long, zeroed by the caller): PML4 first, then
 * PDPTs and PDs as needed. Entries are present, writable, supervisor; PD
 * entries map 2 MiB pages. CR3 = @area_gpa. 0, or -ENOSPC when @area is too
 * small, -EINVAL for a range beyond 48-bit addresses.
 */
int kvm_boot_pt_build(uint8_t *area, uint64_t area_bytes, uint64_t area_gpa,
		      const struct kvm_boot_range *r, unsigned n);

/* Bytes of block "sys" for @ram_bytes of workload RAM (2 MiB multiple). */
uint64_t kvm_boot_sys_bytes(uint64_t ram_bytes);
/*
 * The ranges the boot page tables map for @ram_bytes, in address order:
 * sys, the device register window, the IOAPIC's, ram. KVM_BOOT_RANGES.
 */
#define KVM_BOOT_RANGES 4u
unsigned kvm_boot_ranges(uint64_t ram_bytes, struct kvm_boot_range r[KVM_BOOT_RANGES]);

/* The segments the vCPUs start with (selectors as in guest_abi.h). */
void kvm_boot_seg_code64(struct kvm_segment *s);
void kvm_boot_seg_data(struct kvm_segment *s);
void kvm_boot_seg_tss(struct kvm_segment *s, uint64_t tss_gpa);

/*
 * Descriptor for @s: 8 bytes for code/data (s->s == 1), 16 bytes for a
 * system segment (TSS). Writes *lo (and *hi for system segments).
 */
void kvm_boot_desc_encode(const struct kvm_segment *s, uint64_t *lo, uint64_t *hi);

/*
 * The GDT page (@gdt, 4 KiB): null, code64, data, TSS (two slots). Returns
 * the GDT limit (bytes - 1) to load with it.
 */
uint16_t kvm_boot_gdt_build(uint8_t *gdt, uint64_t tss_gpa);

/* The 64-bit TSS (@tss, at least 104 bytes): zero, no I/O bitmap. */
void kvm_boot_tss_build(uint8_t *tss);

/*
 * Long-mode system registers over @s as KVM_GET_SREGS returned them
 * (apic_base and interrupt bitmap kept): segments, GDT, an empty IDT (the
 * guest loads its own), CR0 = PE|MP|ET|NE|WP|PG, CR4 = PAE|OSFXSR|
 * OSXMMEXCPT (+OSXSAVE when @xsave), EFER = LME|LMA, CR3 = @cr3.
 */
void kvm_boot_sregs(struct kvm_sregs *s, uint64_t cr3, bool xsave);

#define KVM_CR0_PE (1ull << 0)
#define KVM_CR0_MP (1ull << 1)
#define KVM_CR0_ET (1ull << 4)
#define KVM_CR0_NE (1ull << 5)
#define KVM_CR0_WP (1ull << 16)
#define KVM_CR0_PG (1ull << 31)
#define KVM_CR4_PAE (1ull << 5)
#define KVM_CR4_OSFXSR (1ull << 9)
#define KVM_CR4_OSXMMEXCPT (1ull << 10)
#define KVM_CR4_OSXSAVE (1ull << 18)
#define KVM_EFER_LME (1ull << 8)
#define KVM_EFER_LMA (1ull << 10)

#define KVM_PTE_P (1ull << 0)
#define KVM_PTE_RW (1ull << 1)
#define KVM_PTE_PS (1ull << 7)
#define KVM_PTE_ADDR_MASK 0x000ffffffffff000ull

#endif
