/*
 * wire.h -- the frames of `sbx serve` (DESIGN.md, "The wire protocol"):
 * a 4-byte big-endian length, then one msgpack map.
 *
 * Requests come from peers we do not trust, so they are decoded by our own
 * bounded reader over the frame's bytes, never by msgpack_unpack(), which
 * allocates for every count a peer announces.  Decoding is two passes:
 *
 *   1. a walk over the whole frame that checks every length and count
 *      against the bytes that remain, the nesting depth, the bytes msgpack
 *      never uses (0xc1) and the types we never use (ext), and that the
 *      frame holds exactly one value; it allocates nothing.  Failing it is
 *      a "bad_frame", after which the connection is closed.
 *   2. a decode of the request map, field by field, with every type,
 *      value, duplicate and unknown key checked.  Failing it is a
 *      "bad_request" that names the field; the connection goes on.
 *
 * Every allocation happens in pass 2, after pass 1 proved the frame
 * well-formed, and is at most a small constant times the frame's size.
 * Responses are packed with msgpack-c's packer, which only sees our data.
 */
#ifndef SBX_WIRE_H
#define SBX_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

/* The frame header: a big-endian length. */
#define WIRE_HEADER_SIZE 4
/* Default --max-frame. */
#define WIRE_DEFAULT_MAX_FRAME (1024u * 1024u)

/* Nesting of containers a frame may have; a request needs three. */
#define WIRE_MAX_DEPTH 8
/*
 * argv and env: how many, and their bytes in all (string bytes, without
 * terminators).  execve() refuses much less anyway (about 2 MiB of argv and
 * environment together, by default); these keep a large --max-frame from
 * making the decoder copy what could never run.
 */
#define WIRE_MAX_ARGS 16384
#define WIRE_MAX_ARGS_BYTES (1024u * 1024u)
#define WIRE_MAX_ENV 4096
#define WIRE_MAX_ENV_BYTES (1024u * 1024u)
/*
 * Each policy list (writable, deny_write, deny_read): paths, their bytes in
 * all, the components of one path, and the components of all its paths.
 * The sandbox does work on the event loop for each directory between a
 * writable root and a denied path (bubblewrap pins every one), so what a
 * request can make it do is bounded by components, not only by bytes: 16
 * deny_read paths 1000 components deep took the loop 26 seconds, 64 of 64
 * components still over a second.  256 components in a list is a few
 * dozen real paths.
 */
#define WIRE_MAX_PATHS 64
#define WIRE_MAX_PATHS_BYTES (64u * 1024u)
#define WIRE_MAX_PATH_DEPTH 64
#define WIRE_MAX_PATHS_COMPONENTS 256
/* The longest timeout a request may give, as on the command line. */
#define WIRE_MAX_TIMEOUT 1e9

/* The error codes of responses (DESIGN.md leaves them to us; README lists them). */
#define WIRE_BAD_FRAME "bad_frame"           /* not one well-formed frame: connection closed */
#define WIRE_BAD_REQUEST "bad_request"       /* a field is missing, unknown or wrong */
#define WIRE_POLICY_WIDENED "policy_widened" /* asks for more than the server's base policy */
#define WIRE_START_FAILED "start_failed"     /* the run could not be started */
#define WIRE_UNAVAILABLE "unavailable"       /* the server is shutting down */

/* Why a frame was refused: a code above and one sentence that starts with
 * the field ("argv[2]: ...") or, for a bad frame, says where it broke. */
struct wire_error {
	const char *code;  /* static string */
	char message[512]; /* valid UTF-8: peer bytes are quoted as \xNN */
};

/* A NULL-terminated list of strings held in one allocation. */
struct wire_strv {
	char **v; /* NULL when the field was absent */
	size_t n;
};

/* The "policy" map of a request; each field counts only when its bit is in |set|. */
enum wire_policy_field {
	WIRE_P_WRITABLE,
	WIRE_P_DENY_WRITE,
	WIRE_P_DENY_READ,
	WIRE_P_NETWORK,
	WIRE_P_MEMORY,
	WIRE_P_FILE_SIZE,
	WIRE_P_CPUS,
	WIRE_P_CPU_SECONDS,
	WIRE_P_PROCESSES,
	WIRE_P_OPEN_FILES,
	WIRE_P_MEMORY_STRATEGY,
	WIRE_P_COUNT
};

struct wire_policy {
	unsigned set; /* bits (1u << WIRE_P_*) */
	struct wire_strv writable, deny_write, deny_read;
	int network;         /* enum sbx_network */
	int memory_strategy; /* enum sbx_memory_strategy */
	uint64_t memory, file_size, cpu_seconds, processes, open_files;
	double cpus;
};

/* A decoded request; every string is NUL-terminated and free of NUL bytes. */
struct wire_request {
	uint64_t id;
	struct wire_strv argv; /* exactly one of argv and shell */
	char *shell;
	char *cwd;             /* NULL: the workspace */
	struct wire_strv env;  /* "NAME=VALUE" */
	uint8_t *stdin_data;   /* NULL: no "stdin" */
	size_t stdin_len;
	bool has_timeout, has_max_output, has_policy;
	double timeout;
	uint64_t max_output;
	struct wire_policy policy;
};

/* The length a frame header announces. */
uint32_t wire_frame_length(const uint8_t header[WIRE_HEADER_SIZE]);

/*
 * Pass 1 alone: returns 0 when |buf| holds exactly one well-formed msgpack
 * value no deeper than WIRE_MAX_DEPTH, else -1 with a bad_frame in |err|.
 * Allocates nothing.
 */
int wire_check_frame(const uint8_t *buf, size_t len, struct wire_error *err);

/*
 * Decodes the body of one frame (without its header) into |req|, which the
 * caller releases with wire_request_free() whatever the outcome.  Returns 0,
 * or -1 with |err| filled: err->code is WIRE_BAD_FRAME when the frame is
 * malformed, WIRE_BAD_REQUEST when a field is wrong.
 */
int wire_decode_request(const uint8_t *buf, size_t len, struct wire_request *req,
                        struct wire_error *err);
void wire_request_free(struct wire_request *req);

/*
 * The "id" of a well-formed frame whose request was refused, so the error
 * can still be matched; false when it has no usable id.
 */
bool wire_peek_id(const uint8_t *buf, size_t len, uint64_t *id);

/* Writes the 4-byte header of a frame of |len| bytes. */
void wire_put_header(uint8_t header[WIRE_HEADER_SIZE], uint32_t len);

/*
 * Packs a whole error frame (header included) into |sb|: {"id": id or nil,
 * "error": {"code": code, "message": message}}.  Returns 0 or -1 when out of
 * memory.
 */
int wire_pack_error(msgpack_sbuffer *sb, const uint64_t *id, const char *code,
                    const char *message);

/*
 * Starts a frame in |sb|: reserves its header.  wire_frame_end() fills the
 * header in once the body is packed; it returns -1 when the body is too
 * large for one frame.
 */
int wire_frame_begin(msgpack_sbuffer *sb);
int wire_frame_end(msgpack_sbuffer *sb);

/* Copies |n| peer bytes into |dst| (|size| bytes) as printable ASCII, each
 * other byte as \xNN, cut with "..." past |max| bytes; always terminated. */
void wire_quote(char *dst, size_t size, const uint8_t *s, size_t n, size_t max);

#endif /* SBX_WIRE_H */
