/* SPDX-License-Identifier: MIT */
/* CRC32C (Castagnoli), as iSCSI: ISA-L's crc32_iscsi, or the SSE4.2 instruction. */
#ifndef GW_CRC32C_H
#define GW_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Chainable: gw_crc32c(gw_crc32c(0, a, la), b, lb) == gw_crc32c(0, a||b, la+lb).
 * Start with 0. Standard CRC-32C: gw_crc32c(0, "123456789", 9) == 0xE3069283.
 */
uint32_t gw_crc32c(uint32_t crc, const void *buf, size_t len_bytes);

#endif
