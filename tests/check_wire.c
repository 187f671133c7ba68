/*
 * check_wire.c -- the request decoder, the frame helpers and the result map
 * of `sbx serve`, as units (src/wire.c, src/serve_result.c).
 *
 * Requests are written as JSON and packed to msgpack by the test (jansson
 * parses them, with NUL allowed in strings); what JSON cannot say -- 0xc1,
 * huge announced counts, duplicate keys, binary keys -- is written as bytes.
 *
 * malloc, calloc and realloc are wrapped at link time (serve.mk), so a test
 * can count what decoding one frame allocated: THREATS.md wants a frame that
 * announces four billion elements to allocate nothing at all.
 */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "serve.h"
#include "wire.h"
#include "packjson.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------- allocation counters */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

static bool counting;
static size_t alloc_calls, alloc_bytes;

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
	if (counting) {
		alloc_calls++;
		alloc_bytes += n;
	}
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	if (counting) {
		alloc_calls++;
		alloc_bytes += n * size;
	}
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	if (counting) {
		alloc_calls++;
		alloc_bytes += n;
	}
	return __real_realloc(p, n);
}

/* Decodes |len| bytes, counting what the decoder allocated. */
static int decode_counted(const void *buf, size_t len, struct wire_request *req,
                          struct wire_error *err)
{
	int rc;

	alloc_calls = alloc_bytes = 0;
	counting = true;
	rc = wire_decode_request(buf, len, req, err);
	counting = false;
	return rc;
}

/* ------------------------------------------------------ JSON to msgpack */

/* A frame body packed from |text| (JSON; "\u0000" allowed); caller frees. */
static msgpack_sbuffer pack(const char *text)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	json_error_t jerr;
	json_t *v;

	v = json_loads(text, JSON_ALLOW_NUL | JSON_DECODE_ANY, &jerr);
	ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, jerr.text);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack_json(&pk, v);
	json_decref(v);
	return sb;
}

/* ------------------------------------------------------------ asserts */

/* Asserts that |buf| is refused with |code| and a message starting with
 * |start| (and containing |also|, when not NULL). */
static void assert_refused(const void *buf, size_t len, const char *code, const char *start,
                           const char *also, const char *what)
{
	struct wire_request req;
	struct wire_error err;
	int rc;

	rc = decode_counted(buf, len, &req, &err);
	wire_request_free(&req);
	ck_assert_msg(rc < 0, "%s: decoded, but should be refused", what);
	ck_assert_msg(strcmp(err.code, code) == 0, "%s: code %s, expected %s (%s)", what, err.code,
	              code, err.message);
	ck_assert_msg(strncmp(err.message, start, strlen(start)) == 0,
	              "%s: message \"%s\" does not start with \"%s\"", what, err.message, start);
	if (also)
		ck_assert_msg(strstr(err.message, also) != NULL,
		              "%s: message \"%s\" does not say \"%s\"", what, err.message, also);
}

static void assert_json_refused(const char *json, const char *code, const char *start,
                                const char *also)
{
	msgpack_sbuffer sb = pack(json);

	assert_refused(sb.data, sb.size, code, start, also, json);
	msgpack_sbuffer_destroy(&sb);
}

/* Decodes |json|, which must be accepted, into |req| (caller frees). */
static void decode_json(const char *json, struct wire_request *req)
{
	msgpack_sbuffer sb = pack(json);
	struct wire_error err;

	ck_assert_msg(wire_decode_request((const uint8_t *)sb.data, sb.size, req, &err) == 0, "%s refused: %s %s",
	              json, err.code, err.message);
	msgpack_sbuffer_destroy(&sb);
}

/* ----------------------------------------------------------- accepted */

START_TEST(full_request_decodes)
{
	struct wire_request req;

	decode_json("{\"id\": 7, \"argv\": [\"/bin/echo\", \"\", \"-n\"], \"cwd\": \"sub/dir\","
	            " \"env\": {\"A\": \"1\", \"B_2\": \"\"}, \"stdin\": \"in\", \"timeout\": 2.5,"
	            " \"max_output\": 0, \"policy\": {\"writable\": [\"/tmp/x\"],"
	            " \"deny_write\": [\"/tmp/x/.git\"], \"deny_read\": [\"/etc/shadow\"],"
	            " \"network\": \"none\", \"memory\": 1048576, \"file_size\": 4096,"
	            " \"cpus\": 0.5, \"cpu_seconds\": 3, \"processes\": 10, \"open_files\": 64,"
	            " \"memory_strategy\": \"kernel\"}}",
	            &req);
	ck_assert_uint_eq(req.id, 7);
	ck_assert_uint_eq(req.argv.n, 3);
	ck_assert_str_eq(req.argv.v[0], "/bin/echo");
	ck_assert_str_eq(req.argv.v[1], "");
	ck_assert_str_eq(req.argv.v[2], "-n");
	ck_assert_ptr_null(req.argv.v[3]);
	ck_assert_ptr_null(req.shell);
	ck_assert_str_eq(req.cwd, "sub/dir");
	ck_assert_uint_eq(req.env.n, 2);
	ck_assert_str_eq(req.env.v[0], "A=1");
	ck_assert_str_eq(req.env.v[1], "B_2=");
	ck_assert_ptr_null(req.env.v[2]);
	ck_assert_uint_eq(req.stdin_len, 2);
	ck_assert_int_eq(memcmp(req.stdin_data, "in", 2), 0);
	ck_assert(req.has_timeout && req.timeout == 2.5);
	ck_assert(req.has_max_output && req.max_output == 0);
	ck_assert(req.has_policy);
	ck_assert_uint_eq(req.policy.set, (1u << WIRE_P_COUNT) - 1);
	ck_assert_str_eq(req.policy.writable.v[0], "/tmp/x");
	ck_assert_str_eq(req.policy.deny_write.v[0], "/tmp/x/.git");
	ck_assert_str_eq(req.policy.deny_read.v[0], "/etc/shadow");
	ck_assert_int_eq(req.policy.network, SBX_NETWORK_NONE);
	ck_assert_int_eq(req.policy.memory_strategy, SBX_MEMORY_KERNEL);
	ck_assert_uint_eq(req.policy.memory, 1048576);
	ck_assert_uint_eq(req.policy.file_size, 4096);
	ck_assert(req.policy.cpus == 0.5);
	ck_assert_uint_eq(req.policy.cpu_seconds, 3);
	ck_assert_uint_eq(req.policy.processes, 10);
	ck_assert_uint_eq(req.policy.open_files, 64);
	wire_request_free(&req);
}
END_TEST

