/*
 * wire.c -- the bounded request decoder and the frame helpers of `sbx serve`
 * (wire.h says how decoding is split in two passes, and why).
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx.h"
#include "wire.h"

/* Largest values a request may give; past them a number would wrap or mean
 * "unlimited" somewhere below us (RLIM_INFINITY is all ones). */
#define MAX_BYTES (1ULL << 60)
#define MAX_COUNT ((uint64_t)INT32_MAX)
#define MAX_CPU_SECONDS 1000000000ULL
#define MAX_CPUS 4096.0
/* Peer bytes quoted in a message are cut after this many. */
#define QUOTE_MAX 64

enum kind { K_NIL, K_BOOL, K_UINT, K_NEG, K_FLOAT, K_STR, K_BIN, K_ARRAY, K_MAP };

/* One msgpack header and, for str and bin, where its bytes are. */
struct token {
	enum kind kind;
	uint64_t u;          /* K_UINT */
	int64_t i;           /* K_NEG */
	double f;            /* K_FLOAT */
	const uint8_t *data; /* K_STR, K_BIN */
	uint32_t len;        /* K_STR, K_BIN: bytes; K_ARRAY, K_MAP: elements */
};

struct reader {
	const uint8_t *start, *p, *end;
};

/* ------------------------------------------------------------- errors */

