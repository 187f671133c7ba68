/*
 * check_serve.c -- `sbx serve` seen from outside: the built binary on a unix
 * socket (or stdio), driven by msgpack frames the test writes byte by byte
 * where it must, and by the Python and Node example clients.
 *
 * Every test starts its own server in a fresh directory, mostly on the
 * passthrough backend (fast, and what it runs is visible in /proc); one
 * group uses the default backend (bubblewrap here).  A test that must show
 * that no process survives gives the command a unique argument (a sleep of
 * "30.<pid>" seconds) and looks for it in every /proc/PID/cmdline.  Nothing
 * waits for a fixed time: every wait polls until its condition, with a
 * deadline, and fails past it.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <msgpack.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "packjson.h"

#define SBX_PATH SBX_TOP_BUILDDIR "/src/sbx"
#define PYTHON "/usr/bin/python3"
#define PY_CLIENT SBX_TOP_SRCDIR "/examples/python/sbx_client.py"
#define NODE_CLIENT SBX_TOP_SRCDIR "/examples/node/client.js"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* How long any one wait may take before the test fails. */
#define WAIT_SECONDS 20.0

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------ test directory */

/*
 * Check ends a failed test with _exit(), so nothing the test's process
 * registers runs then.  The parent (an unchecked fixture, once per TCase)
 * makes a base directory and removes it whatever happened; each test makes
 * its own directory inside.  Servers a failed test leaves are killed with
 * its process group by Check.
 */
static char base_dir[] = "/tmp/serve-test-XXXXXX";
static char dir[sizeof(base_dir) + 16];
static char sock_path[sizeof(dir) + 16];

static void make_base_dir(void)
{
	strcpy(base_dir + sizeof(base_dir) - 7, "XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base_dir));
}

static void remove_base_dir(void)
{
	char cmd[sizeof(base_dir) + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", base_dir);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "%s/t-XXXXXX", base_dir);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
}

static const char *path_in_dir(const char *name)
{
	static char paths[4][sizeof(dir) + 64];
	static int next;
	char *p = paths[next++ % 4];

	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

/* ------------------------------------------------------------ servers */

static pid_t server_pid;

static void stop_server_at_exit(void)
{
	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
	}
}

/* Spawns argv with stdout to /dev/null and stderr to |err_path|. */
static pid_t spawn(const char *const *argv, const char *err_path)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(err, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(99);
	}
	return pid;
}

/* A connection to |path|, or -1 (errno set) when nobody accepts. */
static int try_connect(const char *path)
{
	struct sockaddr_un addr;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

static char *read_text(const char *path)
{
	static char buf[8192];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

/*
 * SBX_SERVE_UNDER="libtool --mode=execute valgrind -q --error-exitcode=99 ..."
 * runs the servers the tests start under that command (words split at
 * spaces), so the server's own leaks and errors fail the tests that check
 * its exit status.  Moves argv[0..*n) behind the wrapper's words.
 */
static void add_wrapper(const char **argv, size_t *n)
{
	static char words[1024];
	const char *under = getenv("SBX_SERVE_UNDER");
	const char *w[16];
	size_t nw = 0;
	char *save, *tok;

	if (!under || !*under)
		return;
	snprintf(words, sizeof(words), "%s", under);
	for (tok = strtok_r(words, " ", &save); tok && nw < N_ELEMS(w);
	     tok = strtok_r(NULL, " ", &save))
		w[nw++] = tok;
	memmove(argv + nw, argv, *n * sizeof(*argv));
	memcpy(argv, w, nw * sizeof(*argv));
	*n += nw;
}

/*
 * Starts `sbx serve --listen unix:SOCK OPTIONS...` (with --backend
 * passthrough unless |bwrap|) and waits until it accepts a connection.
 */
static void start_server_opts(bool bwrap, const char *const *options)
{
	const char *argv[32] = {SBX_PATH, "serve", "--listen", NULL};
	char listen[sizeof(sock_path) + 8];
	size_t n = 3;
	double deadline = now() + WAIT_SECONDS;
	int fd, ws;

	snprintf(listen, sizeof(listen), "unix:%s", sock_path);
	argv[n++] = listen;
	add_wrapper(argv, &n);
	if (!bwrap) {
		argv[n++] = "--backend";
		argv[n++] = "passthrough";
	}
	for (size_t i = 0; options && options[i]; i++)
		argv[n++] = options[i];
	argv[n] = NULL;
	server_pid = spawn(argv, path_in_dir("stderr"));
	atexit(stop_server_at_exit);
	while ((fd = try_connect(sock_path)) < 0) {
		ck_assert_msg(waitpid(server_pid, &ws, WNOHANG) == 0,
		              "sbx serve exited before it listened: %s", read_text(path_in_dir("stderr")));
		ck_assert_msg(now() < deadline, "sbx serve never listened on %s", sock_path);
		usleep(10000);
	}
	close(fd);
}

static void start_server(void)
{
	start_server_opts(false, NULL);
}

/* Stops the server with |sig| and returns its exit status (-1: killed). */
static int stop_server(int sig)
{
	double deadline = now() + WAIT_SECONDS;
	pid_t pid = server_pid;
	int ws;

	ck_assert_int_eq(kill(pid, sig), 0);
	while (waitpid(pid, &ws, WNOHANG) == 0) {
		ck_assert_msg(now() < deadline, "sbx serve did not exit after signal %d", sig);
		usleep(10000);
	}
	server_pid = 0;
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static int connect_server(void)
{
	int fd = try_connect(sock_path);

	ck_assert_msg(fd >= 0, "cannot connect to %s: %s", sock_path, strerror(errno));
	return fd;
}

/* VmRSS of |pid| in KiB. */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	}
	fclose(f);
	return kib;
}

/* ------------------------------------------------------------- frames */

static void send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len > 0) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* One send for header and body: a server that refuses the header and
 * closes must not make the body's send fail (EPIPE). */
static void send_frame(int fd, const void *body, size_t len)
{
	uint8_t *frame = malloc(len + 4);

	ck_assert_ptr_nonnull(frame);
	frame[0] = (uint8_t)(len >> 24);
	frame[1] = (uint8_t)(len >> 16);
	frame[2] = (uint8_t)(len >> 8);
	frame[3] = (uint8_t)len;
	memcpy(frame + 4, body, len);
	send_all(fd, frame, len + 4);
	free(frame);
}

/* Sends |json| (printf-style) packed as msgpack, in one frame. */
static void send_json(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void send_json(int fd, const char *fmt, ...)
{
	char text[16384];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	json_error_t jerr;
	va_list ap;
	json_t *v;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	v = json_loads(text, JSON_ALLOW_NUL, &jerr);
	ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, jerr.text);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack_json(&pk, v);
	json_decref(v);
	send_frame(fd, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

/* Reads exactly |len| bytes before |deadline|: 1, or 0 at end of stream, or
 * -1 when the deadline passed. */
static int read_exact(int fd, void *buf, size_t len, double deadline)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	char *p = buf;
	ssize_t n;
	int ms;

	while (len > 0) {
		ms = (int)((deadline - now()) * 1000);
		if (ms <= 0)
			return -1;
		if (poll(&pfd, 1, ms) == 0)
			return -1;
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ECONNRESET)
			return 0;
		ck_assert_msg(n >= 0, "read: %s", strerror(errno));
		if (n == 0)
			return 0;
		p += n;
		len -= (size_t)n;
	}
	return 1;
}

#define N_BODIES 8
static char *bodies[N_BODIES];
static unsigned next_body;

/* A response, read within |seconds|: 1 (in |u|, caller destroys), 0 at the
 * end of the stream, -1 when none came in time. */
static int read_response_within(int fd, msgpack_unpacked *u, double seconds)
{
	double deadline = now() + seconds;
	uint8_t h[4];
	uint32_t len;
	char *body;
	size_t off = 0;
	int rc;

	rc = read_exact(fd, h, 4, deadline);
	if (rc <= 0)
		return rc;
	len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
	ck_assert_uint_lt(len, 64u << 20);
	/* The unpacked strings point into the frame, so the last few frames
	 * are kept until later reads replace them. */
	body = realloc(bodies[next_body % N_BODIES], len ? len : 1);
	ck_assert_ptr_nonnull(body);
	bodies[next_body++ % N_BODIES] = body;
	ck_assert_msg(read_exact(fd, body, len, deadline) == 1, "a response frame was cut short");
	msgpack_unpacked_init(u);
	/* The server is trusted here: msgpack_unpack may allocate as it likes. */
	ck_assert_int_eq(msgpack_unpack_next(u, body, len, &off), MSGPACK_UNPACK_SUCCESS);
	ck_assert_uint_eq(off, len);
	ck_assert_int_eq(u->data.type, MSGPACK_OBJECT_MAP);
	return 1;
}

static void read_response(int fd, msgpack_unpacked *u)
{
	ck_assert_msg(read_response_within(fd, u, WAIT_SECONDS) == 1, "no response");
}

static const msgpack_object *get(const msgpack_object *map, const char *key)
{
	ck_assert_int_eq(map->type, MSGPACK_OBJECT_MAP);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object_kv *kv = &map->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
		    memcmp(kv->key.via.str.ptr, key, strlen(key)) == 0)
			return &kv->val;
	}
	return NULL;
}