START_TEST(shell_request_and_literal_dash)
{
	struct wire_request req;

	decode_json("{\"shell\": \"echo hi\", \"id\": 0}", &req);
	ck_assert_str_eq(req.shell, "echo hi");
	ck_assert_ptr_null(req.argv.v);
	ck_assert(!req.has_policy && !req.has_timeout && !req.has_max_output);
	ck_assert_ptr_null(req.stdin_data);
	wire_request_free(&req);

	/* An argv[0] that looks like an option is a program name like any other. */
	decode_json("{\"id\": 1, \"argv\": [\"-rf\", \"--help\"]}", &req);
	ck_assert_str_eq(req.argv.v[0], "-rf");
	ck_assert_str_eq(req.argv.v[1], "--help");
	wire_request_free(&req);
}
END_TEST

/* Encoders pick any integer width, signed ones for positive numbers too. */
START_TEST(integer_widths_all_count)
{
	static const uint8_t frames[][16] = {
		{0x82, 0xa2, 'i', 'd', 0xcc, 200, 0xa5, 's', 'h', 'e', 'l', 'l', 0xa1, 'x'},
		{0x82, 0xa2, 'i', 'd', 0xd0, 100, 0xa5, 's', 'h', 'e', 'l', 'l', 0xa1, 'x'},
		{0x82, 0xa2, 'i', 'd', 0xcd, 1, 0, 0xa5, 's', 'h', 'e', 'l', 'l', 0xa1, 'x'},
		{0x82, 0xa2, 'i', 'd', 0xd2, 0, 0, 1, 0, 0xa5, 's', 'h', 'e', 'l', 'l', 0xa1},
	};
	static const size_t lens[] = {14, 14, 15, 16};
	static const uint64_t ids[] = {200, 100, 256, 256};
	struct wire_request req;
	struct wire_error err;
	uint8_t last[17];

	for (size_t i = 0; i < 3; i++) {
		ck_assert_msg(wire_decode_request(frames[i], lens[i], &req, &err) == 0, "%zu: %s", i,
		              err.message);
		ck_assert_uint_eq(req.id, ids[i]);
		wire_request_free(&req);
	}
	memcpy(last, frames[3], 16);
	last[16] = 'x';
	ck_assert_msg(wire_decode_request(last, 17, &req, &err) == 0, "%s", err.message);
	ck_assert_uint_eq(req.id, 256);
	wire_request_free(&req);
}
END_TEST

/* --------------------------------------------------------- bad frames */

