/*
 * The one derivation from a secret string (HANGAR_SECRET_KEY or a generated
 * key) to a purpose key: every sealing in the library calls it with its own
 * context string, so keys for different purposes never coincide and the raw
 * secret is never itself a key.
 */
#include <sodium.h>
#include <string.h>

#include "internal.h"

int hkdf_secret(unsigned char *out, size_t outlen, const char *secret, size_t secret_len, const char *context)
{
	unsigned char k[crypto_generichash_KEYBYTES_MAX];

	if (outlen < crypto_generichash_BYTES_MIN || outlen > crypto_generichash_BYTES_MAX)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: key length");
	if (sodium_init() < 0)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "libsodium cannot start");
	/* A passphrase of any length first becomes a fixed-size key, which then keys
	 * a hash of the purpose: BLAKE2b used as a PRF, as libsodium documents. */
	crypto_generichash(k, sizeof(k), (const unsigned char *)secret, secret_len, NULL, 0);
	crypto_generichash(out, outlen, (const unsigned char *)context, strlen(context), k, sizeof(k));
	sodium_memzero(k, sizeof(k));
	return 0;
}
