/* SPDX-License-Identifier: MIT */
/* Page tables, GDT, TSS and system registers for a 64-bit start (kvm_boot.h). */
#include <errno.h>
#include <string.h>
#include "guest_abi.h"
#include "kvm/kvm_boot.h"

#define PAGE_BYTES 4096ull
#define GIB (1ull << 30)
#define PML4_SPAN (1ull << 39)		/* one PDPT page maps 512 GiB */
#define ADDR_LIMIT (1ull << 47)		/* lower canonical half, 4-level paging */

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

uint64_t kvm_boot_pt_pages(const struct kvm_boot_range *r, unsigned n)
{
	uint64_t pages = 1, last_gib = UINT64_MAX, last_512 = UINT64_MAX;

	for (unsigned i = 0; i < n; i++) {
		uint64_t start = r[i].gpa / KVM_BOOT_HUGE_BYTES * KVM_BOOT_HUGE_BYTES;
		uint64_t end = round_up(r[i].gpa + r[i].bytes, KVM_BOOT_HUGE_BYTES);

		if (!r[i].bytes)
			continue;
		for (uint64_t g = start / GIB; g <= (end - 1) / GIB; g++) {
			if (g != last_gib)
				pages++;	/* a PD */
			if (g * GIB / PML4_SPAN != last_512)
				pages++;	/* a PDPT */
			last_gib = g;
			last_512 = g * GIB / PML4_SPAN;
		}
	}
	return pages;
}

/* The table page an entry points to, allocating it when absent. */
static uint8_t *next_level(uint8_t *area, uint64_t area_bytes, uint64_t area_gpa,
			   uint8_t *entry, uint64_t *used_pages)
{
	uint64_t e = get64(entry), off;

	if (e & KVM_PTE_P) {
		off = (e & KVM_PTE_ADDR_MASK) - area_gpa;
		return area + off;
	}
	if ((*used_pages + 1) * PAGE_BYTES > area_bytes)
		return NULL;
	off = *used_pages * PAGE_BYTES;
	(*used_pages)++;
	memset(area + off, 0, PAGE_BYTES);
	put64(entry, (area_gpa + off) | KVM_PTE_P | KVM_PTE_RW);
	return area + off;
}

int kvm_boot_pt_build(uint8_t *area, uint64_t area_bytes, uint64_t area_gpa,
		      const struct kvm_boot_range *r, unsigned n)
{
	uint64_t used_pages = 1;

	if (area_bytes < PAGE_BYTES || area_gpa % PAGE_BYTES)
		return -EINVAL;
	memset(area, 0, PAGE_BYTES);		/* PML4 */
	for (unsigned i = 0; i < n; i++) {
		uint64_t start = r[i].gpa / KVM_BOOT_HUGE_BYTES * KVM_BOOT_HUGE_BYTES;
		uint64_t end = round_up(r[i].gpa + r[i].bytes, KVM_BOOT_HUGE_BYTES);

		if (r[i].gpa + r[i].bytes < r[i].gpa || end > ADDR_LIMIT)
			return -EINVAL;
		for (uint64_t a = start; a < end; a += KVM_BOOT_HUGE_BYTES) {
			uint8_t *pdpt, *pd;

			pdpt = next_level(area, area_bytes, area_gpa, area + (a >> 39 & 511) * 8,
					  &used_pages);
			if (!pdpt)
				return -ENOSPC;
			pd = next_level(area, area_bytes, area_gpa, pdpt + (a >> 30 & 511) * 8,
					&used_pages);
			if (!pd)
				return -ENOSPC;
			put64(pd + (a >> 21 & 511) * 8, a | KVM_PTE_P | KVM_PTE_RW | KVM_PTE_PS);
		}
	}
	return 0;
}

static unsigned ranges(uint64_t sys_bytes, uint64_t ram_bytes, struct kvm_boot_range *r)
{
	r[0] = (struct kvm_boot_range){ 0, sys_bytes };
	r[1] = (struct kvm_boot_range){ GW_GUEST_DEV_GPA, KVM_BOOT_HUGE_BYTES };
	r[2] = (struct kvm_boot_range){ GW_GUEST_IOAPIC_GPA, KVM_BOOT_HUGE_BYTES };
	r[3] = (struct kvm_boot_range){ GW_GUEST_RAM_GPA, round_up(ram_bytes, KVM_BOOT_HUGE_BYTES) };
	return KVM_BOOT_RANGES;
}

uint64_t kvm_boot_sys_bytes(uint64_t ram_bytes)
{
	/* The sys block stays far below 1 GiB: count with its whole first GiB. */
	struct kvm_boot_range r[KVM_BOOT_RANGES];
	unsigned n = ranges(GIB, ram_bytes, r);

	return round_up(GW_GUEST_PT_GPA + kvm_boot_pt_pages(r, n) * PAGE_BYTES,
			KVM_BOOT_HUGE_BYTES);
}