/* Every cut of a valid request is a bad frame, never a crash or a request. */
START_TEST(truncated_frames_are_bad_frames)
{
	msgpack_sbuffer sb = pack("{\"id\": 3, \"argv\": [\"/bin/true\", \"a\"], \"env\": {\"X\": \"y\"},"
	                          " \"policy\": {\"memory\": 100000, \"writable\": [\"/tmp\"]}}");
	char what[64];

	for (size_t n = 0; n < sb.size; n++) {
		snprintf(what, sizeof(what), "cut at %zu of %zu", n, sb.size);
		assert_refused(sb.data, n, WIRE_BAD_FRAME, "", NULL, what);
	}
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

START_TEST(byte_c1_is_a_bad_frame)
{
	static const uint8_t alone[] = {0xc1};
	static const uint8_t inside[] = {0x82, 0xa2, 'i', 'd', 0xc1, 0xa5, 's', 'h', 'e', 'l', 'l',
	                                 0xa1, 'x'};

	assert_refused(alone, sizeof(alone), WIRE_BAD_FRAME, "byte 0xc1", NULL, "0xc1 alone");
	assert_refused(inside, sizeof(inside), WIRE_BAD_FRAME, "byte 0xc1", "at byte 4",
	               "0xc1 as a value");
}
END_TEST

START_TEST(trailing_garbage_is_a_bad_frame)
{
	msgpack_sbuffer sb = pack("{\"id\": 1, \"shell\": \"true\"}");

	msgpack_sbuffer_write(&sb, "\x00", 1);
	assert_refused(sb.data, sb.size, WIRE_BAD_FRAME, "1 bytes of trailing garbage", NULL,
	               "one byte after the map");
	msgpack_sbuffer_write(&sb, "\x81\xa1" "a\x01", 4);
	assert_refused(sb.data, sb.size, WIRE_BAD_FRAME, "5 bytes of trailing garbage", NULL,
	               "a second map after the first");
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

START_TEST(empty_and_extension_frames_are_bad)
{
	static const uint8_t ext[] = {0x81, 0xa2, 'i', 'd', 0xd4, 0x01, 0x00};
	static const uint8_t ext8[] = {0xc7, 0x01, 0x05, 0x00};

	assert_refused("", 0, WIRE_BAD_FRAME, "the frame is empty", NULL, "empty");
	assert_refused(ext, sizeof(ext), WIRE_BAD_FRAME, "extension type 0xd4", NULL, "fixext1");
	assert_refused(ext8, sizeof(ext8), WIRE_BAD_FRAME, "extension type 0xc7", NULL, "ext8");
}
END_TEST

/*
 * Counts and lengths of 0xffffffff (and 0xffff) in every header that has
 * one, each in a frame far too short for it: refused before any
 * allocation, since nothing is sized before the walk has checked it.
 */
static const struct {
	const char *name;
	uint8_t bytes[16];
	size_t len;
} huge[] = {
	{"map32 of 4294967295", {0xdf, 0xff, 0xff, 0xff, 0xff}, 5},
	{"array32 of 4294967295", {0xdd, 0xff, 0xff, 0xff, 0xff}, 5},
	{"str32 of 4294967295 bytes", {0xdb, 0xff, 0xff, 0xff, 0xff}, 5},
	{"bin32 of 4294967295 bytes", {0xc6, 0xff, 0xff, 0xff, 0xff}, 5},
	{"map16 of 65535", {0xde, 0xff, 0xff}, 3},
	{"array16 of 65535", {0xdc, 0xff, 0xff}, 3},
	{"fixmap of 15 in 3 bytes", {0x8f, 0xa1, 'a'}, 3},
	{"argv as array32 of 4294967295",
	 {0x82, 0xa2, 'i', 'd', 0x01, 0xa4, 'a', 'r', 'g', 'v', 0xdd, 0xff, 0xff, 0xff, 0xff}, 15},
	{"env as map32 of 4294967295",
	 {0x82, 0xa2, 'i', 'd', 0x01, 0xa3, 'e', 'n', 'v', 0xdf, 0xff, 0xff, 0xff, 0xff}, 14},
	{"stdin as bin32 of 4294967295",
	 {0x82, 0xa2, 'i', 'd', 0x01, 0xa5, 's', 't', 'd', 'i', 'n', 0xc6, 0xff, 0xff, 0xff, 0xff},
	 16},
};

START_TEST(huge_counts_allocate_nothing)
{
	assert_refused(huge[_i].bytes, huge[_i].len, WIRE_BAD_FRAME, "", "byte", huge[_i].name);
	ck_assert_msg(alloc_calls == 0, "%s: %zu allocations of %zu bytes", huge[_i].name,
	              alloc_calls, alloc_bytes);
}
END_TEST

/* The acceptance case word for word: a 5-byte frame announcing a map of four
 * billion entries allocates nothing, and the walk says why it stopped. */
START_TEST(five_byte_four_billion_map)
{
	static const uint8_t frame[] = {0xdf, 0xff, 0xff, 0xff, 0xff};

	assert_refused(frame, sizeof(frame), WIRE_BAD_FRAME, "a map of 4294967295 elements",
	               "cannot fit in the 0 bytes left", "4-billion map");
	ck_assert_uint_eq(alloc_calls, 0);
	ck_assert_uint_eq(alloc_bytes, 0);
}
END_TEST

static msgpack_sbuffer nested(unsigned depth, bool in_request)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (in_request) {
		msgpack_pack_map(&pk, 2);
		msgpack_pack_str_with_body(&pk, "id", 2);
		msgpack_pack_uint8(&pk, 1);
		msgpack_pack_str_with_body(&pk, "argv", 4);
		depth--;
	}
	for (unsigned i = 0; i < depth; i++)
		msgpack_pack_array(&pk, 1);
	msgpack_pack_nil(&pk);
	return sb;
}

START_TEST(deep_nesting_is_a_depth_error)
{
	struct wire_error err;
	msgpack_sbuffer sb;

	sb = nested(100000, false);
	assert_refused(sb.data, sb.size, WIRE_BAD_FRAME, "containers nest deeper than 8 levels",
	               NULL, "100000 nested arrays");
	ck_assert_uint_eq(alloc_calls, 0);
	msgpack_sbuffer_destroy(&sb);

	sb = nested(WIRE_MAX_DEPTH + 1, true);
	assert_refused(sb.data, sb.size, WIRE_BAD_FRAME, "containers nest deeper than 8 levels",
	               NULL, "arrays nested in argv");
	msgpack_sbuffer_destroy(&sb);

	/* The limit itself is allowed by the walk (the request is then wrong). */
	sb = nested(WIRE_MAX_DEPTH, true);
	ck_assert_int_eq(wire_check_frame((const uint8_t *)sb.data, sb.size, &err), 0);
	assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST, "argv[0]: must be a string", NULL,
	               "8 levels");
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* ------------------------------------------------------- bad requests */

/* Each refused with bad_request and a message that starts with the field. */
static const struct {
	const char *json;
	const char *start;
	const char *also;
} bad_requests[] = {
	/* not a map */
	{"[1, 2]", "request: must be a map, not an array", NULL},
	{"\"argv\"", "request: must be a map", NULL},
	/* missing */
	{"{\"argv\": [\"/bin/true\"]}", "id: missing", NULL},
	{"{\"id\": 1}", "argv: missing", NULL},
	{"{\"id\": 1, \"cwd\": \"/\"}", "argv: missing", NULL},
	/* both */
	{"{\"id\": 1, \"argv\": [\"a\"], \"shell\": \"b\"}", "shell: give either", NULL},
	/* unknown */
	{"{\"id\": 1, \"argv\": [\"a\"], \"bogus\": 1}", "bogus: unknown key", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"bogus\": 1}}", "policy.bogus: unknown key", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"env\": {}}}", "policy.env: unknown key", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"ID\": 1}", "ID: unknown key", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"\\u00e9\": 1}", "\\xc3\\xa9: unknown key", NULL},
	/* wrong types */
	{"{\"id\": \"1\", \"argv\": [\"a\"]}", "id: must be an integer, not a string", NULL},
	{"{\"id\": 1.0, \"argv\": [\"a\"]}", "id: must be an integer, not a float", NULL},
	{"{\"id\": -1, \"argv\": [\"a\"]}", "id: must not be negative: -1", NULL},
	{"{\"id\": null, \"argv\": [\"a\"]}", "id: must be an integer, not nil", NULL},
	{"{\"id\": 1, \"argv\": \"/bin/true\"}", "argv: must be an array of strings, not a string", NULL},
	{"{\"id\": 1, \"argv\": [\"a\", 5]}", "argv[1]: must be a string, not an integer", NULL},
	{"{\"id\": 1, \"argv\": [[\"a\"]]}", "argv[0]: must be a string, not an array", NULL},
	{"{\"id\": 1, \"shell\": [\"a\"]}", "shell: must be a string, not an array", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"cwd\": 5}", "cwd: must be a string, not an integer", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"env\": [\"A=1\"]}", "env: must be a map", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"env\": {\"A\": 1}}", "env.A: must be a string, not an integer", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"stdin\": 5}", "stdin: must be binary data, not an integer", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"stdin\": [\"x\"]}", "stdin: must be binary data, not an array", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"timeout\": \"5\"}", "timeout: must be a number, not a string", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"timeout\": true}", "timeout: must be a number, not a boolean", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"max_output\": 1.5}", "max_output: must be an integer, not a float", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": [1]}", "policy: must be a map, not an array", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"writable\": \"/tmp\"}}", "policy.writable: must be an array of strings", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"deny_read\": [1]}}", "policy.deny_read[0]: must be a string", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"network\": true}}", "policy.network: must be a string", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"network\": \"some\"}}", "policy.network: 'some' is not one of none, full", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"memory_strategy\": \"best\"}}", "policy.memory_strategy: 'best' is not one of", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"memory\": \"1G\"}}", "policy.memory: must be an integer, not a string", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"memory\": \"123bogus\"}}", "policy.memory: must be an integer, not a string", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"cpus\": \"1\"}}", "policy.cpus: must be a number", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"processes\": 2.0}}", "policy.processes: must be an integer, not a float", NULL},
	/* bad variable names */
	{"{\"id\": 1, \"argv\": [\"a\"], \"env\": {\"A=B\": \"1\"}}", "env.A=B: 'A=B' is not a variable name", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"env\": {\"\": \"1\"}}", "env.: '' is not a variable name", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"env\": {\"1A\": \"1\"}}", "env.1A: '1A' is not a variable name", NULL},
	/* paths */
	{"{\"id\": 1, \"argv\": [\"a\"], \"cwd\": \"\"}", "cwd: is empty", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"cwd\": \"..\"}", "cwd: may not contain a '..' component: '..'", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"cwd\": \"a/../../etc\"}", "cwd: may not contain a '..' component", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"cwd\": \"/tmp/..\"}", "cwd: may not contain a '..' component", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"writable\": [\"tmp\"]}}", "policy.writable[0]: must be an absolute path: 'tmp'", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"writable\": [\"\"]}}", "policy.writable[0]: is empty", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"deny_write\": [\"/a\", \"/a/../b\"]}}", "policy.deny_write[1]: may not contain a '..' component", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"deny_read\": [\"/a/./b\"]}}", "policy.deny_read[0]: may not contain a '.' component", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"writable\": [\"~/x\"]}}", "policy.writable[0]: must be an absolute path", NULL},
	/* NUL inside */
	{"{\"id\": 1, \"argv\": [\"/bin/ech\\u0000o\"]}", "argv[0]: contains a NUL byte at offset 8", NULL},
	{"{\"id\": 1, \"argv\": [\"a\", \"b\\u0000\"]}", "argv[1]: contains a NUL byte", NULL},
	{"{\"id\": 1, \"shell\": \"true\\u0000; rm -rf /\"}", "shell: contains a NUL byte", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"env\": {\"A\": \"x\\u0000y\"}}", "env.A: contains a NUL byte", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"cwd\": \"sub\\u0000dir\"}", "cwd: contains a NUL byte", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"writable\": [\"/tmp\\u0000/x\"]}}", "policy.writable[0]: contains a NUL byte", NULL},
	/* sizes */
	{"{\"id\": 1, \"argv\": [\"a\"], \"timeout\": -1}", "timeout: must not be negative: -1", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"timeout\": -0.5}", "timeout: must not be negative: -0.5", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"timeout\": 1e300}", "timeout: 1e+300 is more than 1e+09", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"max_output\": -1}", "max_output: must not be negative: -1", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"max_output\": 9223372036854775807}", "max_output: 9223372036854775807 is more than", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"memory\": 0}}", "policy.memory: must be at least 1: 0", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"memory\": -5}}", "policy.memory: must not be negative: -5", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"file_size\": 0}}", "policy.file_size: must be at least 1: 0", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"processes\": 0}}", "policy.processes: must be at least 1", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"processes\": 4294967296}}", "policy.processes: 4294967296 is more than 2147483647", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"open_files\": 0}}", "policy.open_files: must be at least 1", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"cpu_seconds\": 0}}", "policy.cpu_seconds: must be at least 1", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"cpus\": 0}}", "policy.cpus: must be more than 0", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"cpus\": -1.5}}", "policy.cpus: must not be negative: -1.5", NULL},
	{"{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"cpus\": 100000}}", "policy.cpus: 100000 is more than 4096", NULL},
	/* empty argv */
	{"{\"id\": 1, \"argv\": []}", "argv: is empty", NULL},
	{"{\"id\": 1, \"argv\": [\"\"]}", "argv[0]: is empty", NULL},
	{"{\"id\": 1, \"shell\": \"\"}", "shell: is empty", NULL},
};

START_TEST(bad_request_names_the_field)
{
	assert_json_refused(bad_requests[_i].json, WIRE_BAD_REQUEST, bad_requests[_i].start,
	                    bad_requests[_i].also);
}
END_TEST

/* JSON cannot repeat a key, so these are written out. */
START_TEST(duplicate_keys)
{
	static const uint8_t id_twice[] = {0x83, 0xa2, 'i', 'd', 0x01, 0xa2, 'i', 'd', 0x02,
	                                   0xa5, 's', 'h', 'e', 'l', 'l', 0xa1, 'x'};
	static const uint8_t memory_twice[] = {
		0x83, 0xa2, 'i', 'd', 0x01, 0xa5, 's', 'h', 'e', 'l', 'l', 0xa1, 'x',
		0xa6, 'p', 'o', 'l', 'i', 'c', 'y', 0x82,
		0xa6, 'm', 'e', 'm', 'o', 'r', 'y', 0x05, 0xa6, 'm', 'e', 'm', 'o', 'r', 'y', 0x06};

	assert_refused(id_twice, sizeof(id_twice), WIRE_BAD_REQUEST, "id: duplicate key", NULL,
	               "id twice");
	assert_refused(memory_twice, sizeof(memory_twice), WIRE_BAD_REQUEST,
	               "policy.memory: duplicate key", NULL, "policy.memory twice");
}
END_TEST

/* Keys JSON cannot write: with a NUL inside, and a variable given twice. */
START_TEST(keys_with_nul_and_repeated_variables)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_str_with_body(&pk, "shell", 5);
	msgpack_pack_str_with_body(&pk, "x", 1);
	msgpack_pack_str_with_body(&pk, "k\0ey", 4);
	msgpack_pack_uint8(&pk, 1);
	assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST, "k\\x00ey: unknown key", NULL,
	               "NUL in a key");

	msgpack_sbuffer_clear(&sb);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_str_with_body(&pk, "shell", 5);
	msgpack_pack_str_with_body(&pk, "x", 1);
	msgpack_pack_str_with_body(&pk, "env", 3);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, "A\0B", 3);
	msgpack_pack_str_with_body(&pk, "x", 1);
	assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST, "env.A\\x00B: 'A\\x00B' is not a variable name",
	               NULL, "NUL in a variable name");

	msgpack_sbuffer_clear(&sb);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_str_with_body(&pk, "shell", 5);
	msgpack_pack_str_with_body(&pk, "x", 1);
	msgpack_pack_str_with_body(&pk, "env", 3);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "A", 1);
	msgpack_pack_str_with_body(&pk, "1", 1);
	msgpack_pack_str_with_body(&pk, "B", 1);
	msgpack_pack_str_with_body(&pk, "2", 1);
	msgpack_pack_str_with_body(&pk, "A", 1);
	msgpack_pack_str_with_body(&pk, "3", 1);
	assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST, "env.A: duplicate key", NULL,
	               "a variable twice");
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

