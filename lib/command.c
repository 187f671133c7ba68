/*
 * command.c -- a command as the caller gave it, made ready to spawn: checked,
 * its argv and environment built, its program found; and sbx_sandbox_wrap(),
 * which gives the same command line to callers who spawn it themselves.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

int sbx__command_check(const sbx_run_options *o, sbx_error *err)
{
	if ((o->argv != NULL) == (o->shell != NULL))
		return sbx__error(err, -EINVAL, "a run takes either argv or a shell command, not %s",
		                  o->argv ? "both" : "neither");
	if (o->argv && (!o->argv[0] || o->argv[0][0] == '\0'))
		return sbx__error(err, -EINVAL, "argv is empty: a run needs a program to start");
	if (o->cwd && o->cwd[0] != '/')
		return sbx__error(err, -EINVAL, "cwd must be an absolute path: '%s'", o->cwd);
	for (size_t i = 0; o->env && o->env[i]; i++)
		if (!strchr(o->env[i], '=') || o->env[i][0] == '=')
			return sbx__error(err, -EINVAL, "environment entry must look like NAME=VALUE: '%s'",
			                  o->env[i]);
	return 0;
}

int sbx__command_build(const sbx_policy *p, const sbx_run_options *o, sbx__strv *argv,
                       sbx__strv *env, char **cwd)
{
	int rc = 0;
	if (o->shell) {
		const char *sh[] = { "/bin/sh", "-c", o->shell };
		for (size_t i = 0; rc == 0 && i < 3; i++)
			rc = sbx__strv_push(argv, sh[i]);
	} else {
		for (size_t i = 0; rc == 0 && o->argv[i]; i++)
			rc = sbx__strv_push(argv, o->argv[i]);
	}
	if (rc == 0)
		rc = sbx__env_build(p, o->env, env);
	if (rc == 0 && o->cwd && !(*cwd = strdup(o->cwd)))
		rc = -ENOMEM;
	return rc;
}

/* The value of PATH in an environment, or NULL. */
static const char *env_path(const sbx__strv *env)
{
	for (size_t i = 0; i < env->n; i++)
		if (strncmp(env->v[i], "PATH=", 5) == 0)
			return env->v[i] + 5;
	return NULL;
}

/* Whether |path| (relative to |cwd|) can be executed: 0, ENOENT or EACCES. */
static int check_program(const char *cwd, const char *path)
{
	char full[PATH_MAX];
	if (path[0] != '/' && cwd) {
		if ((size_t)snprintf(full, sizeof full, "%s/%s", cwd, path) >= sizeof full)
			return ENAMETOOLONG;
		path = full;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return errno == ENOTDIR ? ENOENT : errno;
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
		return EACCES;
	return 0;
}

int sbx__resolve_program(const char *file, const sbx__strv *env, const char *cwd, char *out,
                         size_t size)
{
	if (strchr(file, '/')) {
		if ((size_t)snprintf(out, size, "%s", file) >= size)
			return ENAMETOOLONG;
		return check_program(cwd, out);
	}
	const char *path = env_path(env);
	int found = ENOENT;
	for (const char *dir = path ? path : "/usr/bin:/bin"; dir;) {
		size_t dlen = strcspn(dir, ":");
		/* An empty entry means the working directory, as for execvp(). */
		int n = dlen ? snprintf(out, size, "%.*s/%s", (int)dlen, dir, file)
		             : snprintf(out, size, "./%s", file);
		if (n > 0 && (size_t)n < size) {
			int e = check_program(cwd, out);
			if (e == 0)
				return 0;
			if (e == EACCES)
				found = EACCES;
		}
		dir = dir[dlen] ? dir + dlen + 1 : NULL;
	}
	return found;
}

/* ------------------------------------------------------------------ wrap */

void sbx_wrapped_free(sbx_wrapped *w)
{
	if (!w)
		return;
	sbx__strv argv = { w->argv, 0 }, env = { w->env, 0 };
	while (argv.v && argv.v[argv.n])
		argv.n++;
	while (env.v && env.v[env.n])
		env.n++;
	sbx__strv_free(&argv);
	sbx__strv_free(&env);
	free(w->cwd);
	free(w);
}

int sbx_sandbox_wrap(sbx_sandbox *sb, const sbx_run_options *o, sbx_wrapped **out,
                     sbx_error *err)
{
	if (!o || !out)
		return sbx__error(err, -EINVAL, "sbx_sandbox_wrap needs options and a place for the result");
	int rc = sbx__command_check(o, err);
	if (rc < 0)
		return rc;
	sbx__strv argv = {0}, env = {0}, wrapped = {0};
	char *cwd = NULL;
	char program[PATH_MAX];
	rc = sbx__command_build(sb->policy, o, &argv, &env, &cwd);
	if (rc < 0) {
		sbx__error(err, rc, "out of memory");
		goto out;
	}
	int e = sbx__resolve_program(argv.v[0], &env, cwd, program, sizeof program);
	if (e) {
		rc = sbx__error(err, -e, "could not start '%s': %s", argv.v[0], strerrordesc_np(e));
		goto out;
	}
	if (sb->backend->wrap) {
		struct sbx__command cmd = { argv.v, env.v, program, cwd };
		rc = sb->backend->wrap(sb, &cmd, false, &wrapped, NULL, err);
	} else {
		/* Without a wrapper, env(1) carries the environment and the
		 * directory, so the command line stands on its own. */
		rc = sbx__strv_push(&wrapped, "/usr/bin/env");
		if (rc == 0)
			rc = sbx__strv_push(&wrapped, "-i");
		if (rc == 0 && cwd)
			rc = sbx__strv_push(&wrapped, "-C") ?: sbx__strv_push(&wrapped, cwd);
		for (size_t i = 0; rc == 0 && i < env.n; i++)
			rc = sbx__strv_push(&wrapped, env.v[i]);
		if (rc == 0)
			rc = sbx__strv_push(&wrapped, program);
		for (size_t i = 1; rc == 0 && i < argv.n; i++)
			rc = sbx__strv_push(&wrapped, argv.v[i]);
		if (rc < 0)
			sbx__error(err, rc, "out of memory");
	}
	if (rc < 0)
		goto out;
	sbx_wrapped *w = calloc(1, sizeof *w);
	if (!w) {
		rc = sbx__error(err, -ENOMEM, "out of memory");
		goto out;
	}
	w->argv = wrapped.v;
	w->env = env.v;
	w->cwd = cwd;
	wrapped = env = (sbx__strv){0};
	cwd = NULL;
	*out = w;
out:
	sbx__strv_free(&argv);
	sbx__strv_free(&env);
	sbx__strv_free(&wrapped);
	free(cwd);
	return rc;
}