static int fail(struct wire_error *err, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct wire_error *err, const char *code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

#define frame_error(err, ...) fail((err), WIRE_BAD_FRAME, __VA_ARGS__)
#define request_error(err, ...) fail((err), WIRE_BAD_REQUEST, __VA_ARGS__)

void wire_quote(char *dst, size_t size, const uint8_t *s, size_t n, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	size_t used = 0, i;

	if (size == 0)
		return;
	for (i = 0; i < n && i < max; i++) {
		if (used + 5 >= size)
			break;
		if (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\') {
			dst[used++] = (char)s[i];
		} else {
			dst[used++] = '\\';
			dst[used++] = 'x';
			dst[used++] = hex[s[i] >> 4];
			dst[used++] = hex[s[i] & 15];
		}
	}
	if (i < n && used + 4 <= size) {
		memcpy(dst + used, "...", 3);
		used += 3;
	}
	dst[used] = '\0';
}

static const char *kind_name(enum kind k)
{
	switch (k) {
	case K_NIL: return "nil";
	case K_BOOL: return "a boolean";
	case K_UINT: return "an integer";
	case K_NEG: return "a negative integer";
	case K_FLOAT: return "a float";
	case K_STR: return "a string";
	case K_BIN: return "binary data";
	case K_ARRAY: return "an array";
	case K_MAP: return "a map";
	}
	return "?";
}

/* ------------------------------------------------------------- tokens */

static size_t left(const struct reader *r)
{
	return (size_t)(r->end - r->p);
}

static size_t at(const struct reader *r, const uint8_t *p)
{
	return (size_t)(p - r->start);
}

/* Takes an |n|-byte big-endian number; fails when the frame ends first. */
static int take(struct reader *r, unsigned n, uint64_t *v, size_t where, struct wire_error *err)
{
	unsigned i;

	if (left(r) < n)
		return frame_error(err, "the frame ends inside the value at byte %zu", where);
	*v = 0;
	for (i = 0; i < n; i++)
		*v = (*v << 8) | r->p[i];
	r->p += n;
	return 0;
}

/* A str or bin of |len| bytes: they must all be in the frame. */
static int payload(struct reader *r, struct token *t, enum kind k, uint64_t len, size_t where,
                   struct wire_error *err)
{
	if (len > left(r))
		return frame_error(err, "%s of %llu bytes at byte %zu runs past the end of the frame "
		                   "(%zu bytes left)", kind_name(k), (unsigned long long)len, where,
		                   left(r));
	t->kind = k;
	t->data = r->p;
	t->len = (uint32_t)len;
	r->p += len;
	return 0;
}

/*
 * An array or map of |count| elements.  Each element takes at least one
 * byte (a map entry two), so a count the remaining bytes cannot hold is
 * refused here, before anyone sizes anything by it.
 */
static int container(struct reader *r, struct token *t, enum kind k, uint64_t count,
                     size_t where, struct wire_error *err)
{
	size_t per = k == K_MAP ? 2 : 1;

	if (count > left(r) / per)
		return frame_error(err, "%s of %llu elements at byte %zu cannot fit in the %zu bytes "
		                   "left", kind_name(k), (unsigned long long)count, where, left(r));
	t->kind = k;
	t->len = (uint32_t)count;
	return 0;
}

static int number(struct reader *r, struct token *t, uint8_t b, size_t where,
                  struct wire_error *err)
{
	uint64_t v = 0;
	uint32_t bits32;
	float f32;

	if (b == 0xca || b == 0xcb) {
		if (take(r, b == 0xca ? 4 : 8, &v, where, err) < 0)
			return -1;
		t->kind = K_FLOAT;
		if (b == 0xca) {
			bits32 = (uint32_t)v;
			memcpy(&f32, &bits32, sizeof(f32));
			t->f = f32;
		} else {
			memcpy(&t->f, &v, sizeof(t->f));
		}
		return 0;
	}
	if (b >= 0xcc && b <= 0xcf) {
		if (take(r, 1u << (b - 0xcc), &v, where, err) < 0)
			return -1;
		t->kind = K_UINT;
		t->u = v;
		return 0;
	}
	/* 0xd0..0xd3: signed, sign-extended from its width.  Encoders use these
	 * for non-negative numbers too, which then count as unsigned. */
	unsigned n = 1u << (b - 0xd0);
	if (take(r, n, &v, where, err) < 0)
		return -1;
	if (n < 8 && (v >> (8 * n - 1)))
		v |= ~0ULL << (8 * n);
	if ((int64_t)v >= 0) {
		t->kind = K_UINT;
		t->u = v;
	} else {
		t->kind = K_NEG;
		t->i = (int64_t)v;
	}
	return 0;
}

/* Reads one header; checks every length and count it announces. */
static int next_token(struct reader *r, struct token *t, struct wire_error *err)
{
	size_t where = at(r, r->p);
	uint64_t v = 0;
	uint8_t b;

	if (r->p >= r->end)
		return frame_error(err, "the frame ends where a value should start, at byte %zu", where);
	b = *r->p++;
	memset(t, 0, sizeof(*t));
	if (b <= 0x7f) {
		t->kind = K_UINT;
		t->u = b;
		return 0;
	}
	if (b >= 0xe0) {
		t->kind = K_NEG;
		t->i = (int8_t)b;
		return 0;
	}
	if (b <= 0x8f)
		return container(r, t, K_MAP, b & 0x0f, where, err);
	if (b <= 0x9f)
		return container(r, t, K_ARRAY, b & 0x0f, where, err);
	if (b <= 0xbf)
		return payload(r, t, K_STR, b & 0x1f, where, err);
	switch (b) {
	case 0xc0:
		t->kind = K_NIL;
		return 0;
	case 0xc1:
		return frame_error(err, "byte 0xc1 at byte %zu is never used by msgpack", where);
	case 0xc2:
	case 0xc3:
		t->kind = K_BOOL;
		t->u = b == 0xc3;
		return 0;
	case 0xc4:
	case 0xc5:
	case 0xc6:
		if (take(r, 1u << (b - 0xc4), &v, where, err) < 0)
			return -1;
		return payload(r, t, K_BIN, v, where, err);
	case 0xd9:
	case 0xda:
	case 0xdb:
		if (take(r, 1u << (b - 0xd9), &v, where, err) < 0)
			return -1;
		return payload(r, t, K_STR, v, where, err);
	case 0xdc:
	case 0xdd:
		if (take(r, b == 0xdc ? 2 : 4, &v, where, err) < 0)
			return -1;
		return container(r, t, K_ARRAY, v, where, err);
	case 0xde:
	case 0xdf:
		if (take(r, b == 0xde ? 2 : 4, &v, where, err) < 0)
			return -1;
		return container(r, t, K_MAP, v, where, err);
	case 0xca: case 0xcb:
	case 0xcc: case 0xcd: case 0xce: case 0xcf:
	case 0xd0: case 0xd1: case 0xd2: case 0xd3:
		return number(r, t, b, where, err);
	default:
		/* 0xc7..0xc9 and 0xd4..0xd8: extension types. */
		return frame_error(err, "extension type 0x%02x at byte %zu is not used by the protocol",
		                   b, where);
	}
}

/*
 * Consumes |count| whole values, nested ones included, without recursion:
 * pending[d] is how many values are still to come at depth d.
 */
static int skip_values(struct reader *r, size_t count, struct wire_error *err)
{
	size_t pending[WIRE_MAX_DEPTH + 1];
	unsigned depth = 0;
	struct token t;

	pending[0] = count;
	for (;;) {
		while (depth > 0 && pending[depth] == 0)
			depth--;
		if (pending[depth] == 0)
			return 0;
		pending[depth]--;
		if (next_token(r, &t, err) < 0)
			return -1;
		if (t.kind != K_ARRAY && t.kind != K_MAP)
			continue;
		if (depth == WIRE_MAX_DEPTH)
			return frame_error(err, "containers nest deeper than %d levels at byte %zu",
			                   WIRE_MAX_DEPTH, at(r, r->p) - 1);
		depth++;
		pending[depth] = t.kind == K_MAP ? 2 * (size_t)t.len : t.len;
	}
}

int wire_check_frame(const uint8_t *buf, size_t len, struct wire_error *err)
{
	struct reader r = {buf, buf, buf + len};

	if (len == 0)
		return frame_error(err, "the frame is empty");
	if (skip_values(&r, 1, err) < 0)
		return -1;
	if (r.p != r.end)
		return frame_error(err, "%zu bytes of trailing garbage follow the request at byte %zu",
		                   left(&r), at(&r, r.p));
	return 0;
}

/* ------------------------------------------------------- field values */

/*
 * From here on the frame has passed wire_check_frame(), so next_token()
 * cannot fail; its result is still checked, which costs nothing and keeps
 * each function safe on its own.
 */

static int expect(struct reader *r, struct token *t, enum kind k, const char *field,
                  const char *what, struct wire_error *err)
{
	if (next_token(r, t, err) < 0)
		return -1;
	if (t->kind != k)
		return request_error(err, "%s: must be %s, not %s", field, what, kind_name(t->kind));
	return 0;
}

static int read_uint(struct reader *r, const char *field, uint64_t min, uint64_t max,
                     uint64_t *out, struct wire_error *err)
{
	struct token t;

	if (next_token(r, &t, err) < 0)
		return -1;
	if (t.kind == K_NEG)
		return request_error(err, "%s: must not be negative: %lld", field, (long long)t.i);
	if (t.kind != K_UINT)
		return request_error(err, "%s: must be an integer, not %s", field, kind_name(t.kind));
	if (t.u < min)
		return request_error(err, "%s: must be at least %llu: %llu", field,
		                     (unsigned long long)min, (unsigned long long)t.u);
	if (t.u > max)
		return request_error(err, "%s: %llu is more than %llu", field,
		                     (unsigned long long)t.u, (unsigned long long)max);
	*out = t.u;
	return 0;
}

/* A number of any msgpack type, finite, from 0 (when |zero_ok|) to |max|. */
static int read_number(struct reader *r, const char *field, bool zero_ok, double max,
                       double *out, struct wire_error *err)
{
	struct token t;
	double v;

	if (next_token(r, &t, err) < 0)
		return -1;
	if (t.kind == K_UINT)
		v = (double)t.u;
	else if (t.kind == K_NEG)
		v = (double)t.i;
	else if (t.kind == K_FLOAT)
		v = t.f;
	else
		return request_error(err, "%s: must be a number, not %s", field, kind_name(t.kind));
	if (!isfinite(v))
		return request_error(err, "%s: must be a finite number: %g", field, v);
	if (v < 0)
		return request_error(err, "%s: must not be negative: %g", field, v);
	if (v == 0 && !zero_ok)
		return request_error(err, "%s: must be more than 0: %g", field, v);
	if (v > max)
		return request_error(err, "%s: %g is more than %g", field, v, max);
	*out = v;
	return 0;
}

/* Text from a peer: no NUL inside, since C would cut it there. */
static int check_text(const char *field, const struct token *t, bool empty_ok,
                      struct wire_error *err)
{
	if (t->len == 0 && !empty_ok)
		return request_error(err, "%s: is empty", field);
	if (memchr(t->data, '\0', t->len))
		return request_error(err, "%s: contains a NUL byte at offset %zu", field,
		                     (size_t)((const uint8_t *)memchr(t->data, '\0', t->len) - t->data));
	return 0;
}

/*
 * A path: not empty, no NUL, shorter than PATH_MAX, no ".." component (a
 * path must mean what it says, not climb out of where it seems to be), and
 * for policy paths absolute, without "." components either, as the policy
 * setters want them, and at most WIRE_MAX_PATH_DEPTH components deep.
 * Counts the components ("a//b/" has two) into *components.
 */
static int check_path(const char *field, const struct token *t, bool policy,
                      size_t *components, struct wire_error *err)
{
	char q[QUOTE_MAX * 4 + 8];
	size_t i = 0, n, depth = 0;

	if (check_text(field, t, false, err) < 0)
		return -1;
	wire_quote(q, sizeof(q), t->data, t->len, QUOTE_MAX);
	if (t->len >= PATH_MAX)
		return request_error(err, "%s: a path of %u bytes is longer than %d: '%s'", field,
		                     t->len, PATH_MAX - 1, q);
	if (policy && t->data[0] != '/')
		return request_error(err, "%s: must be an absolute path: '%s'", field, q);
	while (i < t->len) {
		for (n = 0; i + n < t->len && t->data[i + n] != '/'; n++)
			;
		if (n == 2 && t->data[i] == '.' && t->data[i + 1] == '.')
			return request_error(err, "%s: may not contain a '..' component: '%s'", field, q);
		if (policy && n == 1 && t->data[i] == '.')
			return request_error(err, "%s: may not contain a '.' component: '%s'", field, q);
		if (n > 0)
			depth++;
		i += n + 1;
	}
	if (policy && depth > WIRE_MAX_PATH_DEPTH)
		return request_error(err, "%s: more than %d components (%zu): '%s'", field,
		                     WIRE_MAX_PATH_DEPTH, depth, q);
	*components = depth;
	return 0;
}

static int copy_bytes(const struct token *t, uint8_t **out)
{
	/* A zero-length copy still gets a byte, so NULL keeps meaning "absent". */
	*out = malloc(t->len ? t->len : 1);
	if (!*out)
		return -1;
	memcpy(*out, t->data, t->len);
	return 0;
}

static int copy_text(const struct token *t, char **out)
{
	*out = malloc((size_t)t->len + 1);
	if (!*out)
		return -1;
	memcpy(*out, t->data, t->len);
	(*out)[t->len] = '\0';
	return 0;
}

static int out_of_memory(const char *field, struct wire_error *err)
{
	return fail(err, WIRE_UNAVAILABLE, "%s: the server is out of memory", field);
}

/* How an element of a string list is checked, and how much a list may hold. */
enum strv_check { STRV_ARG, STRV_POLICY_PATH };

static const struct strv_bounds {
	size_t count, bytes, components; /* components: 0 when not paths */
	const char *what;                /* the elements, in messages */
} strv_bounds[] = {
	[STRV_ARG] = {WIRE_MAX_ARGS, WIRE_MAX_ARGS_BYTES, 0, "strings"},
	[STRV_POLICY_PATH] = {WIRE_MAX_PATHS, WIRE_MAX_PATHS_BYTES, WIRE_MAX_PATHS_COMPONENTS,
	                      "paths"},
};

/*
 * An array of strings, into one allocation: the first pass checks every
 * element and adds up the bytes, the second copies.  The array's count was
 * bounded by the frame's bytes before we got here; strv_bounds bounds it
 * more, and the bytes and components in all, each refused at the element
 * that passes it.
 */
static int read_strv(struct reader *r, const char *field, enum strv_check check,
                     struct wire_strv *out, struct wire_error *err)
{
	const struct strv_bounds *b = &strv_bounds[check];
	struct reader again;
	struct token t;
	char name[64];
	size_t i, bytes = 0, components = 0, depth = 0, count;
	char *text;

	if (expect(r, &t, K_ARRAY, field, "an array of strings", err) < 0)
		return -1;
	count = t.len;
	if (count > b->count)
		return request_error(err, "%s: %zu elements are more than %zu", field, count, b->count);
	again = *r;
	for (i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "%s[%zu]", field, i);
		if (expect(r, &t, K_STR, name, "a string", err) < 0)
			return -1;
		if (check == STRV_POLICY_PATH ? check_path(name, &t, true, &depth, err)
		                              : check_text(name, &t, i > 0, err))
			return -1;
		bytes += t.len;
		components += depth;
		if (bytes > b->bytes)
			return request_error(err, "%s: the %s up to here have more than %zu bytes in all",
			                     name, b->what, b->bytes);
		if (b->components && components > b->components)
			return request_error(err, "%s: the %s up to here have more than %zu components "
			                     "in all", name, b->what, b->components);
	}
	out->v = malloc((count + 1) * sizeof(char *) + bytes + count);
	if (!out->v)
		return out_of_memory(field, err);
	text = (char *)(out->v + count + 1);
	for (i = 0; i < count; i++) {
		next_token(&again, &t, err);
		memcpy(text, t.data, t.len);
		text[t.len] = '\0';
		out->v[i] = text;
		text += t.len + 1;
	}
	out->v[count] = NULL;
	out->n = count;
	return 0;
}