START_TEST(keys_must_be_strings)
{
	static const uint8_t int_key[] = {0x82, 0x01, 0x01, 0xa5, 's', 'h', 'e', 'l', 'l', 0xa1, 'x'};
	static const uint8_t bin_key[] = {0x81, 0xc4, 0x02, 'i', 'd', 0x01};

	assert_refused(int_key, sizeof(int_key), WIRE_BAD_REQUEST,
	               "request: keys must be strings, not an integer", NULL, "integer key");
	assert_refused(bin_key, sizeof(bin_key), WIRE_BAD_REQUEST,
	               "request: keys must be strings, not binary data", NULL, "bin key");
}
END_TEST

/* NaN and infinity are floats JSON cannot carry. */
START_TEST(non_finite_numbers)
{
	static const double values[] = {NAN, INFINITY, -INFINITY};
	msgpack_sbuffer sb;
	msgpack_packer pk;

	for (size_t i = 0; i < N_ELEMS(values); i++) {
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 3);
		msgpack_pack_str_with_body(&pk, "id", 2);
		msgpack_pack_uint8(&pk, 1);
		msgpack_pack_str_with_body(&pk, "shell", 5);
		msgpack_pack_str_with_body(&pk, "true", 4);
		msgpack_pack_str_with_body(&pk, "timeout", 7);
		msgpack_pack_double(&pk, values[i]);
		assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST, "timeout: must be a finite number",
		               NULL, "non-finite timeout");
		msgpack_sbuffer_destroy(&sb);
	}
}
END_TEST