/* A str object as a NUL-terminated copy in static storage (for messages). */
static const char *text_of(const msgpack_object *o)
{
	static char buf[4][4096];
	static int next;
	char *b = buf[next++ % 4];
	size_t n;

	if (!o || o->type != MSGPACK_OBJECT_STR)
		return "(not a string)";
	n = o->via.str.size < sizeof(buf[0]) - 1 ? o->via.str.size : sizeof(buf[0]) - 1;
	memcpy(b, o->via.str.ptr, n);
	b[n] = '\0';
	return b;
}

static uint64_t id_of(const msgpack_object *resp)
{
	const msgpack_object *id = get(resp, "id");

	ck_assert_msg(id && id->type == MSGPACK_OBJECT_POSITIVE_INTEGER, "response without an id");
	return id->via.u64;
}

/* Reads the next response: a result for |id|; returns the result map. */
static const msgpack_object *expect_result(int fd, uint64_t id, msgpack_unpacked *u)
{
	const msgpack_object *e;

	read_response(fd, u);
	e = get(&u->data, "error");
	ck_assert_msg(e == NULL, "request %llu: error %s: %s", (unsigned long long)id,
	              text_of(get(e, "code")), text_of(get(e, "message")));
	ck_assert_uint_eq(id_of(&u->data), id);
	return get(&u->data, "result");
}

/*
 * Reads the next response: an error with |code| whose message starts with
 * |start|, for request |id| (or with a nil id when |id| is NULL).
 */
static void expect_error(int fd, const uint64_t *id, const char *code, const char *start)
{
	const msgpack_object *e, *rid;
	msgpack_unpacked u;
	const char *message;

	read_response(fd, &u);
	e = get(&u.data, "error");
	ck_assert_msg(e != NULL, "expected an error %s (%s), got a result", code, start);
	message = text_of(get(e, "message"));
	ck_assert_msg(strcmp(text_of(get(e, "code")), code) == 0, "code %s, expected %s: %s",
	              text_of(get(e, "code")), code, message);
	ck_assert_msg(strncmp(message, start, strlen(start)) == 0,
	              "message \"%s\" does not start with \"%s\"", message, start);
	rid = get(&u.data, "id");
	if (id)
		ck_assert_uint_eq(id_of(&u.data), *id);
	else
		ck_assert_int_eq(rid->type, MSGPACK_OBJECT_NIL);
	msgpack_unpacked_destroy(&u);
}

static bool str_is(const msgpack_object *o, const char *s)
{
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

/* The connection was closed by the server: the next read sees its end. */
static void expect_closed(int fd)
{
	msgpack_unpacked u;
	int rc = read_response_within(fd, &u, WAIT_SECONDS);

	if (rc == 1)
		msgpack_unpacked_destroy(&u);
	ck_assert_msg(rc == 0, "the connection stayed open (%d)", rc);
}

/* A request that must succeed with stdout |out| on connection |fd|. */
static void assert_serves(int fd, uint64_t id)
{
	const msgpack_object *r;
	msgpack_unpacked u;
	char want[32];

	snprintf(want, sizeof(want), "ok %llu\n", (unsigned long long)id);
	send_json(fd, "{\"id\": %llu, \"argv\": [\"/bin/echo\", \"ok\", \"%llu\"]}",
	          (unsigned long long)id, (unsigned long long)id);
	r = expect_result(fd, id, &u);
	ck_assert_msg(str_is(get(r, "stdout"), want), "stdout %s", text_of(get(r, "stdout")));
	ck_assert_uint_eq(get(r, "exit_code")->via.u64, 0);
	msgpack_unpacked_destroy(&u);
}

/* ---------------------------------------------------------- processes */

/* A process with |arg| among its arguments, running |prog| (base name), or 0. */
static pid_t find_process(const char *arg, const char *prog)
{
	char path[64], buf[8192];
	struct dirent *e;
	pid_t pid, found = 0;
	ssize_t n;
	DIR *d;
	int fd;

	d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	while (!found && (e = readdir(d)) != NULL) {
		pid = (pid_t)atoi(e->d_name);
		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		/* A zombie has an empty command line, so only live processes match. */
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
		if (prog && strcmp(base, prog) != 0)
			continue;
		for (char *s = buf; s < buf + n; s += strlen(s) + 1) {
			if (strcmp(s, arg) == 0)
				found = pid;
		}
	}
	closedir(d);
	return found;
}

static void wait_for_process(const char *arg)
{
	double deadline = now() + WAIT_SECONDS;

	while (!find_process(arg, "sleep")) {
		ck_assert_msg(now() < deadline, "sleep %s never started", arg);
		usleep(10000);
	}
}

/* How many live processes have |arg| among their arguments. */
static unsigned count_processes(const char *arg)
{
	char path[64], buf[8192];
	struct dirent *e;
	unsigned found = 0;
	ssize_t n;
	DIR *d;
	int fd;

	d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
			if (strcmp(p, arg) == 0) {
				found++;
				break;
			}
		}
	}
	closedir(d);
	return found;
}

static void wait_for_processes(const char *arg, unsigned n)
{
	double deadline = now() + WAIT_SECONDS;

	while (count_processes(arg) < n) {
		ck_assert_msg(now() < deadline, "%u of %u processes with %s started",
		              count_processes(arg), n, arg);
		usleep(10000);
	}
}

