/*
 * replay.c -- runs the fuzz target on saved inputs, without libFuzzer, so
 * `make check` (and valgrind and the sanitizer build) replays them:
 *
 *   fuzz/replay             every file of fuzz/corpus and fuzz/regress
 *   fuzz/replay FILE|DIR... those
 *
 * fuzz/corpus holds the seeds, valid requests all: each must also decode.
 * fuzz/regress holds inputs that once went wrong, or that THREATS.md names;
 * they only have to keep their promises (fuzz_request.c).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int read_all(const char *path, uint8_t **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL, *bigger;
	size_t used = 0, cap = 0, n;

	if (!f)
		return -1;
	do {
		if (used == cap) {
			cap = cap ? cap * 2 : 4096;
			bigger = realloc(buf, cap);
			if (!bigger) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = bigger;
		}
		n = fread(buf + used, 1, cap - used, f);
		used += n;
	} while (n > 0);
	fclose(f);
	*out = buf;
	*len = used;
	return 0;
}

/* Replays one file; a seed must decode as well. Returns 0 or -1. */
static int replay_file(const char *path, int must_decode)
{
	struct wire_request req;
	struct wire_error err;
	uint8_t *data;
	size_t len;
	int rc = 0;

	if (read_all(path, &data, &len) < 0) {
		fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
		return -1;
	}
	LLVMFuzzerTestOneInput(data, len);
	if (must_decode && wire_decode_request(data, len, &req, &err) < 0) {
		fprintf(stderr, "replay: the seed %s is refused: %s: %s\n", path, err.code,
		        err.message);
		rc = -1;
	}
	if (must_decode)
		wire_request_free(&req);
	free(data);
	return rc;
}

/* Replays |path|, a file or every file of a directory; adds to *count. */
static int replay(const char *path, int must_decode, unsigned *count)
{
	char child[4096];
	struct dirent *e;
	struct stat st;
	DIR *d;
	int rc = 0;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return replay_file(path, must_decode);
	}
	d = opendir(path);
	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
		if (stat(child, &st) == 0 && S_ISREG(st.st_mode)) {
			(*count)++;
			if (replay_file(child, must_decode) < 0)
				rc = -1;
		}
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0, i;

	if (argc > 1) {
		for (i = 1; i < argc; i++)
			rc |= replay(argv[i], 0, &count);
	} else {
		rc |= replay(FUZZ_DIR "/corpus", 1, &count);
		rc |= replay(FUZZ_DIR "/regress", 0, &count);
	}
	/* Replaying nothing would pass without testing anything. */
	if (count == 0) {
		fprintf(stderr, "replay: no inputs found\n");
		return 1;
	}
	printf("replay: %u inputs, %s\n", count, rc ? "FAILED" : "all kept their promises");
	return rc ? 1 : 0;
}
