/* error.c -- error codes, their names, and the sentence that goes with them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

const char *sbx_strerror(int code)
{
	switch (code) {
	case 0:
		return "success";
	case SBX_EUNAVAILABLE:
		return "sandbox backend unavailable";
	case SBX_ENOISOLATION:
		return "isolation required but not available";
	case SBX_ECLOSED:
		return "sandbox or session is closed";
	case SBX_ESTATE:
		return "call does not fit the object's state";
	case SBX_EFAILED:
		return "command did not succeed";
	}
	if (code < 0 && code > -4096) {
		/* strerrordesc_np() returns a static string, so it is safe from any
		 * thread, unlike strerror(). */
		const char *text = strerrordesc_np(-code);
		return text ? text : "system error";
	}
	return "unknown error";
}

int sbx__error(sbx_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof err->message, fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

double sbx__seconds_since(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ------------------------------------------------------------ string lists */

int sbx__strv_push(sbx__strv *sv, const char *s)
{
	char *copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	char **v = realloc(sv->v, (sv->n + 2) * sizeof *v);
	if (!v) {
		free(copy);
		return -ENOMEM;
	}
	v[sv->n++] = copy;
	v[sv->n] = NULL;
	sv->v = v;
	return 0;
}

int sbx__strv_copy(sbx__strv *dst, const sbx__strv *src)
{
	*dst = (sbx__strv){0};
	for (size_t i = 0; i < src->n; i++) {
		if (sbx__strv_push(dst, src->v[i]) < 0) {
			sbx__strv_free(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

void sbx__strv_free(sbx__strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	*sv = (sbx__strv){0};
}
