/* SPDX-License-Identifier: MIT */
/* Copies between a caller's size-prefixed struct and the library's (abi.h). */
#include <errno.h>
#include <string.h>
#include <godwit/vm.h>
#include "util/abi.h"

int gw_abi_copy_in(void *dst, size_t dst_size, const void *src, size_t src_size, size_t min_size)
{
	const unsigned char *extra = (const unsigned char *)src + dst_size;

	if (src_size < min_size)
		return -EINVAL;
	for (size_t i = 0; src_size > dst_size && i < src_size - dst_size; i++)
		if (extra[i])
			return -E2BIG;
	memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
	if (src_size < dst_size)
		memset((unsigned char *)dst + src_size, 0, dst_size - src_size);
	memcpy(dst, &(uint32_t){ (uint32_t)dst_size }, sizeof(uint32_t));	/* the library's copy is whole */
	return 0;
}

void gw_abi_copy_out(void *dst, size_t dst_size, const void *src, size_t src_size)
{
	const size_t hdr = sizeof(uint32_t);	/* the size field, the caller's */
	size_t n = src_size < dst_size ? src_size : dst_size;

	if (n > hdr)
		memcpy((unsigned char *)dst + hdr, (const unsigned char *)src + hdr, n - hdr);
	if (dst_size > src_size)
		memset((unsigned char *)dst + src_size, 0, dst_size - src_size);
}

int gw_vm_info_copy_in(struct gw_vm_info *dst, const struct gw_vm_info *src)
{
	int ret = gw_abi_copy_in(dst, sizeof(*dst), src, src->size, GW_VM_INFO_SIZE_VER0);

	if (!ret && (dst->nr_blocks > GW_MAX_RAM_BLOCKS || (dst->nr_blocks && !dst->blocks)))
		ret = -EINVAL;
	if (!ret && (dst->cpu_profile_bytes > GW_CPU_PROFILE_MAX_BYTES || (dst->cpu_profile_bytes && !dst->cpu_profile)))
		ret = -EINVAL;
	return ret;
}

int gw_vm_ops_copy_in(struct gw_vm_ops *dst, const struct gw_vm_ops *src)
{
	return gw_abi_copy_in(dst, sizeof(*dst), src, src->size, GW_VM_OPS_SIZE_VER0);
}