/* The children of |parent|, zombies included: a run not yet reaped counts. */
static unsigned count_children(pid_t parent)
{
	char path[300], buf[512], *end;
	struct dirent *e;
	unsigned found = 0;
	ssize_t n;
	DIR *d;
	int fd, ppid;

	d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		if (atoi(e->d_name) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses. */
		end = strrchr(buf, ')');
		if (end && sscanf(end + 1, " %*c %d", &ppid) == 1 && ppid == (int)parent)
			found++;
	}
	closedir(d);
	return found;
}

/* Killing a tree returns before the processes are gone: poll until they are. */
static void assert_gone(const char *arg)
{
	double deadline = now() + WAIT_SECONDS;
	pid_t pid;

	while ((pid = find_process(arg, NULL)) != 0 && now() < deadline)
		usleep(10000);
	ck_assert_msg(pid == 0, "process %d with argument %s survived", (int)pid, arg);
}

/* A sleep of 30.<pid> seconds: long enough, and findable in /proc. */
static const char *sleep_token(void)
{
	static char token[32];

	snprintf(token, sizeof(token), "30.%d", (int)getpid());
	return token;
}

/* Opens the FIFO a `cat FIFO` command waits on and writes to it: that command ends. */
static void release_fifo(const char *fifo)
{
	int fd = open(fifo, O_WRONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "go\n", 3), 3);
	close(fd);
}

/* ----------------------------------------------------------- running */

START_TEST(runs_a_request)
{
	const msgpack_object *r, *res;
	msgpack_unpacked u;
	int fd;

	start_server();
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/sh\", \"-c\", \"echo out; echo err >&2; "
	              "cat; exit 3\"], \"stdin\": \"in\\n\", \"env\": {\"X\": \"y\"}}");
	r = expect_result(fd, 1, &u);
	ck_assert_msg(str_is(get(r, "stdout"), "out\nin\n"), "stdout %s", text_of(get(r, "stdout")));
	ck_assert(str_is(get(r, "stderr"), "err\n"));
	ck_assert_uint_eq(get(r, "exit_code")->via.u64, 3);
	ck_assert_int_eq(get(r, "signal")->type, MSGPACK_OBJECT_NIL);
	ck_assert_int_eq(get(r, "error")->type, MSGPACK_OBJECT_NIL);
	ck_assert(str_is(get(r, "backend"), "passthrough"));
	ck_assert(!get(r, "isolated")->via.boolean);
	/* The keys of the JSON result, as check_cli counts them. */
	ck_assert_uint_eq(r->via.map.size, 13);
	res = get(r, "resources");
	ck_assert_uint_eq(res->via.map.size, 8);
	msgpack_unpacked_destroy(&u);

	send_json(fd, "{\"id\": 2, \"shell\": \"echo $X\", \"env\": {\"X\": \"from env\"}}");
	r = expect_result(fd, 2, &u);
	ck_assert(str_is(get(r, "stdout"), "from env\n"));
	msgpack_unpacked_destroy(&u);
	close(fd);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

/* A relative cwd is taken from the workspace; none means the workspace. */
START_TEST(cwd_is_relative_to_the_workspace)
{
	const char *const opts[] = {"-w", dir, NULL};
	const msgpack_object *r;
	msgpack_unpacked u;
	char want[128];
	int fd;

	ck_assert_int_eq(mkdir(path_in_dir("sub"), 0755), 0);
	start_server_opts(false, opts);
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/pwd\"], \"cwd\": \"sub\"}");
	r = expect_result(fd, 1, &u);
	snprintf(want, sizeof(want), "%s/sub\n", dir);
	ck_assert_msg(str_is(get(r, "stdout"), want), "pwd printed %s", text_of(get(r, "stdout")));
	msgpack_unpacked_destroy(&u);
	send_json(fd, "{\"id\": 2, \"argv\": [\"/bin/pwd\"]}");
	r = expect_result(fd, 2, &u);
	snprintf(want, sizeof(want), "%s\n", dir);
	ck_assert_msg(str_is(get(r, "stdout"), want), "pwd printed %s", text_of(get(r, "stdout")));
	msgpack_unpacked_destroy(&u);
	close(fd);
}
END_TEST

/* An argv[0] that looks like an option is a program name: not found, and
 * said so as "could not start", not as an exit code. */
START_TEST(dash_program_is_literal_and_not_found)
{
	const msgpack_object *r;
	msgpack_unpacked u;
	int fd;

	start_server();
	fd = connect_server();
	send_json(fd, "{\"id\": 5, \"argv\": [\"--help\"]}");
	r = expect_result(fd, 5, &u);
	ck_assert_int_eq(get(r, "exit_code")->type, MSGPACK_OBJECT_NIL);
	ck_assert_int_eq(get(r, "error")->type, MSGPACK_OBJECT_STR);
	msgpack_unpacked_destroy(&u);
	close(fd);
}
END_TEST

/* Responses come in completion order: the second request overtakes the first. */
START_TEST(responses_come_in_completion_order)
{
	const char *fifo = path_in_dir("fifo");
	const msgpack_object *r;
	msgpack_unpacked u;
	int fd;

	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	start_server();
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/cat\", \"%s\"]}", fifo);
	send_json(fd, "{\"id\": 2, \"argv\": [\"/bin/echo\", \"two\"]}");
	r = expect_result(fd, 2, &u);
	ck_assert(str_is(get(r, "stdout"), "two\n"));
	msgpack_unpacked_destroy(&u);
	release_fifo(fifo);
	r = expect_result(fd, 1, &u);
	ck_assert(str_is(get(r, "stdout"), "go\n"));
	msgpack_unpacked_destroy(&u);
	close(fd);
}
END_TEST

START_TEST(an_id_in_flight_is_refused)
{
	const char *fifo = path_in_dir("fifo");
	msgpack_unpacked u;
	uint64_t id = 9;
	int fd;

	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	start_server();
	fd = connect_server();
	send_json(fd, "{\"id\": 9, \"argv\": [\"/bin/cat\", \"%s\"]}", fifo);
	send_json(fd, "{\"id\": 9, \"argv\": [\"/bin/true\"]}");
	expect_error(fd, &id, "bad_request", "id: 9 is already in flight");
	release_fifo(fifo);
	expect_result(fd, 9, &u);
	msgpack_unpacked_destroy(&u);
	/* Once answered, the id is free again. */
	assert_serves(fd, 9);
	close(fd);
}
END_TEST

/* ----------------------------------------------------------- examples */

