/* SPDX-License-Identifier: MIT */
/*
 * Structs that cross the API and can grow (libgodwit(3), "ABI"): each begins
 * with uint32_t size, the sizeof the caller was built with. These copy
 * between the caller's size and the library's, so that neither side reads
 * or writes past what the other has.
 */
#ifndef GW_UTIL_ABI_H
#define GW_UTIL_ABI_H

#include <stddef.h>
#include <stdint.h>

/*
 * A struct the caller gives (@src, its size field @src_size bytes) into the
 * library's (@dst, @dst_size): the bytes both know are copied, the rest of
 * @dst zeroed (a field the caller does not know reads as 0), and @dst's size
 * set to @dst_size. 0; -EINVAL when
 * @src_size is below @min_size (the first version); -E2BIG when the caller's
 * struct is larger and a byte the library does not know is not zero.
 */
int gw_abi_copy_in(void *dst, size_t dst_size, const void *src, size_t src_size, size_t min_size);
/*
 * The library's @src (@src_size bytes) into the caller's @dst of @dst_size
 * bytes (its size field, which stays as it is): the bytes both know, zeros
 * for the caller's bytes the library does not know, nothing past @dst_size.
 */
void gw_abi_copy_out(void *dst, size_t dst_size, const void *src, size_t src_size);

struct gw_vm_info;
struct gw_vm_ops;
/*
 * A VMM's gw_vm_info into the library's (@dst->blocks still points at the
 * caller's array: copy it to keep it). 0, -EINVAL (size below the first
 * version, more than GW_MAX_RAM_BLOCKS blocks, blocks NULL), -E2BIG.
 */
int gw_vm_info_copy_in(struct gw_vm_info *dst, const struct gw_vm_info *src);
/* A VMM's ops table into the library's: hooks it does not know are NULL. 0, -EINVAL, -E2BIG. */
int gw_vm_ops_copy_in(struct gw_vm_ops *dst, const struct gw_vm_ops *src);

#endif
