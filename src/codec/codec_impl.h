/* SPDX-License-Identifier: MIT */
/*
 * The codec ops defined in codec_*.c, for the table in codec.c and for
 * tests that want one codec by name. Each is immutable after load.
 */
#ifndef GW_CODEC_IMPL_H
#define GW_CODEC_IMPL_H

#include "codec/codec.h"

extern const struct gw_codec_ops gw_codec_none;
extern const struct gw_codec_ops gw_codec_zstd;
extern const struct gw_codec_ops gw_codec_lz4;
extern const struct gw_codec_ops gw_codec_zlib;
extern const struct gw_codec_ops gw_codec_isal;

#endif
