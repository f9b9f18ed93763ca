/* SPDX-License-Identifier: MIT */
/*
 * The guest images built from guests/ and embedded into the VMM at build
 * time (guests/embed.py), so the godwit binary needs no file at run time.
 */
#ifndef GW_KVM_GUESTS_H
#define GW_KVM_GUESTS_H

#include <stddef.h>

struct kvm_guest_image {
	const char *name;		/* "idle", "dirty", "verify", "compute", "l2fwd", "echo"; NULL ends */
	const unsigned char *elf;	/* ELF64 file image */
	size_t elf_bytes;
};

/* Every embedded guest, terminated by a NULL name. */
extern const struct kvm_guest_image kvm_guest_images[];

/* The image called @name, or NULL. */
const struct kvm_guest_image *kvm_guest_image_find(const char *name);

#endif
