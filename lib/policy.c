/* policy.c -- what a run may do, validated as it is set. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * The caller's variables a run sees unless the policy adds more.  Short on
 * purpose: a token in the caller's environment must not reach a command that
 * did not ask for it.
 */
static const char *const default_env_allow[] = {
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ",
	"LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES",
	"LC_NUMERIC", "LC_TIME", "LC_MONETARY",
};

/* PATH for a run whose environment has none. */
static const char default_path[] = "PATH=/usr/local/bin:/usr/bin:/bin";

sbx_policy *sbx_policy_new(void)
{
	sbx_policy *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->network = SBX_NETWORK_NONE;
	p->protect_defaults = true;
	p->memory_strategy = SBX_MEMORY_AUTO;
	for (size_t i = 0; i < SBX__ARRAY_LEN(default_env_allow); i++) {
		if (sbx__strv_push(&p->env_allow, default_env_allow[i]) < 0) {
			sbx_policy_free(p);
			return NULL;
		}
	}
	return p;
}

void sbx_policy_free(sbx_policy *p)
{
	if (!p)
		return;
	sbx__strv_free(&p->writable);
	sbx__strv_free(&p->deny_write);
	sbx__strv_free(&p->deny_read);
	sbx__strv_free(&p->env_allow);
	sbx__strv_free(&p->env_set);
	free(p);
}

