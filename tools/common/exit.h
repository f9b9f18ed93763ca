/* SPDX-License-Identifier: MIT */
/* godwit's exit status: every command's, and the running VM's (godwit run). */
#ifndef GW_CLI_EXIT_H
#define GW_CLI_EXIT_H

enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAIL = 1,	/* the operation failed (or, check: mismatch) */
	CLI_EXIT_USAGE = 2,	/* bad command line (check: n/a) */
	CLI_EXIT_INTERRUPTED = 130,	/* Ctrl-C: migrate cancelled it, or left without waiting */
};

#endif
