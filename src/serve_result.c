/*
 * serve_result.c -- a run's result as the "result" map of a response.
 *
 * The wire result must have exactly the keys of the JSON result, so it is
 * made from the JSON object cli_result_json() builds, converted value by
 * value; a key added there appears here without a change.  jansson strings
 * are valid UTF-8 (cli_json_text() replaced what was not), so every msgpack
 * str we send is too, which strict decoders such as Python's insist on.
 */
#include <string.h>

#include "serve.h"

static int pack_json(msgpack_packer *pk, const json_t *v, unsigned depth);

static int pack_string(msgpack_packer *pk, const char *s, size_t n)
{
	return msgpack_pack_str(pk, n) == 0 && msgpack_pack_str_body(pk, s, n) == 0 ? 0 : -1;
}

static int pack_object(msgpack_packer *pk, const json_t *obj, unsigned depth)
{
	const char *key;
	json_t *value;

	if (msgpack_pack_map(pk, json_object_size(obj)) < 0)
		return -1;
	json_object_foreach((json_t *)obj, key, value) {
		if (pack_string(pk, key, strlen(key)) < 0 || pack_json(pk, value, depth + 1) < 0)
			return -1;
	}
	return 0;
}

static int pack_array(msgpack_packer *pk, const json_t *arr, unsigned depth)
{
	size_t i;

	if (msgpack_pack_array(pk, json_array_size(arr)) < 0)
		return -1;
	for (i = 0; i < json_array_size(arr); i++) {
		if (pack_json(pk, json_array_get(arr, i), depth + 1) < 0)
			return -1;
	}
	return 0;
}

/* The result is three levels deep; the bound only guards against a cycle. */
static int pack_json(msgpack_packer *pk, const json_t *v, unsigned depth)
{
	if (depth > 16)
		return -1;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return pack_object(pk, v, depth);
	case JSON_ARRAY:
		return pack_array(pk, v, depth);
	case JSON_STRING:
		return pack_string(pk, json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		return msgpack_pack_int64(pk, json_integer_value(v));
	case JSON_REAL:
		return msgpack_pack_double(pk, json_real_value(v));
	case JSON_TRUE:
		return msgpack_pack_true(pk);
	case JSON_FALSE:
		return msgpack_pack_false(pk);
	case JSON_NULL:
		return msgpack_pack_nil(pk);
	}
	return -1;
}

int serve_pack_result(msgpack_sbuffer *sb, uint64_t id, const sbx_result *r)
{
	msgpack_packer pk;
	json_t *obj;
	int rc = -1;

	obj = cli_result_json(r);
	if (!obj)
		return -1;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	if (wire_frame_begin(sb) == 0 && msgpack_pack_map(&pk, 2) == 0 &&
	    pack_string(&pk, "id", 2) == 0 && msgpack_pack_uint64(&pk, id) == 0 &&
	    pack_string(&pk, "result", 6) == 0 && pack_json(&pk, obj, 0) == 0)
		rc = wire_frame_end(sb);
	json_decref(obj);
	return rc;
}

/*
 * Each kept byte of stdout and stderr becomes at most three (a byte that is
 * not UTF-8 becomes U+FFFD), behind a str header of at most five; the rest
 * of the frame fits in SERVE_RESULT_OVERHEAD.  on_run_done() checks the
 * packed frame against this, so a wrong guess here cannot pass the budget.
 */
size_t serve_result_bound(uint64_t max_output)
{
	const uint64_t limit = (SIZE_MAX - SERVE_RESULT_OVERHEAD) / 2 - 5;

	if (max_output > limit / 3)
		return SIZE_MAX;
	return 2 * (3 * (size_t)max_output + 5) + SERVE_RESULT_OVERHEAD;
}