int sbx__policy_copy(sbx_policy **out, const sbx_policy *src)
{
	sbx_policy *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	*p = *src;
	p->writable = p->deny_write = p->deny_read = p->env_allow = p->env_set = (sbx__strv){0};
	if (sbx__strv_copy(&p->writable, &src->writable) < 0 ||
	    sbx__strv_copy(&p->deny_write, &src->deny_write) < 0 ||
	    sbx__strv_copy(&p->deny_read, &src->deny_read) < 0 ||
	    sbx__strv_copy(&p->env_allow, &src->env_allow) < 0 ||
	    sbx__strv_copy(&p->env_set, &src->env_set) < 0) {
		sbx_policy_free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

bool sbx__policy_wants(const sbx_policy *p, enum sbx_limit l)
{
	switch (l) {
	case SBX_LIMIT_MEMORY: return p->memory != 0;
	case SBX_LIMIT_CPUS: return p->cpus != 0;
	case SBX_LIMIT_CPU_SECONDS: return p->cpu_seconds != 0;
	case SBX_LIMIT_PROCESSES: return p->processes != 0;
	case SBX_LIMIT_FILE_SIZE: return p->file_size != 0;
	case SBX_LIMIT_OPEN_FILES: return p->open_files != 0;
	case SBX_LIMIT_CORE_DUMPS: return true;
	case SBX_LIMIT_COUNT: break;
	}
	return false;
}

/* ------------------------------------------------------------------ paths */

/*
 * Checks and normalises a policy path into |out| (PATH_MAX bytes): "~/" is
 * expanded, repeated and trailing slashes go, and "." and ".." components are
 * refused rather than resolved, so a path means what it says.
 */
static int normalise_path(const char *what, const char *path, char *out, sbx_error *err)
{
	if (!path)
		return sbx__error(err, -EINVAL, "%s path is missing", what);
	if (path[0] == '\0')
		return sbx__error(err, -EINVAL, "%s path is empty", what);
	if (strnlen(path, PATH_MAX) >= PATH_MAX)
		return sbx__error(err, -ENAMETOOLONG, "%s path is longer than %d bytes: '%.64s...'",
		                  what, PATH_MAX - 1, path);

	const char *home = "";
	const char *rest = path;
	if (path[0] == '~' && (path[1] == '/' || path[1] == '\0')) {
		home = getenv("HOME");
		if (!home || home[0] != '/')
			return sbx__error(err, -EINVAL,
			                  "%s path '%s' starts with '~' but HOME is not an absolute path",
			                  what, path);
		rest = path + 1;
	} else if (path[0] != '/') {
		return sbx__error(err, -EINVAL, "%s path must be absolute: '%s'", what, path);
	}

	char joined[PATH_MAX];
	size_t n = strlen(home) + strlen(rest);
	if (n >= sizeof joined)
		return sbx__error(err, -ENAMETOOLONG, "%s path is longer than %d bytes once '~' is expanded: '%s'",
		                  what, PATH_MAX - 1, path);
	strcpy(joined, home);
	strcat(joined, rest);

	/* Copy component by component. */
	size_t len = 0;
	for (const char *c = joined; *c;) {
		while (*c == '/')
			c++;
		if (!*c)
			break;
		size_t clen = strcspn(c, "/");
		if ((clen == 1 && c[0] == '.') || (clen == 2 && c[0] == '.' && c[1] == '.'))
			return sbx__error(err, -EINVAL,
			                  "%s path may not contain '.' or '..' components: '%s'", what, path);
		out[len++] = '/';
		memcpy(out + len, c, clen);
		len += clen;
		c += clen;
	}
	if (len == 0)
		out[len++] = '/';
	out[len] = '\0';
	return 0;
}

static int add_path(sbx__strv *list, const char *what, const char *path,
                    sbx_error *err)
{
	char norm[PATH_MAX];
	int rc = normalise_path(what, path, norm, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < list->n; i++)
		if (strcmp(list->v[i], norm) == 0)
			return 0;
	if (sbx__strv_push(list, norm) < 0)
		return sbx__error(err, -ENOMEM, "out of memory adding %s path '%s'", what, path);
	return 0;
}

int sbx_policy_add_writable(sbx_policy *p, const char *path, sbx_error *err)
{
	return add_path(&p->writable, "writable", path, err);
}

int sbx_policy_add_deny_write(sbx_policy *p, const char *path, sbx_error *err)
{
	return add_path(&p->deny_write, "deny-write", path, err);
}

int sbx_policy_add_deny_read(sbx_policy *p, const char *path, sbx_error *err)
{
	return add_path(&p->deny_read, "deny-read", path, err);
}

int sbx_policy_set_network(sbx_policy *p, enum sbx_network mode, sbx_error *err)
{
	if (mode != SBX_NETWORK_NONE && mode != SBX_NETWORK_FULL)
		return sbx__error(err, -EINVAL, "network mode %d is neither none nor full", (int)mode);
	p->network = mode;
	return 0;
}

int sbx_policy_set_protect_defaults(sbx_policy *p, bool on)
{
	p->protect_defaults = on;
	return 0;
}

/* --------------------------------------------------------------- environment */

/* Length of the name in "NAME=VALUE", or 0 when it is not a valid name. */
static size_t env_name_len(const char *s, bool want_value)
{
	size_t n = 0;
	while (s[n] && s[n] != '=') {
		char c = s[n];
		bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		          (n > 0 && c >= '0' && c <= '9');
		if (!ok)
			return 0;
		n++;
	}
	if (want_value != (s[n] == '='))
		return 0;
	return n;
}

int sbx_policy_allow_env(sbx_policy *p, const char *name, sbx_error *err)
{
	if (!name || env_name_len(name, false) == 0)
		return sbx__error(err, -EINVAL, "not an environment variable name: '%s'",
		                  name ? name : "(null)");
	for (size_t i = 0; i < p->env_allow.n; i++)
		if (strcmp(p->env_allow.v[i], name) == 0)
			return 0;
	if (sbx__strv_push(&p->env_allow, name) < 0)
		return sbx__error(err, -ENOMEM, "out of memory");
	return 0;
}

/* Replaces the entry of the same name in |list|, or appends. */
static int env_put(sbx__strv *list, const char *name_value)
{
	size_t n = strcspn(name_value, "=");
	for (size_t i = 0; i < list->n; i++) {
		if (strncmp(list->v[i], name_value, n + 1) == 0) {
			char *copy = strdup(name_value);
			if (!copy)
				return -ENOMEM;
			free(list->v[i]);
			list->v[i] = copy;
			return 0;
		}
	}
	return sbx__strv_push(list, name_value);
}

int sbx_policy_set_env(sbx_policy *p, const char *name_value, sbx_error *err)
{
	if (!name_value || env_name_len(name_value, true) == 0)
		return sbx__error(err, -EINVAL,
		                  "environment entry must look like NAME=VALUE: '%s'",
		                  name_value ? name_value : "(null)");
	if (env_put(&p->env_set, name_value) < 0)
		return sbx__error(err, -ENOMEM, "out of memory");
	return 0;
}

int sbx__env_build(const sbx_policy *p, const char *const *extra, sbx__strv *out)
{
	*out = (sbx__strv){0};
	int rc = 0;
	bool have_path = false;
	for (size_t i = 0; rc == 0 && i < p->env_allow.n; i++) {
		const char *name = p->env_allow.v[i];
		const char *value = getenv(name);
		if (!value)
			continue;
		size_t n = strlen(name), v = strlen(value);
		char *entry = malloc(n + v + 2);
		if (!entry) {
			rc = -ENOMEM;
			break;
		}
		memcpy(entry, name, n);
		entry[n] = '=';
		memcpy(entry + n + 1, value, v + 1);
		rc = env_put(out, entry);
		free(entry);
	}
	for (size_t i = 0; rc == 0 && i < p->env_set.n; i++)
		rc = env_put(out, p->env_set.v[i]);
	for (size_t i = 0; rc == 0 && extra && extra[i]; i++)
		rc = env_put(out, extra[i]);
	for (size_t i = 0; rc == 0 && i < out->n; i++)
		if (strncmp(out->v[i], "PATH=", 5) == 0)
			have_path = true;
	if (rc == 0 && !have_path)
		rc = sbx__strv_push(out, default_path);
	if (rc < 0)
		sbx__strv_free(out);
	return rc;
}

/* ------------------------------------------------------------------ limits */

static int positive(uint64_t v, const char *what, sbx_error *err)
{
	if (v == 0)
		return sbx__error(err, -EINVAL, "%s must be more than zero: '0'", what);
	return 0;
}

int sbx_policy_set_memory(sbx_policy *p, uint64_t bytes, sbx_error *err)
{
	int rc = positive(bytes, "memory", err);
	if (rc == 0)
		p->memory = bytes;
	return rc;
}

int sbx_policy_set_cpus(sbx_policy *p, double cores, sbx_error *err)
{
	/* The kernel's smallest quota is 1 ms in every 100 ms. */
	if (!(cores >= 0.01) || !isfinite(cores) || cores > 4096)
		return sbx__error(err, -EINVAL,
		                  "cpus must be a number of cores from 0.01 up, such as 0.5: '%g'", cores);
	p->cpus = cores;
	return 0;
}

int sbx_policy_set_cpu_seconds(sbx_policy *p, uint64_t seconds, sbx_error *err)
{
	int rc = positive(seconds, "cpu-seconds", err);
	if (rc == 0)
		p->cpu_seconds = seconds;
	return rc;
}

int sbx_policy_set_processes(sbx_policy *p, uint64_t count, sbx_error *err)
{
	int rc = positive(count, "processes", err);
	if (rc == 0)
		p->processes = count;
	return rc;
}

int sbx_policy_set_file_size(sbx_policy *p, uint64_t bytes, sbx_error *err)
{
	int rc = positive(bytes, "max-file-size", err);
	if (rc == 0)
		p->file_size = bytes;
	return rc;
}

int sbx_policy_set_open_files(sbx_policy *p, uint64_t count, sbx_error *err)
{
	int rc = positive(count, "open-files", err);
	if (rc == 0)
		p->open_files = count;
	return rc;
}

int sbx_policy_set_core_dumps(sbx_policy *p, bool allowed)
{
	p->core_dumps = allowed;
	return 0;
}

int sbx_policy_set_memory_strategy(sbx_policy *p, enum sbx_memory_strategy s, sbx_error *err)
{
	if (s < SBX_MEMORY_AUTO || s > SBX_MEMORY_NONE)
		return sbx__error(err, -EINVAL, "memory strategy %d is not auto, kernel, watchdog or none",
		                  (int)s);
	p->memory_strategy = s;
	return 0;
}

/* ------------------------------------------------------------- narrowing */

sbx_policy *sbx_policy_copy(const sbx_policy *p)
{
	sbx_policy *copy = NULL;
	return p && sbx__policy_copy(&copy, p) == 0 ? copy : NULL;
}

void sbx_policy_clear_writable(sbx_policy *p)
{
	sbx__strv_free(&p->writable);
}

static bool path_within(const char *path, const char *root)
{
	size_t n = strlen(root);
	if (strcmp(root, "/") == 0)
		return true;
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool strv_has(const sbx__strv *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++) {
		if (strcmp(sv->v[i], s) == 0)
			return true;
	}
	return false;
}

/* A limit of 0 is none, which is the widest. */
static int limit_narrows(uint64_t base, uint64_t p, const char *what, sbx_error *err)
{
	if (base != 0 && (p == 0 || p > base))
		return sbx__error(err, -EPERM, "%s: %" PRIu64 " is above the base policy's %" PRIu64,
		                  what, p, base);
	return 0;
}

int sbx_policy_check_narrows(const sbx_policy *base, const sbx_policy *p, sbx_error *err)
{
	size_t i, j;
	int rc;

	for (i = 0; i < p->writable.n; i++) {
		for (j = 0; j < base->writable.n; j++) {
			if (path_within(p->writable.v[i], base->writable.v[j]))
				break;
		}
		if (j == base->writable.n)
			return sbx__error(err, -EPERM, "writable: '%s' is outside every writable path of "
			                  "the base policy", p->writable.v[i]);
	}
	for (i = 0; i < base->deny_write.n; i++) {
		if (!strv_has(&p->deny_write, base->deny_write.v[i]))
			return sbx__error(err, -EPERM, "deny_write: '%s' of the base policy is missing",
			                  base->deny_write.v[i]);
	}
	for (i = 0; i < base->deny_read.n; i++) {
		if (!strv_has(&p->deny_read, base->deny_read.v[i]))
			return sbx__error(err, -EPERM, "deny_read: '%s' of the base policy is missing",
			                  base->deny_read.v[i]);
	}
	for (i = 0; i < p->env_allow.n; i++) {
		if (!strv_has(&base->env_allow, p->env_allow.v[i]))
			return sbx__error(err, -EPERM, "env: the base policy does not let '%s' through",
			                  p->env_allow.v[i]);
	}
	if (base->network == SBX_NETWORK_NONE && p->network != SBX_NETWORK_NONE)
		return sbx__error(err, -EPERM, "network: 'full' is wider than the base policy's 'none'");
	if (base->protect_defaults && !p->protect_defaults)
		return sbx__error(err, -EPERM, "protect_defaults: the base policy keeps them on");
	if (!base->core_dumps && p->core_dumps)
		return sbx__error(err, -EPERM, "core_dumps: the base policy does not allow them");
	/* Not even "kernel": where no cgroup exists it means a per-process
	 * RLIMIT_AS, which a forking command multiplies, in place of the
	 * watchdog's limit on the whole tree. */
	if (p->memory_strategy != base->memory_strategy)
		return sbx__error(err, -EPERM, "memory_strategy: only the base policy's may be asked for");
	if ((rc = limit_narrows(base->memory, p->memory, "memory", err)) < 0 ||
	    (rc = limit_narrows(base->cpu_seconds, p->cpu_seconds, "cpu_seconds", err)) < 0 ||
	    (rc = limit_narrows(base->processes, p->processes, "processes", err)) < 0 ||
	    (rc = limit_narrows(base->file_size, p->file_size, "file_size", err)) < 0 ||
	    (rc = limit_narrows(base->open_files, p->open_files, "open_files", err)) < 0)
		return rc;
	if (base->cpus != 0 && (p->cpus == 0 || p->cpus > base->cpus))
		return sbx__error(err, -EPERM, "cpus: %g is above the base policy's %g", p->cpus, base->cpus);
	return 0;
}