/* ------------------------------------------------------------ request */

static int valid_env_name(const struct token *t)
{
	uint32_t i;

	if (t->len == 0)
		return 0;
	for (i = 0; i < t->len; i++) {
		uint8_t c = t->data[i];
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (i > 0 && c >= '0' && c <= '9')))
			return 0;
	}
	return 1;
}

static int decode_id(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	return read_uint(r, "id", 0, UINT64_MAX, &req->id, err);
}

static int decode_argv(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	struct token t;
	struct reader peek = *r;

	/* An empty argv is refused here with its own words, before read_strv. */
	if (next_token(&peek, &t, err) == 0 && t.kind == K_ARRAY && t.len == 0)
		return request_error(err, "argv: is empty; give the program to run");
	return read_strv(r, "argv", STRV_ARG, &req->argv, err);
}

static int decode_shell(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	struct token t;

	if (expect(r, &t, K_STR, "shell", "a string", err) < 0 ||
	    check_text("shell", &t, false, err) < 0)
		return -1;
	return copy_text(&t, &req->shell) < 0 ? out_of_memory("shell", err) : 0;
}

static int decode_cwd(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	size_t components;
	struct token t;

	if (expect(r, &t, K_STR, "cwd", "a string", err) < 0 ||
	    check_path("cwd", &t, false, &components, err) < 0)
		return -1;
	return copy_text(&t, &req->cwd) < 0 ? out_of_memory("cwd", err) : 0;
}

