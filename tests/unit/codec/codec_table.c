/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_codecs[] is indexed by enum gw_codec_id: every entry's id
 * equals its index, names are unique, AUTO has no entry, levels are
 * ordered (min <= default <= max), and gw_codec_get() returns the entry
 * for a known id whose probe succeeds and NULL for anything out of range.
 */
#include <string.h>

#include "codec/codec.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

int main(void)
{
	int i, j, usable = 0;

	TEST_ASSERT(gw_codecs[GW_CODEC_AUTO] == NULL, "AUTO is a policy, not a codec");
	TEST_CHECK(gw_codec_get(GW_CODEC_AUTO) == NULL, "get(AUTO)");
	TEST_CHECK(gw_codec_get(GW_CODEC__COUNT) == NULL, "get(COUNT)");
	TEST_CHECK(gw_codec_get((enum gw_codec_id)-1) == NULL, "get(-1)");
	TEST_CHECK(gw_codec_get((enum gw_codec_id)1000) == NULL, "get(1000)");

	for (i = 0; i < GW_CODEC__COUNT; i++) {
		const struct gw_codec_ops *ops = gw_codecs[i];

		if (!ops)
			continue;
		TEST_CHECK((int)ops->id == i, "%s: id %d at index %d", ops->name, ops->id, i);
		TEST_CHECK(ops->name && ops->probe && ops->ctx_new && ops->ctx_free &&
			   ops->bound && ops->compress && ops->decompress,
			   "index %d: incomplete ops", i);
		TEST_CHECK(ops->min_level <= ops->default_level &&
			   ops->default_level <= ops->max_level,
			   "%s: levels %d <= %d <= %d", ops->name, ops->min_level,
			   ops->default_level, ops->max_level);
		for (j = 0; j < i; j++)
			if (gw_codecs[j])
				TEST_CHECK(strcmp(gw_codecs[j]->name, ops->name) != 0,
					   "duplicate name %s", ops->name);
		if (ops->probe() == 0) {
			usable++;
			TEST_CHECK(gw_codec_get((enum gw_codec_id)i) == ops, "get(%d)", i);
		} else {
			TEST_CHECK(gw_codec_get((enum gw_codec_id)i) == NULL, "get(%d)", i);
		}
		/* ctx_free accepts NULL. */
		ops->ctx_free(NULL);
	}
	TEST_ASSERT(gw_codecs[GW_CODEC_NONE] && gw_codec_get(GW_CODEC_NONE),
		    "'none' is always usable");
	printf("%d codecs usable\n", usable);
	TEST_EXIT();
}
