/* SPDX-License-Identifier: MIT */
/*
 * The codec table. An explicit array indexed by the fixed enum gw_codec_id
 * (which is also the wire value), never registration from constructors.
 * GW_CODEC_AUTO is a policy ("decide per batch"), not a codec: no entry.
 */
#include <stddef.h>

#include "codec/codec.h"
#include "codec/codec_impl.h"

const struct gw_codec_ops *const gw_codecs[GW_CODEC__COUNT] = {
	[GW_CODEC_NONE] = &gw_codec_none,
	[GW_CODEC_ZSTD] = &gw_codec_zstd,
	[GW_CODEC_LZ4]  = &gw_codec_lz4,
	[GW_CODEC_ZLIB] = &gw_codec_zlib,
	[GW_CODEC_ISAL] = &gw_codec_isal,
	[GW_CODEC_AUTO] = NULL,
};

const struct gw_codec_ops *gw_codec_get(enum gw_codec_id id)
{
	const struct gw_codec_ops *ops;

	/* id may come from a peer's capability list: check the range. */
	if ((unsigned int)id >= GW_CODEC__COUNT)
		return NULL;
	ops = gw_codecs[id];
	if (!ops || ops->probe() != 0)
		return NULL;
	return ops;
}