/* Orders "NAME=VALUE" strings by NAME. */
static int compare_names(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t nx = strcspn(x, "="), ny = strcspn(y, "=");
	int c = memcmp(x, y, nx < ny ? nx : ny);

	return c ? c : (nx > ny) - (nx < ny);
}

/*
 * A variable given twice is refused like any repeated key.  Sorting a copy
 * of the list finds it in n log n: comparing each name with every other
 * would let a 12 KB frame of 4096 names cost the loop millions of steps.
 */
static int check_env_repeats(const struct wire_strv *env, struct wire_error *err)
{
	char q[QUOTE_MAX * 4 + 8];
	const char **sorted;
	size_t i, n;
	int rc = 0;

	if (env->n < 2)
		return 0;
	sorted = malloc(env->n * sizeof(*sorted));
	if (!sorted)
		return out_of_memory("env", err);
	memcpy(sorted, env->v, env->n * sizeof(*sorted));
	qsort(sorted, env->n, sizeof(*sorted), compare_names);
	for (i = 1; i < env->n && rc == 0; i++) {
		if (compare_names(&sorted[i - 1], &sorted[i]) == 0) {
			n = strcspn(sorted[i], "=");
			wire_quote(q, sizeof(q), (const uint8_t *)sorted[i], n, QUOTE_MAX);
			rc = request_error(err, "env.%s: duplicate key", q);
		}
	}
	free(sorted);
	return rc;
}