START_TEST(over_long_paths)
{
	char *long_path = malloc(PATH_MAX + 16);
	char *json = malloc(PATH_MAX + 256);

	memset(long_path, 'a', PATH_MAX + 15);
	long_path[0] = '/';
	long_path[PATH_MAX] = '\0';
	snprintf(json, PATH_MAX + 256, "{\"id\": 1, \"argv\": [\"a\"], \"cwd\": \"%s\"}", long_path);
	assert_json_refused(json, WIRE_BAD_REQUEST, "cwd: a path of 4096 bytes is longer than 4095",
	                    NULL);
	snprintf(json, PATH_MAX + 256,
	         "{\"id\": 1, \"argv\": [\"a\"], \"policy\": {\"writable\": [\"%s\"]}}", long_path);
	assert_json_refused(json, WIRE_BAD_REQUEST, "policy.writable[0]: a path of 4096 bytes", NULL);
	/* One byte shorter is a path. */
	long_path[PATH_MAX - 1] = '\0';
	snprintf(json, PATH_MAX + 256, "{\"id\": 1, \"argv\": [\"a\"], \"cwd\": \"%s\"}", long_path);
	{
		struct wire_request req;
		decode_json(json, &req);
		ck_assert_uint_eq(strlen(req.cwd), PATH_MAX - 1);
		wire_request_free(&req);
	}
	free(long_path);
	free(json);
}
END_TEST

