/*
 * packjson.h -- what the wire suites share: a JSON value (from a test's
 * readable text) packed as msgpack, the way a client would send it.
 */
#ifndef SBX_TESTS_PACKJSON_H
#define SBX_TESTS_PACKJSON_H

#include <jansson.h>
#include <msgpack.h>

/* Packs |v|: objects as maps, arrays, strings (NUL bytes kept), integers,
 * reals, booleans and null. */
void pack_json(msgpack_packer *pk, json_t *v);

#endif