/* {"NAME": "VALUE", ...} into "NAME=VALUE" strings, checked as read_strv does. */
static int decode_env(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	struct token m, k, v;
	struct reader first;
	char q[QUOTE_MAX * 4 + 8], field[QUOTE_MAX * 4 + 16];
	size_t i, bytes = 0;
	char *text;

	if (expect(r, &m, K_MAP, "env", "a map of strings to strings", err) < 0)
		return -1;
	if (m.len > WIRE_MAX_ENV)
		return request_error(err, "env: %u variables are more than %d", m.len, WIRE_MAX_ENV);
	first = *r;
	for (i = 0; i < m.len; i++) {
		if (expect(r, &k, K_STR, "env", "a map with string keys", err) < 0)
			return -1;
		wire_quote(q, sizeof(q), k.data, k.len, QUOTE_MAX);
		snprintf(field, sizeof(field), "env.%s", q);
		if (!valid_env_name(&k))
			return request_error(err, "%s: '%s' is not a variable name", field, q);
		if (expect(r, &v, K_STR, field, "a string", err) < 0 ||
		    check_text(field, &v, true, err) < 0)
			return -1;
		/* The bytes of "NAME=VALUE" without its NUL, as argv's are counted. */
		bytes += (size_t)k.len + v.len + 1;
		if (bytes > WIRE_MAX_ENV_BYTES)
			return request_error(err, "%s: the variables up to here have more than %u bytes "
			                     "in all", field, WIRE_MAX_ENV_BYTES);
	}
	req->env.v = malloc((m.len + 1) * sizeof(char *) + bytes + m.len);
	if (!req->env.v)
		return out_of_memory("env", err);
	text = (char *)(req->env.v + m.len + 1);
	for (i = 0; i < m.len; i++) {
		next_token(&first, &k, err);
		next_token(&first, &v, err);
		req->env.v[i] = text;
		memcpy(text, k.data, k.len);
		text += k.len;
		*text++ = '=';
		memcpy(text, v.data, v.len);
		text += v.len;
		*text++ = '\0';
	}
	req->env.v[m.len] = NULL;
	req->env.n = m.len;
	return check_env_repeats(&req->env, err);
}