/* Runs an example client to its end; its output goes to |out_path|. */
static int run_client(const char *const *argv, const char *out_path)
{
	double deadline = now() + 120;
	pid_t pid = fork();
	int ws;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int null = open("/dev/null", O_RDONLY);

		dup2(null, STDIN_FILENO);
		dup2(out, STDOUT_FILENO);
		dup2(out, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(99);
	}
	while (waitpid(pid, &ws, WNOHANG) == 0) {
		if (now() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			ck_abort_msg("%s did not finish: %s", argv[1], read_text(out_path));
		}
		usleep(20000);
	}
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static void assert_client_matched(const char *const *argv)
{
	const char *out = path_in_dir("client-output");
	int status = run_client(argv, out);
	const char *text = read_text(out);

	ck_assert_msg(status == 0, "%s exited %d: %s", argv[1], status, text);
	ck_assert_msg(strstr(text, "100 requests, 100 responses matched") != NULL, "%s printed %s",
	              argv[1], text);
}

START_TEST(python_example_over_stdio)
{
	const char *const argv[] = {PYTHON, PY_CLIENT, "--sbx", SBX_PATH, "--count", "100",
	                            "--", "--backend", "passthrough", NULL};

	assert_client_matched(argv);
}
END_TEST

START_TEST(python_example_over_socket)
{
	const char *const argv[] = {PYTHON, PY_CLIENT, "--socket", sock_path, "--count", "100",
	                            NULL};

	start_server();
	assert_client_matched(argv);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

#if SBX_NODE_TESTS
/* Node comes from PATH, as a user would run it. */
static const char *node_path(void)
{
	static char path[PATH_MAX];
	const char *dirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};

	for (size_t i = 0; i < N_ELEMS(dirs); i++) {
		snprintf(path, sizeof(path), "%s/node", dirs[i]);
		if (access(path, X_OK) == 0)
			return path;
	}
	ck_abort_msg("node is not installed (dev/setup installs it)");
	return NULL;
}

START_TEST(node_example_over_socket)
{
	const char *argv[] = {node_path(), NODE_CLIENT, "--socket", sock_path, "--count", "100",
	                      NULL};

	ck_assert_msg(access(SBX_TOP_SRCDIR "/examples/node/node_modules/@msgpack/msgpack", R_OK) == 0,
	              "run 'npm ci' in examples/node first (dev/setup does)");
	start_server();
	assert_client_matched(argv);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

START_TEST(node_example_over_stdio)
{
	const char *argv[] = {node_path(), NODE_CLIENT, "--sbx", SBX_PATH, "--count", "100",
	                      "--", "--backend", "passthrough", NULL};

	ck_assert_msg(access(SBX_TOP_SRCDIR "/examples/node/node_modules/@msgpack/msgpack", R_OK) == 0,
	              "run 'npm ci' in examples/node first (dev/setup does)");
	assert_client_matched(argv);
}
END_TEST
#endif

/* --------------------------------------------------------- bad frames */

/*
 * THREATS.md's wire rows that break the frame itself: each gets a bad_frame
 * error with a nil id, and its connection is closed; another connection,
 * open all along, is served before and after.
 */
static const struct {
	const char *name;
	uint8_t bytes[24];
	size_t len;   /* bytes to send, header included */
	const char *start;
} bad_frames[] = {
	{"truncated msgpack", {0, 0, 0, 8, 0x82, 0xa2, 'i', 'd', 0x01, 0xa4, 'a', 'r'}, 12,
	 "a string of 4 bytes at byte 5 runs past the end"},
	{"0xc1", {0, 0, 0, 1, 0xc1}, 5, "byte 0xc1"},
	{"trailing garbage", {0, 0, 0, 6, 0x81, 0xa2, 'i', 'd', 0x01, 0xff}, 10,
	 "1 bytes of trailing garbage"},
	{"map32 of 0xffffffff", {0, 0, 0, 5, 0xdf, 0xff, 0xff, 0xff, 0xff}, 9,
	 "a map of 4294967295 elements"},
	{"str32 of 0xffffffff", {0, 0, 0, 5, 0xdb, 0xff, 0xff, 0xff, 0xff}, 9,
	 "a string of 4294967295 bytes"},
	{"array32 of 0xffffffff in argv",
	 {0, 0, 0, 15, 0x82, 0xa2, 'i', 'd', 0x01, 0xa4, 'a', 'r', 'g', 'v', 0xdd, 0xff, 0xff, 0xff,
	  0xff},
	 19, "an array of 4294967295 elements"},
	{"frame length 0xffffffff", {0xff, 0xff, 0xff, 0xff, 0x80}, 5,
	 "a frame of 4294967295 bytes is larger than the server's --max-frame of 1048576"},
	{"empty frame", {0, 0, 0, 0}, 4, "a frame of 0 bytes is empty"},
	{"extension type", {0, 0, 0, 3, 0xd4, 0x01, 0x00}, 7, "extension type 0xd4"},
};

START_TEST(bad_frame_closes_only_its_connection)
{
	int keep, bad;

	start_server();
	keep = connect_server();
	assert_serves(keep, 1);
	bad = connect_server();
	send_all(bad, bad_frames[_i].bytes, bad_frames[_i].len);
	expect_error(bad, NULL, "bad_frame", bad_frames[_i].start);
	expect_closed(bad);
	close(bad);
	assert_serves(keep, 2);
	bad = connect_server();
	assert_serves(bad, 3);
	close(bad);
	close(keep);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

START_TEST(deep_nesting_is_a_bad_frame)
{
	uint8_t frame[4 + 1001];
	int keep, bad;

	frame[0] = 0;
	frame[1] = 0;
	frame[2] = 1001 >> 8;
	frame[3] = 1001 & 0xff;
	memset(frame + 4, 0x91, 1000);
	frame[4 + 1000] = 0xc0;
	start_server();
	keep = connect_server();
	bad = connect_server();
	send_all(bad, frame, sizeof(frame));
	expect_error(bad, NULL, "bad_frame", "containers nest deeper than 8 levels");
	expect_closed(bad);
	close(bad);
	assert_serves(keep, 1);
	close(keep);
}
END_TEST

START_TEST(max_frame_is_checked_before_reading)
{
	const char *const opts[] = {"--max-frame", "64", NULL};
	char big[200];
	int fd;

	memset(big, 'a', sizeof(big));
	start_server_opts(false, opts);
	fd = connect_server();
	/* The header alone is refused: the body never has to come. */
	send_all(fd, "\x00\x00\x00\x41", 4);
	expect_error(fd, NULL, "bad_frame", "a frame of 65 bytes is larger than the server's "
	                                    "--max-frame of 64");
	expect_closed(fd);
	close(fd);
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"shell\": \"echo %.60s\"}", big);
	expect_error(fd, NULL, "bad_frame", "a frame of");
	close(fd);
	fd = connect_server();
	assert_serves(fd, 2);
	close(fd);
}
END_TEST

/* ------------------------------------------------------- bad requests */

/*
 * The rows whose frame is well-formed but whose request is not: a typed
 * error naming the field, with the request's id when it has one, and the
 * connection goes on.
 */
static const struct {
	const char *json;
	const char *start;
} bad_requests[] = {
	{"{\"id\": 1, \"argv\": 5}", "argv: must be an array of strings, not an integer"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"timeout\": \"5\"}", "timeout: must be a number"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"policy\": {\"memory\": \"1G\"}}",
	 "policy.memory: must be an integer, not a string"},
	{"{\"id\": 1}", "argv: missing"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"bogus\": true}", "bogus: unknown key"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"policy\": {\"nework\": \"none\"}}",
	 "policy.nework: unknown key"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"cwd\": \"\"}", "cwd: is empty"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"cwd\": \"../..\"}", "cwd: may not contain a '..'"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"policy\": {\"writable\": [\"rel/path\"]}}",
	 "policy.writable[0]: must be an absolute path: 'rel/path'"},
	{"{\"id\": 1, \"argv\": [\"/bin/ec\\u0000ho\"]}", "argv[0]: contains a NUL byte"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"env\": {\"A\": \"b\\u0000c\"}}",
	 "env.A: contains a NUL byte"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"cwd\": \"a\\u0000b\"}", "cwd: contains a NUL byte"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"policy\": {\"deny_read\": [\"/x\\u0000y\"]}}",
	 "policy.deny_read[0]: contains a NUL byte"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"policy\": {\"memory\": 0}}",
	 "policy.memory: must be at least 1: 0"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"max_output\": -1}",
	 "max_output: must not be negative: -1"},
	{"{\"id\": 1, \"argv\": [\"/bin/true\"], \"policy\": {\"processes\": 9223372036854775807}}",
	 "policy.processes: 9223372036854775807 is more than 2147483647"},
	{"{\"id\": 1, \"argv\": []}", "argv: is empty"},
};

START_TEST(bad_request_names_the_field_and_keeps_the_connection)
{
	uint64_t id = 1;
	int fd;

	start_server();
	fd = connect_server();
	send_json(fd, "%s", bad_requests[_i].json);
	expect_error(fd, &id, "bad_request", bad_requests[_i].start);
	assert_serves(fd, 2);
	close(fd);
}
END_TEST

/* Duplicate keys and an over-long path, which JSON and the table cannot say. */
START_TEST(duplicate_key_and_long_path)
{
	static const uint8_t dup[] = {0, 0, 0, 17, 0x83, 0xa2, 'i', 'd', 0x04, 0xa2, 'i', 'd', 0x04,
	                              0xa5, 's', 'h'};
	static char long_cwd[PATH_MAX + 8];
	uint64_t id = 4;
	int fd;

	start_server();
	fd = connect_server();
	/* {"id": 4, "id": 4, "shell": "x"} */
	send_all(fd, dup, sizeof(dup));
	send_all(fd, "ell\xa1x", 5);
	expect_error(fd, &id, "bad_request", "id: duplicate key");
	memset(long_cwd, 'd', PATH_MAX + 4);
	long_cwd[PATH_MAX + 4] = '\0';
	send_json(fd, "{\"id\": 4, \"argv\": [\"/bin/true\"], \"cwd\": \"%s\"}", long_cwd);
	expect_error(fd, &id, "bad_request", "cwd: a path of 4100 bytes is longer than 4095");
	assert_serves(fd, 5);
	close(fd);
}
END_TEST

/*
 * Hostile input does not grow the server: after a warm-up, hundreds of bad
 * frames (among them the 5-byte four-billion map and near-1 MiB frames of
 * junk) and bad requests leave its resident memory where it was, give or
 * take what the allocator keeps.
 */
START_TEST(memory_stays_flat_under_bad_input)
{
	static uint8_t junk[4 + 1000000];
	long before, after;
	int keep, fd, i;

	start_server();
	keep = connect_server();
	for (i = 0; i < 20; i++)
		assert_serves(keep, (uint64_t)i);
	junk[1] = 1000000 >> 16;
	junk[2] = (1000000 >> 8) & 0xff;
	junk[3] = 1000000 & 0xff;
	memset(junk + 4, 0xc1, 1000000);
	fd = connect_server();
	send_all(fd, junk, sizeof(junk));
	expect_error(fd, NULL, "bad_frame", "byte 0xc1");
	close(fd);
	before = rss_kib(server_pid);

	for (i = 0; i < 300; i++) {
		fd = connect_server();
		if (i % 30 == 0) {
			send_all(fd, junk, sizeof(junk));
			expect_error(fd, NULL, "bad_frame", "byte 0xc1");
		} else {
			send_all(fd, bad_frames[i % N_ELEMS(bad_frames)].bytes,
			         bad_frames[i % N_ELEMS(bad_frames)].len);
			expect_error(fd, NULL, "bad_frame", bad_frames[i % N_ELEMS(bad_frames)].start);
		}
		close(fd);
		send_json(keep, "%s", bad_requests[i % N_ELEMS(bad_requests)].json);
		expect_error(keep, (const uint64_t[]){1}, "bad_request",
		             bad_requests[i % N_ELEMS(bad_requests)].start);
	}
	assert_serves(keep, 1000);
	after = rss_kib(server_pid);
	/* Under valgrind (SBX_SERVE_UNDER) the figure is valgrind's own. */
	if (!getenv("SBX_SERVE_UNDER"))
		ck_assert_msg(after - before < 8192, "VmRSS grew from %ld to %ld KiB", before, after);
	close(keep);
}
END_TEST

/*
 * The request that held the loop for 26 seconds under bubblewrap, and
 * other clients with it: 16 deny_read paths 1000 components deep inside
 * the workspace, 32 KB in all.  The decoder refuses it, naming the first
 * path, before the sandbox sees it; the connection and others go on.
 */
START_TEST(deep_policy_paths_are_refused)
{
	const char *const opts[] = {"-w", dir, NULL};
	static char path[sizeof(dir) + 16 + 2000];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	uint64_t id = 1;
	int fd, other;

	start_server_opts(false, opts);
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
	msgpack_pack_str_with_body(&pk, "deny_read", 9);
	msgpack_pack_array(&pk, 16);
	for (int i = 0; i < 16; i++) {
		size_t n = (size_t)snprintf(path, sizeof(path), "%s/x%d", dir, i);
		for (int d = 0; d < 1000; d++, n += 2)
			memcpy(path + n, "/a", 3);
		msgpack_pack_str_with_body(&pk, path, n);
	}
	fd = connect_server();
	send_frame(fd, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	expect_error(fd, &id, "bad_request", "policy.deny_read[0]: more than 64 components");
	other = connect_server();
	assert_serves(other, 2);
	assert_serves(fd, 3);
	close(other);
	close(fd);
}
END_TEST

/* ------------------------------------------------------------ policy */

/* A base policy with limits and one writable directory; requests narrowing
 * it run, requests widening it are refused with the field named. */
static void start_limited_server(void)
{
	static char writable[sizeof(dir) + 8];
	const char *opts[] = {"--memory", "256M", "--processes", "50", "--writable", writable,
	                      "--timeout", "30", "--max-output", "1M", NULL};

	snprintf(writable, sizeof(writable), "%s/w", dir);
	ck_assert_int_eq(mkdir(writable, 0755), 0);
	start_server_opts(false, opts);
}

static const struct {
	const char *policy;   /* the request's fields after "id" and "argv" */
	const char *start;
} widenings[] = {
	{"\"policy\": {\"memory\": 1073741824}", "policy.memory: 1073741824 is above the base policy's"},
	{"\"policy\": {\"processes\": 51}", "policy.processes: 51 is above"},
	{"\"policy\": {\"writable\": [\"/etc\"]}", "policy.writable: '/etc' is outside every writable"},
	{"\"policy\": {\"network\": \"full\"}", "policy.network: 'full' is wider"},
	{"\"policy\": {\"memory_strategy\": \"watchdog\"}", "policy.memory_strategy:"},
	{"\"timeout\": 31", "timeout: 31 is longer than the server's 30 seconds"},
	{"\"timeout\": 0", "timeout: 0 (none) is longer than the server's 30 seconds"},
	{"\"max_output\": 1048577", "max_output: 1048577 is more than the server's 1048576"},
};

START_TEST(widening_is_refused_with_the_field)
{
	uint64_t id = 7;
	int fd;

	start_limited_server();
	fd = connect_server();
	send_json(fd, "{\"id\": 7, \"argv\": [\"/bin/true\"], %s}", widenings[_i].policy);
	expect_error(fd, &id, "policy_widened", widenings[_i].start);
	assert_serves(fd, 8);
	close(fd);
}
END_TEST

START_TEST(narrowing_runs)
{
	const msgpack_object *r;
	msgpack_unpacked u;
	int fd;

	start_limited_server();
	ck_assert_int_eq(mkdir(path_in_dir("w/sub"), 0755), 0);
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/echo\", \"narrow\"], \"timeout\": 10,"
	              " \"max_output\": 100, \"policy\": {\"memory\": 134217728, \"processes\": 20,"
	              " \"writable\": [\"%s/w/sub\"], \"deny_read\": [\"%s/secret\"],"
	              " \"network\": \"none\", \"cpus\": 0.5}}",
	          dir, dir);
	r = expect_result(fd, 1, &u);
	ck_assert(str_is(get(r, "stdout"), "narrow\n"));
	ck_assert_uint_eq(get(r, "exit_code")->via.u64, 0);
	msgpack_unpacked_destroy(&u);
	close(fd);
}
END_TEST

/* ------------------------------------------------------------ ending */

/* A client that disconnects mid-run has its run killed and reaped, and its
 * queued request dropped unstarted. */
START_TEST(disconnect_mid_run_leaves_no_process)
{
	const char *const opts[] = {"--max-runs", "1", NULL};
	const char *token = sleep_token();
	char queued[64];
	int fd, other;

	snprintf(queued, sizeof(queued), "31.%d", (int)getpid());
	start_server_opts(false, opts);
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/sleep\", \"%s\"]}", token);
	send_json(fd, "{\"id\": 2, \"argv\": [\"/bin/sleep\", \"%s\"]}", queued);
	wait_for_process(token);
	close(fd);
	assert_gone(token);
	/* The slot is free again, and the queued request never ran. */
	other = connect_server();
	assert_serves(other, 1);
	ck_assert_msg(find_process(queued, NULL) == 0, "the queued request of a gone client ran");
	close(other);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

static const int stop_signals[] = {SIGTERM, SIGINT};

START_TEST(signal_leaves_no_process_and_no_socket)
{
	const char *token = sleep_token();
	struct stat st;
	int fd;

	start_server();
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/sleep\", \"%s\"]}", token);
	wait_for_process(token);
	ck_assert_int_eq(stop_server(stop_signals[_i]), 0);
	assert_gone(token);
	ck_assert_msg(lstat(sock_path, &st) < 0 && errno == ENOENT, "the socket is still there");
	/* The client sees the end of its connection. */
	expect_closed(fd);
	close(fd);
}
END_TEST

/*
 * With --stdio, the client closing stdin is the client going away: the
 * server kills its runs and exits 0.  Sends |n| requests of
 * "sleep 30.<pid>" first; with --max-pending |n| the server has stopped
 * reading stdin by then, and must notice the close all the same.
 */
static void stdio_eof_case(unsigned n, bool at_max_pending)
{
	const char *token = sleep_token();
	char pending[16];
	int in[2], out[2], ws;
	double deadline;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	pid_t pid;

	snprintf(pending, sizeof(pending), "%u", at_max_pending ? n : 32);
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execl(SBX_PATH, SBX_PATH, "serve", "--stdio", "--backend", "passthrough",
		      "--max-pending", pending, (char *)NULL);
		_exit(99);
	}
	server_pid = pid;
	atexit(stop_server_at_exit);
	close(in[0]);
	close(out[1]);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	for (unsigned i = 0; i < n; i++) {
		msgpack_sbuffer_clear(&sb);
		msgpack_pack_map(&pk, 2);
		msgpack_pack_str_with_body(&pk, "id", 2);
		msgpack_pack_uint32(&pk, i);
		msgpack_pack_str_with_body(&pk, "argv", 4);
		msgpack_pack_array(&pk, 2);
		msgpack_pack_str_with_body(&pk, "/bin/sleep", 10);
		msgpack_pack_str_with_body(&pk, token, strlen(token));
		uint8_t h[4] = {0, 0, 0, (uint8_t)sb.size};
		ck_assert_int_eq(write(in[1], h, 4), 4);
		ck_assert_int_eq(write(in[1], sb.data, sb.size), (ssize_t)sb.size);
	}
	msgpack_sbuffer_destroy(&sb);
	wait_for_processes(token, n);
	close(in[1]);
	deadline = now() + WAIT_SECONDS;
	while (waitpid(pid, &ws, WNOHANG) == 0) {
		ck_assert_msg(now() < deadline, "sbx serve --stdio did not exit at end of input");
		usleep(10000);
	}
	server_pid = 0;
	ck_assert(WIFEXITED(ws));
	ck_assert_int_eq(WEXITSTATUS(ws), 0);
	assert_gone(token);
	close(out[0]);
}

