/* SPDX-License-Identifier: MIT */
/* TLS 1.3's key schedule step for our record layer (tls_rec.c): HKDF-Expand-Label. */
#include <errno.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include "net/tls_int.h"

/* tls_int.h */
int gw_tls_expand_label(const EVP_MD *md, const unsigned char *secret, size_t secret_len, const char *label,
			unsigned char *out, size_t len)
{
	unsigned char info[2 + 1 + 6 + 16 + 1];
	size_t ll = strlen(label), n = 0;
	EVP_PKEY_CTX *pc;
	int ok;

	if (ll > 16)
		return -EPROTO;
	info[n++] = (unsigned char)(len >> 8);
	info[n++] = (unsigned char)len;
	info[n++] = (unsigned char)(6 + ll);
	memcpy(info + n, "tls13 ", 6);
	n += 6;
	memcpy(info + n, label, ll);
	n += ll;
	info[n++] = 0;			/* empty context */
	pc = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	ok = pc && EVP_PKEY_derive_init(pc) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_mode(pc, EVP_PKEY_HKDEF_MODE_EXPAND_ONLY) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_md(pc, md) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(pc, secret, (int)secret_len) > 0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(pc, info, (int)n) > 0 &&
	     EVP_PKEY_derive(pc, out, &len) > 0;
	EVP_PKEY_CTX_free(pc);
	return ok ? 0 : -EPROTO;
}