static int decode_stdin(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	struct token t;

	if (next_token(r, &t, err) < 0)
		return -1;
	if (t.kind != K_BIN && t.kind != K_STR)
		return request_error(err, "stdin: must be binary data, not %s", kind_name(t.kind));
	if (copy_bytes(&t, &req->stdin_data) < 0)
		return out_of_memory("stdin", err);
	req->stdin_len = t.len;
	return 0;
}

static int decode_timeout(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	req->has_timeout = true;
	return read_number(r, "timeout", true, WIRE_MAX_TIMEOUT, &req->timeout, err);
}

static int decode_max_output(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	req->has_max_output = true;
	return read_uint(r, "max_output", 0, MAX_BYTES, &req->max_output, err);
}

/* -------------------------------------------------------------- policy */

/* A word a field accepts and the enum value it stands for. */
struct word {
	const char *text;
	int value;
};

static const struct word network_words[] = {
	{"none", SBX_NETWORK_NONE}, {"full", SBX_NETWORK_FULL}, {NULL, 0},
};

static const struct word strategy_words[] = {
	{"auto", SBX_MEMORY_AUTO},         {"kernel", SBX_MEMORY_KERNEL},
	{"watchdog", SBX_MEMORY_WATCHDOG}, {"none", SBX_MEMORY_NONE},
	{NULL, 0},
};

static int read_word(struct reader *r, const char *field, const struct word *words, int *out,
                     struct wire_error *err)
{
	char q[QUOTE_MAX * 4 + 8];
	struct token t;
	const struct word *w;

	if (expect(r, &t, K_STR, field, "a string", err) < 0)
		return -1;
	for (w = words; w->text; w++) {
		if (strlen(w->text) == t.len && memcmp(w->text, t.data, t.len) == 0) {
			*out = w->value;
			return 0;
		}
	}
	wire_quote(q, sizeof(q), t.data, t.len, QUOTE_MAX);
	return request_error(err, "%s: '%s' is not one of %s", field, q,
	                     words == network_words ? "none, full" : "auto, kernel, watchdog, none");
}

static int decode_policy_field(struct reader *r, enum wire_policy_field f, struct wire_policy *p,
                               struct wire_error *err)
{
	switch (f) {
	case WIRE_P_WRITABLE:
		return read_strv(r, "policy.writable", STRV_POLICY_PATH, &p->writable, err);
	case WIRE_P_DENY_WRITE:
		return read_strv(r, "policy.deny_write", STRV_POLICY_PATH, &p->deny_write, err);
	case WIRE_P_DENY_READ:
		return read_strv(r, "policy.deny_read", STRV_POLICY_PATH, &p->deny_read, err);
	case WIRE_P_NETWORK:
		return read_word(r, "policy.network", network_words, &p->network, err);
	case WIRE_P_MEMORY_STRATEGY:
		return read_word(r, "policy.memory_strategy", strategy_words, &p->memory_strategy, err);
	case WIRE_P_MEMORY:
		return read_uint(r, "policy.memory", 1, MAX_BYTES, &p->memory, err);
	case WIRE_P_FILE_SIZE:
		return read_uint(r, "policy.file_size", 1, MAX_BYTES, &p->file_size, err);
	case WIRE_P_CPU_SECONDS:
		return read_uint(r, "policy.cpu_seconds", 1, MAX_CPU_SECONDS, &p->cpu_seconds, err);
	case WIRE_P_PROCESSES:
		return read_uint(r, "policy.processes", 1, MAX_COUNT, &p->processes, err);
	case WIRE_P_OPEN_FILES:
		return read_uint(r, "policy.open_files", 1, MAX_COUNT, &p->open_files, err);
	case WIRE_P_CPUS:
		return read_number(r, "policy.cpus", false, MAX_CPUS, &p->cpus, err);
	case WIRE_P_COUNT:
		break;
	}
	return request_error(err, "policy: internal error: field %d", (int)f);
}