/* Decoding copies at most a small multiple of the frame, however the
 * frame is made up: here, argv of 16384 one-byte strings. */
START_TEST(allocation_is_proportional_to_the_frame)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct wire_request req;
	struct wire_error err;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_str_with_body(&pk, "argv", 4);
	msgpack_pack_array(&pk, WIRE_MAX_ARGS);
	for (int i = 0; i < WIRE_MAX_ARGS; i++)
		msgpack_pack_str_with_body(&pk, "x", 1);
	ck_assert_int_eq(decode_counted(sb.data, sb.size, &req, &err), 0);
	ck_assert_uint_eq(req.argv.n, WIRE_MAX_ARGS);
	/* One block for the whole list: pointers and text. */
	ck_assert_uint_eq(alloc_calls, 1);
	ck_assert_uint_le(alloc_bytes, 6 * sb.size);
	wire_request_free(&req);

	/* One more element is refused, by count, before anything is allocated. */
	msgpack_sbuffer_clear(&sb);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_str_with_body(&pk, "argv", 4);
	msgpack_pack_array(&pk, WIRE_MAX_ARGS + 1);
	for (int i = 0; i < WIRE_MAX_ARGS + 1; i++)
		msgpack_pack_str_with_body(&pk, "x", 1);
	assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST, "argv: 16385 elements are more than 16384",
	               NULL, "argv too long");
	ck_assert_uint_eq(alloc_calls, 0);
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* ------------------------------------------------------- list bounds */

/*
 * Path |i| of a generated policy list: "/p<i>", then "/a" until it has
 * |depth| components, then 'x' until it has |len| bytes (when longer).
 */
static void make_path(char *buf, size_t size, size_t i, size_t depth, size_t len)
{
	size_t n = (size_t)snprintf(buf, size, "/p%zu", i);

	for (size_t d = 1; d < depth && n + 2 < size; d++) {
		memcpy(buf + n, "/a", 2);
		n += 2;
	}
	while (n < len && n + 1 < size)
		buf[n++] = 'x';
	buf[n] = '\0';
}

/* {"id": 1, "argv": ["/bin/true"], "policy": {field: [n paths]}}, packed
 * directly: JSON of these sizes would be unwieldy. */
static msgpack_sbuffer pack_policy_list(const char *field, size_t n, size_t depth, size_t len)
{
	static char path[PATH_MAX * 2];
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_str_with_body(&pk, "argv", 4);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_str_with_body(&pk, "/bin/true", 9);
	msgpack_pack_str_with_body(&pk, "policy", 6);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, field, strlen(field));
	msgpack_pack_array(&pk, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		make_path(path, sizeof(path), i, depth, len);
		msgpack_pack_str_with_body(&pk, path, strlen(path));
	}
	return sb;
}

/*
 * Each policy list is bounded by paths, bytes, components per path and
 * components in all, so a request cannot make the sandbox's setup on the
 * loop long (the 26-second request of 16 deny_read paths 1000 components
 * deep is the last row).  Each bound is accepted when met and refused, at
 * the element that passes it, one past it.
 */
static const struct {
	const char *field;
	size_t n, depth, len;
	const char *start; /* NULL: accepted */
} list_bounds[] = {
	{"deny_read", 64, 4, 0, NULL},
	{"deny_read", 65, 1, 0, "policy.deny_read: 65 elements are more than 64"},
	{"writable", 1, 64, 0, NULL},
	{"deny_write", 3, 65, 0, "policy.deny_write[0]: more than 64 components (65): '/p0/a/a/a"},
	{"deny_read", 16, 1, 4000, NULL},
	{"deny_read", 17, 1, 4000,
	 "policy.deny_read[16]: the paths up to here have more than 65536 bytes in all"},
	{"writable", 4, 64, 0, NULL},
	{"writable", 5, 64, 0,
	 "policy.writable[4]: the paths up to here have more than 256 components in all"},
	{"deny_read", 16, 1001, 0, "policy.deny_read[0]: more than 64 components (1001)"},
};

START_TEST(policy_lists_are_bounded)
{
	msgpack_sbuffer sb = pack_policy_list(list_bounds[_i].field, list_bounds[_i].n,
	                                      list_bounds[_i].depth, list_bounds[_i].len);
	struct wire_request req;
	struct wire_error err;

	if (list_bounds[_i].start) {
		assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST, list_bounds[_i].start, NULL,
		               list_bounds[_i].field);
		/* Refused while checking, before the list is copied: argv's is
		 * the only allocation. */
		ck_assert_uint_eq(alloc_calls, 1);
	} else {
		ck_assert_msg(wire_decode_request((const uint8_t *)sb.data, sb.size, &req, &err) == 0,
		              "%s of %zu: %s", list_bounds[_i].field, list_bounds[_i].n, err.message);
		wire_request_free(&req);
	}
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* A request whose argv has two strings, or whose env has two variables, of
 * |len| bytes each (a variable's bytes are "NAME=VALUE"). */
static msgpack_sbuffer pack_two_big(bool env, size_t len)
{
	char *big = malloc(len);
	msgpack_sbuffer sb;
	msgpack_packer pk;

	ck_assert_ptr_nonnull(big);
	memset(big, 'v', len);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2 + env);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_str_with_body(&pk, "argv", 4);
	if (env) {
		msgpack_pack_array(&pk, 1);
		msgpack_pack_str_with_body(&pk, "/bin/true", 9);
		msgpack_pack_str_with_body(&pk, "env", 3);
		msgpack_pack_map(&pk, 2);
		msgpack_pack_str_with_body(&pk, "A", 1);
		msgpack_pack_str_with_body(&pk, big, len - 2);
		msgpack_pack_str_with_body(&pk, "B", 1);
		msgpack_pack_str_with_body(&pk, big, len - 2);
	} else {
		msgpack_pack_array(&pk, 2);
		msgpack_pack_str_with_body(&pk, big, len);
		msgpack_pack_str_with_body(&pk, big, len);
	}
	free(big);
	return sb;
}

