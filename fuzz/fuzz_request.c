/*
 * fuzz_request.c -- the fuzz target of the request decoder of `sbx serve`.
 *
 * Built two ways: with clang -fsanitize=fuzzer,address,undefined by
 * fuzz/run.sh, and as part of fuzz/replay (a plain main() that feeds it
 * every file of fuzz/corpus and fuzz/regress) in `make check`.
 *
 * Besides not crashing, leaking or allocating too much (the sanitizers and
 * libFuzzer's -malloc_limit_mb see to that), every outcome must keep the
 * decoder's promises, checked here; a broken one aborts.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define require(cond) \
	do {              \
		if (!(cond))  \
			abort();  \
	} while (0)

/* Error messages go out as msgpack str: they must be ASCII (hence UTF-8). */
static void check_error(const uint8_t *data, size_t size, const struct wire_error *err)
{
	struct wire_error again;
	size_t i;

	require(err->message[0] != '\0');
	for (i = 0; err->message[i]; i++)
		require((unsigned char)err->message[i] < 0x80);
	if (strcmp(err->code, WIRE_BAD_FRAME) == 0)
		require(wire_check_frame(data, size, &again) < 0);
	else
		require(strcmp(err->code, WIRE_BAD_REQUEST) == 0 &&
		        wire_check_frame(data, size, &again) == 0);
}

/* Does |path| have a ".." component? */
static int has_dotdot(const char *path)
{
	const char *p = path;

	while ((p = strstr(p, "..")) != NULL) {
		if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
			return 1;
		p++;
	}
	return 0;
}

/* A decoded list: terminated, within the frame, and within its bounds. */
static void check_strv(const struct wire_strv *v, size_t size, size_t max, size_t max_bytes)
{
	size_t i, bytes = 0;

	if (!v->v) {
		require(v->n == 0);
		return;
	}
	require(v->n <= size && v->n <= max && v->v[v->n] == NULL);
	for (i = 0; i < v->n; i++) {
		require(v->v[i] != NULL && strlen(v->v[i]) < size);
		bytes += strlen(v->v[i]);
	}
	require(bytes <= max_bytes);
}

/* The components of |path| ("a//b/" has two). */
static size_t components(const char *path)
{
	size_t n = 0;

	for (; *path; path++) {
		if (*path != '/' && (path[1] == '/' || path[1] == '\0'))
			n++;
	}
	return n;
}

/* A policy list: absolute paths, each and all within the depth bounds. */
static void check_paths(const struct wire_strv *v, size_t size)
{
	size_t i, depth, all = 0;

	check_strv(v, size, WIRE_MAX_PATHS, WIRE_MAX_PATHS_BYTES);
	for (i = 0; i < v->n; i++) {
		require(v->v[i][0] == '/' && !has_dotdot(v->v[i]));
		depth = components(v->v[i]);
		require(depth <= WIRE_MAX_PATH_DEPTH);
		all += depth;
	}
	require(all <= WIRE_MAX_PATHS_COMPONENTS);
}

static void check_request(const struct wire_request *req, size_t size)
{
	size_t i;

	require((req->argv.v != NULL) != (req->shell != NULL));
	check_strv(&req->argv, size, WIRE_MAX_ARGS, WIRE_MAX_ARGS_BYTES);
	if (req->argv.v)
		require(req->argv.n >= 1 && req->argv.v[0][0] != '\0');
	check_strv(&req->env, size, WIRE_MAX_ENV, WIRE_MAX_ENV_BYTES);
	for (i = 0; i < req->env.n; i++)
		require(strchr(req->env.v[i], '=') != NULL);
	require(req->stdin_len <= size);
	if (req->cwd)
		require(req->cwd[0] != '\0' && !has_dotdot(req->cwd));
	if (req->has_timeout)
		require(isfinite(req->timeout) && req->timeout >= 0);
	check_paths(&req->policy.writable, size);
	check_paths(&req->policy.deny_write, size);
	check_paths(&req->policy.deny_read, size);
	if (req->policy.set & (1u << WIRE_P_CPUS))
		require(isfinite(req->policy.cpus) && req->policy.cpus > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_request req;
	struct wire_error err;
	uint64_t id;

	if (wire_decode_request(data, size, &req, &err) == 0)
		check_request(&req, size);
	else
		check_error(data, size, &err);
	wire_request_free(&req);
	/* Only a well-formed frame can have an id to answer with. */
	if (wire_peek_id(data, size, &id))
		require(wire_check_frame(data, size, &err) == 0);
	return 0;
}
