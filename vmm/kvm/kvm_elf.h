/* SPDX-License-Identifier: MIT */
/*
 * A strict ELF64 loader for the guests: x86-64, ET_EXEC, little-endian,
 * PT_LOAD segments placed at their physical addresses (identity-mapped
 * guests: p_paddr == p_vaddr) inside a window of guest memory. The input is
 * treated as hostile: every header field, offset and size is checked before
 * use, segments may not overlap, and the entry point must lie in an
 * executable segment. Pure functions over buffers.
 */
#ifndef GW_KVM_ELF_H
#define GW_KVM_ELF_H

#include <stddef.h>
#include <stdint.h>

#define KVM_ELF_MAX_SEGMENTS 8

struct kvm_elf_segment {
	uint64_t gpa;			/* load address */
	uint64_t file_off;		/* bytes from the start of the file */
	uint64_t file_bytes;		/* copied */
	uint64_t mem_bytes;		/* >= file_bytes; the rest is zeroed (.bss) */
	uint32_t flags;			/* PF_X 1, PF_W 2, PF_R 4 */
};

struct kvm_elf_image {
	uint64_t entry;			/* guest-physical entry point */
	unsigned nr_segments;
	struct kvm_elf_segment seg[KVM_ELF_MAX_SEGMENTS];
};

/*
 * Parse and check @elf (@len bytes) for loading into [@lo_gpa, @hi_gpa).
 * 0 and @img filled, or -ENOEXEC with the reason in @why.
 */
int kvm_elf_parse(const void *elf, size_t len, uint64_t lo_gpa, uint64_t hi_gpa,
		  struct kvm_elf_image *img, char *why, size_t why_len);

/*
 * Copy the segments of a parsed image into @mem, the guest memory at
 * @mem_gpa (@mem_bytes long), zeroing each segment's tail. 0 or -ERANGE when
 * a segment falls outside @mem.
 */
int kvm_elf_load(const void *elf, const struct kvm_elf_image *img, uint8_t *mem,
		 uint64_t mem_gpa, uint64_t mem_bytes);

#endif
