/* size.c -- "512M", "1.5G", "65536" into bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

int sbx_parse_size(const char *text, const char *what, uint64_t *out, sbx_error *err)
{
	if (!what)
		what = "size";
	if (!text)
		return sbx__error(err, -EINVAL, "%s is missing; write it like '512M', '1.5G' or '65536'", what);

	/* Digits, at most one '.', then an optional unit: parsed by hand so that
	 * "-5", " 5", "0x10", "1e9" and "inf" are all refused.  The fraction is
	 * kept exact, as digits over a power of ten. */
	const char *p = text;
	unsigned __int128 whole = 0, frac = 0, den = 1;
	bool digits = false, overflow = false;
	for (; *p >= '0' && *p <= '9'; p++) {
		digits = true;
		whole = whole * 10 + (unsigned)(*p - '0');
		if (whole > UINT64_MAX) {
			overflow = true;
			whole = UINT64_MAX;
		}
	}
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			digits = true;
			/* Twenty digits are finer than a byte of a terabyte; frac * unit
			 * stays far inside 128 bits. */
			if (den < (unsigned __int128)10000000000ULL * 10000000000ULL) {
				frac = frac * 10 + (unsigned)(*p - '0');
				den *= 10;
			} else if (*p != '0') {
				overflow = true; /* more precision than any byte count has */
			}
		}
	}
	uint64_t unit = 1;
	switch (*p) {
	case 'k': case 'K': unit = 1ULL << 10; p++; break;
	case 'm': case 'M': unit = 1ULL << 20; p++; break;
	case 'g': case 'G': unit = 1ULL << 30; p++; break;
	case 't': case 'T': unit = 1ULL << 40; p++; break;
	}
	if (unit > 1 && (strcasecmp(p, "b") == 0 || strcasecmp(p, "ib") == 0))
		p += strlen(p);
	else if (unit == 1 && strcasecmp(p, "b") == 0)
		p++;
	if (!digits || *p != '\0')
		return sbx__error(err, -EINVAL,
		                  "%s is not a size: '%s'; write it like '512M', '1.5G' or '65536'",
		                  what, text);
	unsigned __int128 scaled = frac * unit;
	if (overflow || scaled % den != 0)
		return sbx__error(err, overflow ? -ERANGE : -EINVAL, overflow ? "%s is too large or too precise: '%s'"
		                  : "%s is not a whole number of bytes: '%s'", what, text);
	unsigned __int128 total = whole * unit + scaled / den;
	if (total > UINT64_MAX)
		return sbx__error(err, -ERANGE, "%s is too large: '%s'", what, text);
	uint64_t bytes = (uint64_t)total;
	if (bytes == 0)
		return sbx__error(err, -EINVAL, "%s must be more than zero bytes: '%s'", what, text);
	*out = bytes;
	return 0;
}
