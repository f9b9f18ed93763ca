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

#endif