unsigned kvm_boot_ranges(uint64_t ram_bytes, struct kvm_boot_range r[KVM_BOOT_RANGES])
{
	return ranges(kvm_boot_sys_bytes(ram_bytes), ram_bytes, r);
}

void kvm_boot_seg_code64(struct kvm_segment *s)
{
	memset(s, 0, sizeof(*s));
	s->selector = GW_GUEST_SEL_CODE;
	s->limit = 0xffffffffu;
	s->type = 0xb;			/* execute/read, accessed */
	s->s = 1;
	s->present = 1;
	s->l = 1;
	s->g = 1;
}

void kvm_boot_seg_data(struct kvm_segment *s)
{
	memset(s, 0, sizeof(*s));
	s->selector = GW_GUEST_SEL_DATA;
	s->limit = 0xffffffffu;
	s->type = 0x3;			/* read/write, accessed */
	s->s = 1;
	s->present = 1;
	s->db = 1;
	s->g = 1;
}

void kvm_boot_seg_tss(struct kvm_segment *s, uint64_t tss_gpa)
{
	memset(s, 0, sizeof(*s));
	s->selector = GW_GUEST_SEL_TSS;
	s->base = tss_gpa;
	s->limit = 0x67;
	s->type = 0xb;			/* busy 64-bit TSS */
	s->present = 1;
}

void kvm_boot_desc_encode(const struct kvm_segment *s, uint64_t *lo, uint64_t *hi)
{
	uint64_t limit = s->g ? s->limit >> 12 : s->limit;

	*lo = (limit & 0xffff) | (s->base & 0xffffff) << 16 |
	      (uint64_t)(s->type & 0xf) << 40 | (uint64_t)(s->s & 1) << 44 |
	      (uint64_t)(s->dpl & 3) << 45 | (uint64_t)(s->present & 1) << 47 |
	      (limit >> 16 & 0xf) << 48 | (uint64_t)(s->avl & 1) << 52 |
	      (uint64_t)(s->l & 1) << 53 | (uint64_t)(s->db & 1) << 54 |
	      (uint64_t)(s->g & 1) << 55 | (s->base >> 24 & 0xff) << 56;
	if (hi)
		*hi = s->s ? 0 : s->base >> 32;
}

uint16_t kvm_boot_gdt_build(uint8_t *gdt, uint64_t tss_gpa)
{
	struct kvm_segment seg;
	uint64_t lo, hi;

	memset(gdt, 0, PAGE_BYTES);
	kvm_boot_seg_code64(&seg);
	kvm_boot_desc_encode(&seg, &lo, NULL);
	put64(gdt + GW_GUEST_SEL_CODE, lo);
	kvm_boot_seg_data(&seg);
	kvm_boot_desc_encode(&seg, &lo, NULL);
	put64(gdt + GW_GUEST_SEL_DATA, lo);
	kvm_boot_seg_tss(&seg, tss_gpa);
	kvm_boot_desc_encode(&seg, &lo, &hi);
	put64(gdt + GW_GUEST_SEL_TSS, lo);
	put64(gdt + GW_GUEST_SEL_TSS + 8, hi);
	return GW_GUEST_SEL_TSS + 16 - 1;
}

void kvm_boot_tss_build(uint8_t *tss)
{
	memset(tss, 0, 104);
	/* I/O map base past the limit: no I/O permission bitmap. */
	tss[102] = 104;
}

void kvm_boot_sregs(struct kvm_sregs *s, uint64_t cr3, bool xsave)
{
	kvm_boot_seg_code64(&s->cs);
	kvm_boot_seg_data(&s->ds);
	kvm_boot_seg_data(&s->es);
	kvm_boot_seg_data(&s->fs);
	kvm_boot_seg_data(&s->gs);
	kvm_boot_seg_data(&s->ss);
	kvm_boot_seg_tss(&s->tr, GW_GUEST_TSS_GPA);
	memset(&s->ldt, 0, sizeof(s->ldt));
	s->ldt.unusable = 1;
	s->gdt.base = GW_GUEST_GDT_GPA;
	s->gdt.limit = GW_GUEST_SEL_TSS + 16 - 1;
	s->idt.base = 0;
	s->idt.limit = 0;
	s->cr0 = KVM_CR0_PE | KVM_CR0_MP | KVM_CR0_ET | KVM_CR0_NE | KVM_CR0_WP | KVM_CR0_PG;
	s->cr4 = KVM_CR4_PAE | KVM_CR4_OSFXSR | KVM_CR4_OSXMMEXCPT | (xsave ? KVM_CR4_OSXSAVE : 0);
	s->efer = KVM_EFER_LME | KVM_EFER_LMA;
	s->cr3 = cr3;
	s->cr2 = 0;
}
