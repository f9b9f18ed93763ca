/* SPDX-License-Identifier: MIT */
/*
 * The input of fuzz_virtq (and what gen_seeds writes for it): a list of
 * operations a guest can do to a virtio-mmio device, one opcode byte each
 * (low 3 bits) followed by its little-endian operands; a short tail ends
 * the list. Guest RAM is DRV_RAM_BYTES at DRV_RAM_GPA (tests/unit/dev/drv.h).
 */
#ifndef GW_FUZZ_VIRTQ_H
#define GW_FUZZ_VIRTQ_H

enum {
	FV_REG_WRITE = 0,	/* le16 offset (mod 0x200), le32 value */
	FV_REG_READ = 1,	/* le16 offset (mod 0x200) */
	FV_RAM_WRITE = 2,	/* le16 RAM offset, u8 n, n bytes (clipped to RAM) */
	FV_KICK = 3,		/* u8: bits 0-1 queue, bits 2-3 the test device's reply (FV_REPLY_*) */
	FV_QUEUE = 4,		/* u8 queue, u8 log2 size, le16 desc, le16 avail, le16 used (RAM offsets) */
	FV_NEGOTIATE = 5,	/* le64 features: reset, ACK, DRIVER, features, FEATURES_OK, DRIVER_OK */
	FV_STATE = 6,		/* encode the device and decode it back: must succeed */
	FV_SECTION = 7,		/* u8 n, n bytes decoded as a state section (hostile) */
};

/* How the test device answers the chains of that kick. */
enum {
	FV_REPLY_ECHO = 0,	/* as many bytes as it read, at most what fits */
	FV_REPLY_ALL = 1,	/* the whole writable part */
	FV_REPLY_NONE = 2,	/* nothing */
	FV_REPLY_100 = 3,	/* 100 bytes, whether they fit or not */
};

#endif