/* argv and env hold at most 1 MiB each, however large --max-frame is. */
START_TEST(argv_and_env_bytes_are_bounded)
{
	const bool env = _i == 1;
	msgpack_sbuffer sb;
	struct wire_request req;
	struct wire_error err;

	sb = pack_two_big(env, 512 * 1024);
	ck_assert_msg(wire_decode_request((const uint8_t *)sb.data, sb.size, &req, &err) == 0, "%s",
	              err.message);
	ck_assert_uint_eq(env ? req.env.n : req.argv.n, 2);
	wire_request_free(&req);
	msgpack_sbuffer_destroy(&sb);

	sb = pack_two_big(env, 512 * 1024 + 1);
	assert_refused(sb.data, sb.size, WIRE_BAD_REQUEST,
	               env ? "env.B: the variables up to here have more than 1048576 bytes in all"
	                   : "argv[1]: the strings up to here have more than 1048576 bytes in all",
	               NULL, env ? "env" : "argv");
	ck_assert_uint_eq(alloc_calls, env ? 1 : 0);  /* argv's, when env is refused */
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* --------------------------------------------------------------- ids */

START_TEST(peek_id_finds_the_id_of_a_refused_request)
{
	msgpack_sbuffer sb;
	uint64_t id = 0;

	sb = pack("{\"argv\": 5, \"id\": 42}");
	ck_assert(wire_peek_id((const uint8_t *)sb.data, sb.size, &id));
	ck_assert_uint_eq(id, 42);
	msgpack_sbuffer_destroy(&sb);

	sb = pack("{\"policy\": {\"id\": 3, \"x\": [[1], {\"a\": 2}]}, \"id\": 9}");
	ck_assert(wire_peek_id((const uint8_t *)sb.data, sb.size, &id));
	ck_assert_uint_eq(id, 9);
	msgpack_sbuffer_destroy(&sb);

	sb = pack("{\"argv\": [\"a\"], \"id\": \"9\"}");
	ck_assert(!wire_peek_id((const uint8_t *)sb.data, sb.size, &id));
	msgpack_sbuffer_destroy(&sb);

	sb = pack("[1, 2]");
	ck_assert(!wire_peek_id((const uint8_t *)sb.data, sb.size, &id));
	msgpack_sbuffer_destroy(&sb);
	ck_assert(!wire_peek_id((const uint8_t *)"\xdf\xff\xff\xff\xff", 5, &id));
}
END_TEST

/* ------------------------------------------------------------ packing */

/* Unpacks one frame we packed ourselves (trusted, so msgpack_unpack is fine). */
static void unpack_frame(const msgpack_sbuffer *sb, msgpack_unpacked *u)
{
	size_t off = 0;

	ck_assert_uint_ge(sb->size, WIRE_HEADER_SIZE);
	ck_assert_uint_eq(wire_frame_length((const uint8_t *)sb->data), sb->size - WIRE_HEADER_SIZE);
	msgpack_unpacked_init(u);
	ck_assert_int_eq(msgpack_unpack_next(u, sb->data + WIRE_HEADER_SIZE,
	                                     sb->size - WIRE_HEADER_SIZE, &off),
	                 MSGPACK_UNPACK_SUCCESS);
	ck_assert_uint_eq(off, sb->size - WIRE_HEADER_SIZE);
	ck_assert_int_eq(u->data.type, MSGPACK_OBJECT_MAP);
}

static const msgpack_object *get(const msgpack_object *map, const char *key)
{
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object_kv *kv = &map->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
		    memcmp(kv->key.via.str.ptr, key, strlen(key)) == 0)
			return &kv->val;
	}
	return NULL;
}