static const char *const policy_keys[WIRE_P_COUNT] = {
	[WIRE_P_WRITABLE] = "writable",
	[WIRE_P_DENY_WRITE] = "deny_write",
	[WIRE_P_DENY_READ] = "deny_read",
	[WIRE_P_NETWORK] = "network",
	[WIRE_P_MEMORY] = "memory",
	[WIRE_P_FILE_SIZE] = "file_size",
	[WIRE_P_CPUS] = "cpus",
	[WIRE_P_CPU_SECONDS] = "cpu_seconds",
	[WIRE_P_PROCESSES] = "processes",
	[WIRE_P_OPEN_FILES] = "open_files",
	[WIRE_P_MEMORY_STRATEGY] = "memory_strategy",
};

/* The index of key |t| in |keys|, or -1. */
static int key_index(const struct token *t, const char *const *keys, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (strlen(keys[i]) == t->len && memcmp(keys[i], t->data, t->len) == 0)
			return i;
	}
	return -1;
}

/* Reads a key of a map of |where| ("" for the request, "policy." inside it)
 * and finds it in |keys|; refuses unknown and repeated ones. */
static int read_key(struct reader *r, const char *where, const char *const *keys, int n,
                    unsigned *seen, struct wire_error *err)
{
	char q[QUOTE_MAX * 4 + 8];
	struct token t;
	int k;

	if (next_token(r, &t, err) < 0)
		return -1;
	if (t.kind != K_STR)
		return request_error(err, "%s: keys must be strings, not %s",
		                     where[0] ? "policy" : "request", kind_name(t.kind));
	k = key_index(&t, keys, n);
	if (k < 0) {
		wire_quote(q, sizeof(q), t.data, t.len, QUOTE_MAX);
		return request_error(err, "%s%s: unknown key", where, q);
	}
	if (*seen & (1u << k))
		return request_error(err, "%s%s: duplicate key", where, keys[k]);
	*seen |= 1u << k;
	return k;
}

static int decode_policy(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	struct token m;
	uint32_t i;
	int k;

	if (expect(r, &m, K_MAP, "policy", "a map", err) < 0)
		return -1;
	req->has_policy = true;
	for (i = 0; i < m.len; i++) {
		k = read_key(r, "policy.", policy_keys, WIRE_P_COUNT, &req->policy.set, err);
		if (k < 0 || decode_policy_field(r, (enum wire_policy_field)k, &req->policy, err) < 0)
			return -1;
	}
	return 0;
}

enum { F_ID, F_ARGV, F_SHELL, F_CWD, F_ENV, F_STDIN, F_TIMEOUT, F_MAX_OUTPUT, F_POLICY, F_COUNT };

static const char *const request_keys[F_COUNT] = {
	"id", "argv", "shell", "cwd", "env", "stdin", "timeout", "max_output", "policy",
};

static int (*const request_decoders[F_COUNT])(struct reader *, struct wire_request *,
                                               struct wire_error *) = {
	decode_id, decode_argv, decode_shell, decode_cwd, decode_env,
	decode_stdin, decode_timeout, decode_max_output, decode_policy,
};