START_TEST(stdio_eof_ends_the_server_and_its_runs)
{
	stdio_eof_case(1, false);
}
END_TEST

START_TEST(stdio_eof_at_max_pending_ends_the_server)
{
	stdio_eof_case(4, true);
}
END_TEST

/*
 * A client that leaves with exactly --max-pending requests running is no
 * longer read from, yet its leaving is noticed: its runs are killed and
 * reaped, and the server has no child left.
 */
START_TEST(disconnect_at_max_pending_leaves_no_process)
{
	const char *const opts[] = {"--max-pending", "4", NULL};
	const char *token = sleep_token();
	double deadline;
	int fd, other;

	start_server_opts(false, opts);
	fd = connect_server();
	for (int i = 0; i < 4; i++)
		send_json(fd, "{\"id\": %d, \"argv\": [\"/bin/sleep\", \"%s\"]}", i, token);
	wait_for_processes(token, 4);
	close(fd);
	deadline = now() + WAIT_SECONDS;
	while (count_children(server_pid) > 0) {
		ck_assert_msg(now() < deadline, "%u children of the server outlived their client",
		              count_children(server_pid));
		usleep(10000);
	}
	assert_gone(token);
	other = connect_server();
	assert_serves(other, 1);
	close(other);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

/* ---------------------------------------------------- caps and queues */

/*
 * --max-runs 1: the second request waits for the first.  The first blocks
 * on a FIFO; nothing may come back until the test opens it, and then the
 * first answer comes before the second.
 */
START_TEST(max_runs_queues_the_rest)
{
	const char *const opts[] = {"--max-runs", "1", NULL};
	const char *fifo = path_in_dir("fifo");
	msgpack_unpacked u;
	int fd;

	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	start_server_opts(false, opts);
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/cat\", \"%s\"]}", fifo);
	send_json(fd, "{\"id\": 2, \"argv\": [\"/bin/echo\", \"two\"]}");
	ck_assert_msg(read_response_within(fd, &u, 1.0) == -1,
	              "a response came while the only run slot was taken");
	release_fifo(fifo);
	expect_result(fd, 1, &u);
	msgpack_unpacked_destroy(&u);
	expect_result(fd, 2, &u);
	msgpack_unpacked_destroy(&u);
	close(fd);
}
END_TEST