START_TEST(error_frame)
{
	msgpack_sbuffer sb;
	msgpack_unpacked u;
	const msgpack_object *e, *v;
	uint64_t id = 77;

	msgpack_sbuffer_init(&sb);
	ck_assert_int_eq(wire_pack_error(&sb, &id, WIRE_BAD_REQUEST, "argv: is empty"), 0);
	unpack_frame(&sb, &u);
	ck_assert_uint_eq(u.data.via.map.size, 2);
	ck_assert_uint_eq(get(&u.data, "id")->via.u64, 77);
	e = get(&u.data, "error");
	ck_assert_int_eq(e->type, MSGPACK_OBJECT_MAP);
	v = get(e, "code");
	ck_assert_int_eq(v->via.str.size, strlen(WIRE_BAD_REQUEST));
	ck_assert_int_eq(memcmp(v->via.str.ptr, WIRE_BAD_REQUEST, v->via.str.size), 0);
	v = get(e, "message");
	ck_assert_int_eq(memcmp(v->via.str.ptr, "argv: is empty", v->via.str.size), 0);
	msgpack_unpacked_destroy(&u);

	/* Without an id the id is nil. */
	ck_assert_int_eq(wire_pack_error(&sb, NULL, WIRE_BAD_FRAME, "x"), 0);
	unpack_frame(&sb, &u);
	ck_assert_int_eq(get(&u.data, "id")->type, MSGPACK_OBJECT_NIL);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

/* Asserts that |obj| (msgpack) has exactly the keys of |json|, recursively
 * into the maps. */
static void assert_same_keys(const msgpack_object *obj, json_t *json, const char *where)
{
	const char *key;
	json_t *value;

	ck_assert_msg(obj->type == MSGPACK_OBJECT_MAP, "%s is not a map", where);
	ck_assert_msg(obj->via.map.size == json_object_size(json), "%s: %u keys, JSON has %zu", where,
	              obj->via.map.size, json_object_size(json));
	json_object_foreach(json, key, value) {
		const msgpack_object *v = get(obj, key);
		ck_assert_msg(v != NULL, "%s: no key %s", where, key);
		if (json_is_object(value))
			assert_same_keys(v, value, key);
		if (json_is_null(value))
			ck_assert_msg(v->type == MSGPACK_OBJECT_NIL, "%s.%s is not nil", where, key);
	}
}

START_TEST(result_has_the_keys_of_the_json_result)
{
	static char out[] = "hi \xff there";
	sbx_result r;
	msgpack_sbuffer sb;
	msgpack_unpacked u;
	const msgpack_object *res, *v;
	json_t *json;

	memset(&r, 0, sizeof(r));
	r.exited = true;
	r.exit_code = 3;
	r.out[SBX_STDOUT].data = out;
	r.out[SBX_STDOUT].len = sizeof(out) - 1;
	r.out[SBX_STDOUT].total = 100;
	r.out[SBX_STDOUT].truncated = true;
	r.isolated = true;
	r.backend = "bwrap";
	r.resources.wall_seconds = 0.25;
	r.resources.peak_memory_bytes = -1;
	r.resources.mechanisms[SBX_LIMIT_MEMORY] = SBX_MECH_CGROUP_V2;
	r.resources.limits_hit = 1u << SBX_HIT_OUTPUT;

	msgpack_sbuffer_init(&sb);
	ck_assert_int_eq(serve_pack_result(&sb, 5, &r), 0);
	unpack_frame(&sb, &u);
	ck_assert_uint_eq(get(&u.data, "id")->via.u64, 5);
	res = get(&u.data, "result");
	json = cli_result_json(&r);
	assert_same_keys(res, json, "result");
	json_decref(json);

	ck_assert_uint_eq(get(res, "exit_code")->via.u64, 3);
	v = get(res, "stdout");
	/* Not UTF-8 becomes U+FFFD, as in the JSON result. */
	ck_assert_int_eq(v->type, MSGPACK_OBJECT_STR);
	ck_assert_int_eq(v->via.str.size, 12);
	ck_assert_int_eq(memcmp(v->via.str.ptr, "hi \xef\xbf\xbd there", 12), 0);
	ck_assert_uint_eq(get(res, "stdout_bytes")->via.u64, 100);
	ck_assert(get(res, "stdout_truncated")->via.boolean);
	ck_assert_int_eq(get(get(res, "resources"), "wall_seconds")->type, MSGPACK_OBJECT_FLOAT64);
	v = get(get(get(res, "resources"), "mechanisms"), "memory");
	ck_assert_int_eq(memcmp(v->via.str.ptr, "cgroup_v2", v->via.str.size), 0);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
}
END_TEST

START_TEST(quote_escapes_and_cuts)
{
	char buf[64];

	wire_quote(buf, sizeof(buf), (const uint8_t *)"a\\b\n\xff", 5, 64);
	ck_assert_str_eq(buf, "a\\x5cb\\x0a\\xff");
	wire_quote(buf, sizeof(buf), (const uint8_t *)"abcdef", 6, 3);
	ck_assert_str_eq(buf, "abc...");
	wire_quote(buf, 8, (const uint8_t *)"\x01\x02\x03", 3, 64);
	ck_assert_uint_lt(strlen(buf), 8);
}
END_TEST

START_TEST(frame_header_round_trip)
{
	uint8_t h[WIRE_HEADER_SIZE];

	wire_put_header(h, 0x01020304);
	ck_assert_int_eq(h[0], 1);
	ck_assert_int_eq(h[3], 4);
	ck_assert_uint_eq(wire_frame_length(h), 0x01020304);
	wire_put_header(h, UINT32_MAX);
	ck_assert_uint_eq(wire_frame_length(h), UINT32_MAX);
}
END_TEST

static Suite *wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc;

	tc = tcase_create("accepted");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, full_request_decodes);
	tcase_add_test(tc, shell_request_and_literal_dash);
	tcase_add_test(tc, integer_widths_all_count);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad_frame");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, truncated_frames_are_bad_frames);
	tcase_add_test(tc, byte_c1_is_a_bad_frame);
	tcase_add_test(tc, trailing_garbage_is_a_bad_frame);
	tcase_add_test(tc, empty_and_extension_frames_are_bad);
	tcase_add_loop_test(tc, huge_counts_allocate_nothing, 0, N_ELEMS(huge));
	tcase_add_test(tc, five_byte_four_billion_map);
	tcase_add_test(tc, deep_nesting_is_a_depth_error);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad_request");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, bad_request_names_the_field, 0, N_ELEMS(bad_requests));
	tcase_add_test(tc, duplicate_keys);
	tcase_add_test(tc, keys_must_be_strings);
	tcase_add_test(tc, keys_with_nul_and_repeated_variables);
	tcase_add_test(tc, non_finite_numbers);
	tcase_add_test(tc, over_long_paths);
	tcase_add_test(tc, allocation_is_proportional_to_the_frame);
	tcase_add_loop_test(tc, policy_lists_are_bounded, 0, N_ELEMS(list_bounds));
	tcase_add_loop_test(tc, argv_and_env_bytes_are_bounded, 0, 2);
	tcase_add_test(tc, peek_id_finds_the_id_of_a_refused_request);
	suite_add_tcase(s, tc);

	tc = tcase_create("packing");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, error_frame);
	tcase_add_test(tc, result_has_the_keys_of_the_json_result);
	tcase_add_test(tc, quote_escapes_and_cuts);
	tcase_add_test(tc, frame_header_round_trip);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(wire_suite());
	int failures;

	srunner_run_all(sr, CK_ENV);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