static int decode_request(struct reader *r, struct wire_request *req, struct wire_error *err)
{
	struct token m;
	unsigned seen = 0;
	uint32_t i;
	int k;

	if (next_token(r, &m, err) < 0)
		return -1;
	if (m.kind != K_MAP)
		return request_error(err, "request: must be a map, not %s", kind_name(m.kind));
	for (i = 0; i < m.len; i++) {
		k = read_key(r, "", request_keys, F_COUNT, &seen, err);
		if (k < 0 || request_decoders[k](r, req, err) < 0)
			return -1;
	}
	if (!(seen & (1u << F_ID)))
		return request_error(err, "id: missing");
	if ((seen & (1u << F_ARGV)) && (seen & (1u << F_SHELL)))
		return request_error(err, "shell: give either argv or shell, not both");
	if (!(seen & ((1u << F_ARGV) | (1u << F_SHELL))))
		return request_error(err, "argv: missing; give argv or shell");
	return 0;
}

int wire_decode_request(const uint8_t *buf, size_t len, struct wire_request *req,
                        struct wire_error *err)
{
	struct reader r = {buf, buf, buf + len};

	memset(req, 0, sizeof(*req));
	if (wire_check_frame(buf, len, err) < 0)
		return -1;
	return decode_request(&r, req, err);
}

void wire_request_free(struct wire_request *req)
{
	free(req->argv.v);
	free(req->shell);
	free(req->cwd);
	free(req->env.v);
	free(req->stdin_data);
	free(req->policy.writable.v);
	free(req->policy.deny_write.v);
	free(req->policy.deny_read.v);
	memset(req, 0, sizeof(*req));
}

bool wire_peek_id(const uint8_t *buf, size_t len, uint64_t *id)
{
	struct reader r = {buf, buf, buf + len};
	struct wire_error err;
	struct token m, k, v;
	uint32_t i;

	if (wire_check_frame(buf, len, &err) < 0 || next_token(&r, &m, &err) < 0 ||
	    m.kind != K_MAP)
		return false;
	for (i = 0; i < m.len; i++) {
		struct reader value;

		if (next_token(&r, &k, &err) < 0)
			return false;
		value = r;
		if (k.kind == K_STR && k.len == 2 && memcmp(k.data, "id", 2) == 0 &&
		    next_token(&value, &v, &err) == 0 && v.kind == K_UINT) {
			*id = v.u;
			return true;
		}
		if (skip_values(&r, 1, &err) < 0)
			return false;
	}
	return false;
}

/* -------------------------------------------------------------- frames */

uint32_t wire_frame_length(const uint8_t header[WIRE_HEADER_SIZE])
{
	return (uint32_t)header[0] << 24 | (uint32_t)header[1] << 16 | (uint32_t)header[2] << 8 |
	       (uint32_t)header[3];
}

void wire_put_header(uint8_t header[WIRE_HEADER_SIZE], uint32_t len)
{
	header[0] = (uint8_t)(len >> 24);
	header[1] = (uint8_t)(len >> 16);
	header[2] = (uint8_t)(len >> 8);
	header[3] = (uint8_t)len;
}

int wire_frame_begin(msgpack_sbuffer *sb)
{
	static const char zero[WIRE_HEADER_SIZE];

	sb->size = 0;
	return msgpack_sbuffer_write(sb, zero, sizeof(zero)) == 0 ? 0 : -1;
}

int wire_frame_end(msgpack_sbuffer *sb)
{
	size_t body = sb->size - WIRE_HEADER_SIZE;

	if (sb->size < WIRE_HEADER_SIZE || body > UINT32_MAX)
		return -1;
	wire_put_header((uint8_t *)sb->data, (uint32_t)body);
	return 0;
}

static int pack_text(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	return msgpack_pack_str(pk, n) == 0 && msgpack_pack_str_body(pk, s, n) == 0 ? 0 : -1;
}

int wire_pack_error(msgpack_sbuffer *sb, const uint64_t *id, const char *code,
                    const char *message)
{
	msgpack_packer pk;

	if (wire_frame_begin(sb) < 0)
		return -1;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	if (msgpack_pack_map(&pk, 2) < 0 || pack_text(&pk, "id") < 0 ||
	    (id ? msgpack_pack_uint64(&pk, *id) : msgpack_pack_nil(&pk)) < 0 ||
	    pack_text(&pk, "error") < 0 || msgpack_pack_map(&pk, 2) < 0 ||
	    pack_text(&pk, "code") < 0 || pack_text(&pk, code) < 0 ||
	    pack_text(&pk, "message") < 0 || pack_text(&pk, message) < 0)
		return -1;
	return wire_frame_end(sb);
}