/*
 * --max-pending 1: with one request unanswered the connection is not read,
 * so even a malformed frame behind it waits; other connections are served
 * meanwhile.
 */
START_TEST(max_pending_stops_reading_the_connection)
{
	const char *const opts[] = {"--max-pending", "1", NULL};
	const char *fifo = path_in_dir("fifo");
	msgpack_unpacked u;
	int fd, other;

	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	start_server_opts(false, opts);
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"argv\": [\"/bin/cat\", \"%s\"]}", fifo);
	send_all(fd, "\x00\x00\x00\x01\xc1", 5);
	ck_assert_msg(read_response_within(fd, &u, 1.0) == -1,
	              "the server read past --max-pending requests");
	other = connect_server();
	assert_serves(other, 1);
	close(other);
	release_fifo(fifo);
	expect_result(fd, 1, &u);
	msgpack_unpacked_destroy(&u);
	expect_error(fd, NULL, "bad_frame", "byte 0xc1");
	expect_closed(fd);
	close(fd);
}
END_TEST

/* Bytes waiting to be read on |fd|. */
static int unread_bytes(int fd)
{
	int n = 0;

	ck_assert_int_eq(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

/*
 * A client that sends --max-pending (32) requests whose results are as
 * large as the server allows -- 1 MiB of 0xff on stdout and on stderr, 6 MiB
 * once each byte is U+FFFD -- and never reads.  Its unsent responses plus
 * the largest its requests in flight could still make stay within the
 * output budget (32 MiB) plus one result (6 MiB), where before every result
 * was queued: 200 MiB for this client.  The server's VmRSS may grow by that
 * bound plus 24 MiB for what is not a response: the output buffers of the
 * two runs in flight (--max-runs 2), a result being converted (its JSON and
 * msgpack copies), and what the allocator (or AddressSanitizer) keeps.
 * Another client is served meanwhile.
 */
START_TEST(a_client_that_does_not_read_stays_bounded)
{
	const char *const opts[] = {"--send-timeout", "0", "--max-runs", "2", NULL};
	const long bound_kib = (32 + 6 + 24) * 1024;
	const int rcvbuf = 4096;
	double deadline = now() + WAIT_SECONDS;
	long before, peak = 0, rss;
	int hog, other, i;

	start_server_opts(false, opts);
	other = connect_server();
	for (i = 0; i < 10; i++)
		assert_serves(other, (uint64_t)i);
	before = rss_kib(server_pid);
	hog = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(hog, 0);
	ck_assert_int_eq(setsockopt(hog, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	{
		struct sockaddr_un addr = {.sun_family = AF_UNIX};
		snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock_path);
		ck_assert_int_eq(connect(hog, (struct sockaddr *)&addr, sizeof(addr)), 0);
	}
	for (i = 0; i < 32; i++)
		send_json(hog, "{\"id\": %d, \"shell\": \"head -c 1048576 /dev/zero | "
		               "tr '\\\\000' '\\\\377' | tee /dev/stderr\"}", i);
	/* Settled: a response waits for the hog, and no run is left. */
	while (unread_bytes(hog) == 0 || count_children(server_pid) > 0) {
		rss = rss_kib(server_pid);
		peak = rss > peak ? rss : peak;
		ck_assert_msg(now() < deadline, "the hog's runs never settled");
		usleep(10000);
	}
	assert_serves(other, 100);
	rss = rss_kib(server_pid);
	peak = rss > peak ? rss : peak;
	/* Under valgrind (SBX_SERVE_UNDER) the figure is valgrind's own. */
	if (!getenv("SBX_SERVE_UNDER"))
		ck_assert_msg(peak - before < bound_kib,
		              "VmRSS grew by %ld KiB (from %ld), more than %ld, for a client that "
		              "does not read", peak - before, before, bound_kib);
	close(hog);
	close(other);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

/* Reads |fd| to its end, which must come within the deadline. */
static void drain_to_end(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	double deadline = now() + WAIT_SECONDS;
	static char buf[65536];
	ssize_t n;

	for (;;) {
		int ms = (int)((deadline - now()) * 1000);
		ck_assert_msg(ms > 0 && poll(&pfd, 1, ms) == 1, "the connection stayed open");
		n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return;
		ck_assert_msg(n > 0 || errno == EINTR, "read: %s", strerror(errno));
	}
}

/*
 * --send-timeout: a client that takes none of its responses for that long
 * (here its first result, larger than the socket's buffer) is closed and
 * its runs are killed; other clients go on.
 */
START_TEST(send_timeout_closes_a_client_that_does_not_read)
{
	const char *const opts[] = {"--send-timeout", "1", NULL};
	const char *token = sleep_token();
	int hog, other;

	start_server_opts(false, opts);
	hog = connect_server();
	send_json(hog, "{\"id\": 1, \"shell\": \"yes | head -c 4194304\"}");
	send_json(hog, "{\"id\": 2, \"argv\": [\"/bin/sleep\", \"%s\"]}", token);
	wait_for_process(token);
	assert_gone(token);
	drain_to_end(hog);
	close(hog);
	other = connect_server();
	assert_serves(other, 1);
	close(other);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

/* ------------------------------------------------------------ socket */

START_TEST(socket_is_0600)
{
	struct stat st;

	start_server();
	ck_assert_int_eq(lstat(sock_path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0600);
}
END_TEST

START_TEST(stale_socket_is_replaced)
{
	struct sockaddr_un addr;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	/* A socket file nobody listens on, as a killed server leaves it. */
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock_path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd);
	start_server();
	fd = connect_server();
	assert_serves(fd, 1);
	close(fd);
}
END_TEST

/* Runs `sbx serve ARGS...` that must fail at once; returns its stderr. */
static const char *failing_serve(const char *const *argv)
{
	double deadline = now() + WAIT_SECONDS;
	const char *err = path_in_dir("fail-stderr");
	pid_t pid = spawn(argv, err);
	int ws;

	while (waitpid(pid, &ws, WNOHANG) == 0) {
		if (now() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			ck_abort_msg("%s %s did not fail", argv[1], argv[2]);
		}
		usleep(10000);
	}
	ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 125, "exit status %d", ws);
	return read_text(err);
}

START_TEST(live_socket_is_an_error)
{
	char listen[sizeof(sock_path) + 8];
	const char *argv[] = {SBX_PATH, "serve", "--listen", listen, "--backend", "passthrough",
	                      NULL};
	const char *err;
	int fd;

	snprintf(listen, sizeof(listen), "unix:%s", sock_path);
	start_server();
	err = failing_serve(argv);
	ck_assert_msg(strstr(err, "is the socket of a server that is running"), "stderr: %s", err);
	/* The first server keeps its socket and serves on. */
	fd = connect_server();
	assert_serves(fd, 1);
	close(fd);
}
END_TEST

START_TEST(bad_options_are_refused)
{
	char listen[sizeof(sock_path) + 8];
	const char *not_sock = path_in_dir("file");
	char listen_file[sizeof(dir) + 64];
	const char *none[] = {SBX_PATH, "serve", "--backend", "passthrough", NULL};
	const char *both[] = {SBX_PATH, "serve", "--stdio", "--listen", listen, NULL};
	const char *operand[] = {SBX_PATH, "serve", "--stdio", "--", "/bin/true", NULL};
	const char *json[] = {SBX_PATH, "serve", "--stdio", "--json", NULL};
	const char *tcp[] = {SBX_PATH, "serve", "--listen", "tcp:1234", NULL};
	const char *frame[] = {SBX_PATH, "serve", "--stdio", "--max-frame", "0", NULL};
	const char *runs[] = {SBX_PATH, "serve", "--stdio", "--max-runs", "-1", NULL};
	const char *send[] = {SBX_PATH, "serve", "--stdio", "--send-timeout", "1s", NULL};
	const char *file[] = {SBX_PATH, "serve", "--listen", listen_file, NULL};
	const char *err;

	snprintf(listen, sizeof(listen), "unix:%s", sock_path);
	snprintf(listen_file, sizeof(listen_file), "unix:%s", not_sock);
	close(open(not_sock, O_WRONLY | O_CREAT, 0600));
	err = failing_serve(none);
	ck_assert_msg(strstr(err, "give exactly one of --stdio and --listen"), "%s", err);
	err = failing_serve(both);
	ck_assert_msg(strstr(err, "give exactly one of --stdio and --listen"), "%s", err);
	err = failing_serve(operand);
	ck_assert_msg(strstr(err, "takes no operands: '/bin/true'"), "%s", err);
	err = failing_serve(json);
	ck_assert_msg(strstr(err, "options of 'sbx run'"), "%s", err);
	err = failing_serve(tcp);
	ck_assert_msg(strstr(err, "--listen 'tcp:1234' is not unix:PATH"), "%s", err);
	err = failing_serve(frame);
	ck_assert_msg(strstr(err, "'0'"), "%s", err);
	err = failing_serve(runs);
	ck_assert_msg(strstr(err, "--max-runs '-1'"), "%s", err);
	err = failing_serve(send);
	ck_assert_msg(strstr(err, "--send-timeout '1s' is not a whole number from 0 to 1000000"),
	              "%s", err);
	err = failing_serve(file);
	ck_assert_msg(strstr(err, "exists and is not a socket"), "%s", err);
	ck_assert_int_eq(access(not_sock, F_OK), 0);
}
END_TEST

/* ------------------------------------------------------------- bwrap */

/*
 * The default backend: runs are isolated, and a request's narrower writable
 * list is what the sandbox enforces.  (The session's workspace and scratch
 * directory stay writable for every run, so the narrowing is tried on a
 * base writable directory outside them.)
 */
START_TEST(bwrap_enforces_a_narrowed_policy)
{
	static char ext[sizeof(dir) + 8];
	const char *const opts[] = {"--writable", ext, NULL};
	const msgpack_object *r;
	msgpack_unpacked u;
	int fd;

	snprintf(ext, sizeof(ext), "%s/ext", dir);
	ck_assert_int_eq(mkdir(ext, 0755), 0);
	ck_assert_int_eq(mkdir(path_in_dir("ext/a"), 0755), 0);
	start_server_opts(true, opts);
	fd = connect_server();
	send_json(fd, "{\"id\": 1, \"shell\": \"touch %s/b && echo wrote\"}", ext);
	r = expect_result(fd, 1, &u);
	ck_assert_msg(get(r, "isolated")->via.boolean, "backend %s", text_of(get(r, "backend")));
	ck_assert(str_is(get(r, "backend"), "bwrap"));
	ck_assert_msg(str_is(get(r, "stdout"), "wrote\n"), "stderr %s", text_of(get(r, "stderr")));
	msgpack_unpacked_destroy(&u);
	ck_assert_int_eq(access(path_in_dir("ext/b"), F_OK), 0);

	send_json(fd, "{\"id\": 2, \"shell\": \"touch %s/c\", \"policy\": {\"writable\": [\"%s/a\"]}}",
	          ext, ext);
	/* Inside, /tmp is a tmpfs of the sandbox's own, so the write may seem to
	 * work there; what counts is that the host's directory is unchanged. */
	expect_result(fd, 2, &u);
	msgpack_unpacked_destroy(&u);
	ck_assert_msg(access(path_in_dir("ext/c"), F_OK) != 0,
	              "a write outside the narrowed writable path reached the host");

	send_json(fd, "{\"id\": 3, \"shell\": \"touch %s/a/d\", \"policy\": {\"writable\": [\"%s/a\"]}}",
	          ext, ext);
	r = expect_result(fd, 3, &u);
	ck_assert_msg(get(r, "exit_code")->via.u64 == 0, "stderr %s", text_of(get(r, "stderr")));
	msgpack_unpacked_destroy(&u);
	ck_assert_int_eq(access(path_in_dir("ext/a/d"), F_OK), 0);
	close(fd);
	ck_assert_int_eq(stop_server(SIGTERM), 0);
}
END_TEST

static Suite *serve_suite(void)
{
	Suite *s = suite_create("serve");
	TCase *tc;

	tc = tcase_create("running");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, runs_a_request);
	tcase_add_test(tc, cwd_is_relative_to_the_workspace);
	tcase_add_test(tc, dash_program_is_literal_and_not_found);
	tcase_add_test(tc, responses_come_in_completion_order);
	tcase_add_test(tc, an_id_in_flight_is_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("examples");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, python_example_over_stdio);
	tcase_add_test(tc, python_example_over_socket);
#if SBX_NODE_TESTS
	tcase_add_test(tc, node_example_over_socket);
	tcase_add_test(tc, node_example_over_stdio);
#endif
	suite_add_tcase(s, tc);

	tc = tcase_create("bad_input");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, bad_frame_closes_only_its_connection, 0, N_ELEMS(bad_frames));
	tcase_add_test(tc, deep_nesting_is_a_bad_frame);
	tcase_add_test(tc, max_frame_is_checked_before_reading);
	tcase_add_loop_test(tc, bad_request_names_the_field_and_keeps_the_connection, 0,
	                    N_ELEMS(bad_requests));
	tcase_add_test(tc, duplicate_key_and_long_path);
	tcase_add_test(tc, memory_stays_flat_under_bad_input);
	tcase_add_test(tc, deep_policy_paths_are_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("policy");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, widening_is_refused_with_the_field, 0, N_ELEMS(widenings));
	tcase_add_test(tc, narrowing_runs);
	suite_add_tcase(s, tc);

	tc = tcase_create("ending");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, disconnect_mid_run_leaves_no_process);
	tcase_add_loop_test(tc, signal_leaves_no_process_and_no_socket, 0, N_ELEMS(stop_signals));
	tcase_add_test(tc, stdio_eof_ends_the_server_and_its_runs);
	tcase_add_test(tc, stdio_eof_at_max_pending_ends_the_server);
	tcase_add_test(tc, disconnect_at_max_pending_leaves_no_process);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, max_runs_queues_the_rest);
	tcase_add_test(tc, max_pending_stops_reading_the_connection);
	tcase_add_test(tc, a_client_that_does_not_read_stays_bounded);
	tcase_add_test(tc, send_timeout_closes_a_client_that_does_not_read);
	suite_add_tcase(s, tc);

	tc = tcase_create("socket");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, socket_is_0600);
	tcase_add_test(tc, stale_socket_is_replaced);
	tcase_add_test(tc, live_socket_is_an_error);
	tcase_add_test(tc, bad_options_are_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("bwrap");
	tcase_add_unchecked_fixture(tc, make_base_dir, remove_base_dir);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, bwrap_enforces_a_narrowed_policy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(serve_suite());
	const char *asan = getenv("ASAN_OPTIONS");
	char options[1024];
	int failures;

	/* Under AddressSanitizer freed memory waits in a quarantine that would
	 * count as growth in memory_stays_flat_under_bad_input; keep it small
	 * for the servers the tests start (other builds ignore the variable). */
	snprintf(options, sizeof(options), "%s%squarantine_size_mb=8", asan ? asan : "",
	         asan && *asan ? ":" : "");
	setenv("ASAN_OPTIONS", options, 1);
	srunner_run_all(sr, CK_ENV);
	failures = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failures ? 1 : 0;
}
