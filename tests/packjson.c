/* packjson.c -- JSON values packed as msgpack, for the wire suites. */
#include <string.h>

#include "packjson.h"

void pack_json(msgpack_packer *pk, json_t *v)
{
	const char *key;
	json_t *value;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		msgpack_pack_map(pk, json_object_size(v));
		json_object_foreach(v, key, value) {
			msgpack_pack_str_with_body(pk, key, strlen(key));
			pack_json(pk, value);
		}
		break;
	case JSON_ARRAY:
		msgpack_pack_array(pk, json_array_size(v));
		for (i = 0; i < json_array_size(v); i++)
			pack_json(pk, json_array_get(v, i));
		break;
	case JSON_STRING:
		msgpack_pack_str_with_body(pk, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		msgpack_pack_int64(pk, json_integer_value(v));
		break;
	case JSON_REAL:
		msgpack_pack_double(pk, json_real_value(v));
		break;
	case JSON_TRUE:
		msgpack_pack_true(pk);
		break;
	case JSON_FALSE:
		msgpack_pack_false(pk);
		break;
	case JSON_NULL:
		msgpack_pack_nil(pk);
		break;
	}
}
