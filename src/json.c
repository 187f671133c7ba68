/*
 * json.c -- an sbx_result as the JSON object DESIGN.md fixes, key for key.
 *
 * jansson refuses strings that are not valid UTF-8, and a program's output
 * (or a path in an error) may be any bytes, so every text taken from the
 * result goes through cli_json_text(), which replaces what is not UTF-8.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/*
 * The length of the well-formed UTF-8 sequence at the start of s[0..n), or 0
 * when there is none; then *bad is the length of its longest start that could
 * have begun one (at least 1).  Replacing each such maximal piece with one
 * U+FFFD is what Unicode recommends, and what Python's "replace" does.  The
 * ranges for the second byte rule out overlong forms, surrogates and code
 * points past U+10FFFF.
 */
static size_t utf8_sequence(const unsigned char *s, size_t n, size_t *bad)
{
	unsigned char lo = 0x80, hi = 0xBF;
	size_t need, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF) {
		need = 1;
	} else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
		need = 2;
		if (s[0] == 0xE0)
			lo = 0xA0;
		else if (s[0] == 0xED)
			hi = 0x9F;
	} else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		need = 3;
		if (s[0] == 0xF0)
			lo = 0x90;
		else if (s[0] == 0xF4)
			hi = 0x8F;
	} else {
		*bad = 1;
		return 0;
	}
	for (i = 1; i <= need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi) {
			*bad = i;
			return 0;
		}
		lo = 0x80;
		hi = 0xBF;
	}
	return need + 1;
}

/* A JSON string of |len| bytes (NUL bytes included), invalid UTF-8 replaced. */
json_t *cli_json_text(const char *data, size_t len)
{
	static const char replacement[] = "\xEF\xBF\xBD";
	const unsigned char *s = (const unsigned char *)data;
	size_t i = 0, used = 0, seq, bad;
	char *copy;
	json_t *str;

	if (len == 0)
		return json_string("");
	while (i < len && (seq = utf8_sequence(s + i, len - i, &bad)) > 0)
		i += seq;
	if (i == len)
		return json_stringn(data, len);

	/* Each replaced piece is at least one byte and becomes three. */
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	copy = malloc(len * 3);
	if (!copy)
		return NULL;
	memcpy(copy, data, i);
	used = i;
	while (i < len) {
		seq = utf8_sequence(s + i, len - i, &bad);
		if (seq > 0) {
			memcpy(copy + used, data + i, seq);
			used += seq;
			i += seq;
		} else {
			memcpy(copy + used, replacement, 3);
			used += 3;
			i += bad;
		}
	}
	str = json_stringn(copy, used);
	free(copy);
	return str;
}

/* A text from the result, or null when there is none. */
static json_t *text_or_null(const char *text)
{
	return text ? cli_json_text(text, strlen(text)) : json_null();
}

static json_t *output_string(const sbx_output *o)
{
	return o->data ? cli_json_text(o->data, o->len) : json_string("");
}

static json_t *mechanisms_json(const sbx_resources *res)
{
	json_t *obj = json_object();
	int l;

	if (!obj)
		return NULL;
	for (l = 0; l < SBX_LIMIT_COUNT; l++) {
		if (res->mechanisms[l] == SBX_MECH_UNSET)
			continue;
		if (json_object_set_new(obj, sbx_limit_name((enum sbx_limit)l),
		                        json_string(sbx_mechanism_name(res->mechanisms[l]))) < 0) {
			json_decref(obj);
			return NULL;
		}
	}
	return obj;
}

static json_t *limits_hit_json(const sbx_resources *res)
{
	json_t *arr = json_array();
	int h;

	if (!arr)
		return NULL;
	for (h = 0; h < SBX_HIT_COUNT; h++) {
		if (!(res->limits_hit & (1u << h)))
			continue;
		if (json_array_append_new(arr, json_string(sbx_hit_name((enum sbx_hit)h))) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *warnings_json(const sbx_resources *res)
{
	json_t *arr = json_array();
	unsigned i;

	if (!arr)
		return NULL;
	for (i = 0; i < res->nwarnings && i < SBX_MAX_WARNINGS; i++) {
		if (json_array_append_new(arr, text_or_null(res->warnings[i])) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/*
 * json_pack takes the references given with "o" even when it fails, so a
 * NULL from any helper above (out of memory) makes the whole result NULL
 * without leaking the others.
 */
json_t *cli_result_json(const sbx_result *r)
{
	const sbx_resources *res = &r->resources;
	json_t *resources;

	resources = json_pack(
		"{s:f, s:f, s:f, s:o, s:s?, s:o, s:o, s:o}",
		"wall_seconds", res->wall_seconds,
		"cpu_user_seconds", res->cpu_user_seconds,
		"cpu_system_seconds", res->cpu_system_seconds,
		"peak_memory_bytes", res->peak_memory_bytes < 0 ? json_null()
		                     : json_integer((json_int_t)res->peak_memory_bytes),
		"peak_memory_source", res->peak_memory_source,
		"mechanisms", mechanisms_json(res),
		"limits_hit", limits_hit_json(res),
		"warnings", warnings_json(res));

	return json_pack(
		"{s:o, s:o, s:b, s:o, s:o, s:I, s:I, s:b, s:b, s:b, s:s?, s:o, s:o}",
		"exit_code", r->exited ? json_integer(r->exit_code) : json_null(),
		"signal", r->signal > 0 ? json_integer(r->signal) : json_null(),
		"timed_out", r->timed_out,
		"stdout", output_string(&r->out[SBX_STDOUT]),
		"stderr", output_string(&r->out[SBX_STDERR]),
		"stdout_bytes", (json_int_t)r->out[SBX_STDOUT].total,
		"stderr_bytes", (json_int_t)r->out[SBX_STDERR].total,
		"stdout_truncated", r->out[SBX_STDOUT].truncated,
		"stderr_truncated", r->out[SBX_STDERR].truncated,
		"isolated", r->isolated,
		"backend", r->backend,
		"error", text_or_null(r->error),
		"resources", resources);
}
