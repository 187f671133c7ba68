/*
 * protect.c -- the protected defaults, kept in one place.
 *
 * A process that may write a workspace could plant something that runs
 * later, outside the sandbox, when a person opens a shell, runs git or opens
 * an editor there.  And a process that may read a credential and reach the
 * network can send it anywhere.  So, unless the policy turns protected
 * defaults off:
 *
 *   - inside every writable path, these stay read-only when they exist:
 *     shell start-up files, git configuration and hooks, editor task
 *     settings (protect_write below, relative to the writable path);
 *   - these are unreadable, whether they exist or not (protect_read, relative
 *     to $HOME, and protect_read_abs): credentials and container runtime
 *     sockets.  A socket file stays connectable on a read-only mount, which is
 *     why the sockets are hidden rather than merely left read-only.
 *
 * doc/sbx.1 and README list the same names; change them together.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "protect.h"

static const char *const protect_write[] = {
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
	".config/fish",
	".gitconfig", ".git/config", ".git/hooks", ".gitmodules",
	".vscode", ".idea", ".envrc",
};

static const char *const protect_read[] = {
	".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker",
	".config/gcloud", ".config/gh", ".config/hub",
	".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc",
	".password-store", ".vault-token",
};

static const char *const protect_read_abs[] = {
	"/run/docker.sock", "/var/run/docker.sock",
	"/run/containerd/containerd.sock", "/run/podman/podman.sock",
	"/run/crio/crio.sock", "/var/run/crio/crio.sock",
};

static size_t depth(const char *path)
{
	size_t n = 0;
	for (; *path; path++)
		n += *path == '/';
	return n;
}

static int by_depth(const void *pa, const void *pb)
{
	const struct sbx__mask *a = pa, *b = pb;
	size_t da = depth(a->path), db = depth(b->path);
	if (da != db)
		return da < db ? -1 : 1;
	return (int)a->kind - (int)b->kind;
}

/* Adds a mask for "|base|/|name|" unless it is too long or already there. */
static int add(struct sbx__masks *m, const char *base, const char *name, enum sbx__mask_kind kind,
               bool only_existing)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof path, "%s%s%s", base,
	                 base[0] && name[0] && base[strlen(base) - 1] != '/' ? "/" : "", name);
	if (n < 0 || (size_t)n >= sizeof path)
		return 0;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->v[i].path, path) == 0) {
			/* Hiding beats read-only; an explicit denial beats a default. */
			if (kind == SBX__MASK_HIDE)
				m->v[i].kind = kind;
			m->v[i].only_existing &= only_existing;
			return 0;
		}
	struct sbx__mask *v = realloc(m->v, (m->n + 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	m->v = v;
	if (!(v[m->n].path = strdup(path)))
		return -ENOMEM;
	v[m->n].kind = kind;
	v[m->n].only_existing = only_existing;
	m->n++;
	return 0;
}

int sbx__masks_build(const sbx_policy *p, struct sbx__masks *m)
{
	*m = (struct sbx__masks){0};
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < p->deny_write.n; i++)
		rc = add(m, p->deny_write.v[i], "", SBX__MASK_READ_ONLY, false);
	for (size_t i = 0; rc == 0 && i < p->deny_read.n; i++)
		rc = add(m, p->deny_read.v[i], "", SBX__MASK_HIDE, false);
	if (rc == 0 && p->protect_defaults) {
		for (size_t w = 0; rc == 0 && w < p->writable.n; w++)
			for (size_t i = 0; rc == 0 && i < SBX__ARRAY_LEN(protect_write); i++)
				rc = add(m, p->writable.v[w], protect_write[i], SBX__MASK_READ_ONLY, true);
		const char *home = getenv("HOME");
		if (home && home[0] == '/')
			for (size_t i = 0; rc == 0 && i < SBX__ARRAY_LEN(protect_read); i++)
				rc = add(m, home, protect_read[i], SBX__MASK_HIDE, false);
		for (size_t i = 0; rc == 0 && i < SBX__ARRAY_LEN(protect_read_abs); i++)
			rc = add(m, protect_read_abs[i], "", SBX__MASK_HIDE, false);
	}
	if (rc < 0) {
		sbx__masks_free(m);
		return -ENOMEM;
	}
	/* Mounted in this order, a mask must come after every mask above it:
	 * a read-only bind of a directory would otherwise bring back what a
	 * hide mask inside it covered.  Shallowest first, and at one depth
	 * read-only before hidden. */
	if (m->n)
		qsort(m->v, m->n, sizeof *m->v, by_depth);
	return 0;
}

void sbx__masks_free(struct sbx__masks *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	*m = (struct sbx__masks){0};
}
